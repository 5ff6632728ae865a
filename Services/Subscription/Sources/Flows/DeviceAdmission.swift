import Foundation
import Logging
import ServiceKit
import SubscriptionDomain

/// UC-SUB-2.2's limit of 5 active devices, on the content check's hot path (#35, #48): a device
/// this replica remembers is admitted from memory (`AccessReads.devices`), one seen elsewhere is
/// renewed in one statement, and only a new or long-idle one takes the locked count, in a
/// transaction of its own.
struct DeviceAdmission: Sendable {
    let reads: AccessReads
    let store: AccessStore
    let db: DatabasePool
    let logger: Logger

    /// What the check does with its device.
    enum Outcome: Sendable {
        /// Admitted; `renewal` when the device is due to be written as seen again, which the
        /// check's decision carries (one commit for both, #48).
        case admitted(renewal: Renewal?)
        /// Refused: this many other devices are active.
        case refused(active: Int)
    }

    /// A device due to be written as seen again: remembered as written once its decision is stored.
    struct Renewal: Sendable {
        let key: AccessReads.DeviceKey
        let ticket: ReadCache<AccessReads.DeviceKey, Date>.Ticket
    }

    /// A device this replica wrote as seen less than 14 minutes ago is admitted from memory (its
    /// `last_seen` moves on after 60-120 s, with the check's decision); any other is renewed if
    /// it is active, else goes through the locked count in the database
    /// (`AccessStore.admitDevice`), so the limit is exact.
    func admit(app: UUID, user: UUID, device: String, now: Date) async throws -> Outcome {
        let key = AccessReads.DeviceKey(app: app, user: user, device: device)
        if let written = reads.devices.value(for: key) {
            // The spread from the key's hash: stable for the device in this process.
            let spread = Double(UInt(bitPattern: key.hashValue) % 1000) / 1000
            let remembered = AccessPolicy.remembered(written: written, now: now, spread: spread)
            if remembered.active {
                return .admitted(renewal: remembered.rewrite ? Renewal(key: key, ticket: reads.devices.ticket(for: key)) : nil)
            }
        }
        let ticket = reads.devices.ticket(for: key)
        // Seen by another replica (or before a restart) well within the window: renewed in one
        // statement, not through the locked count.
        if try await store.renewActiveDevice(
            app: app,
            user: user,
            device: device,
            activeSince: AccessPolicy.renewableSince(now: now),
            now: now,
            db: db
        ) {
            reads.devices.store(now, for: key, ticket: ticket)
            return .admitted(renewal: nil)
        }
        let refused = try await db.withTransaction(logger: logger) { conn in
            try await store.admitDevice(
                app: app,
                user: user,
                device: device,
                limit: AccessPolicy.maxActiveDevices,
                since: now.addingTimeInterval(-AccessPolicy.deviceActiveWindow),
                now: now,
                on: conn
            )
        }
        if let refused {
            return .refused(active: refused)
        }
        reads.devices.store(now, for: key, ticket: ticket)
        return .admitted(renewal: nil)
    }

    /// The device's sighting went with a stored decision: remembered as written at `at`.
    func renewed(_ renewal: Renewal, at: Date) {
        reads.devices.store(at, for: renewal.key, ticket: renewal.ticket)
    }
}

import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import WireTypes

/// Periodic upkeep: anonymise locations after 90 days (coarsened to 0.1°, unlinked), expire
/// offline copies after 30 days, drop copies not opened for 90 days, auto-resolve conflicts
/// older than 7 days, purge tombstones past the 30-day window.
struct OfflineMaintenance: Service {
    let db: DatabasePool
    let catalog: CatalogStore
    let sync: SyncStore
    let locations: LocationStore
    var copies: CopyStore { CopyStore(logger: logger) }
    let clock: any WallClock
    let interval: Duration
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do { _ = try await runOnce() } catch { logger.warning("offline maintenance failed", metadata: ["error": "\(error)"]) }
                try? await Task.sleep(for: interval)
            }
        }
    }

    struct Report: Sendable, Equatable { var anonymized = 0, expired = 0, stale = 0, conflicts = 0, tombstoneApps = 0 }

    static let copyBatch = 500

    /// What `runOnce` runs, batch by batch (periodic queries).
    static func periodicQueries(now: Date) -> [PeriodicQuery] {
        [
            PeriodicQuery(
                "location anonymisation",
                LocationStore.anonymizeQuery(olderThan: now.addingTimeInterval(-OfflineRules.staleAfter), batch: 1000)
            ),
            PeriodicQuery("copies expired", CopyStore.dueQuery(.expired, before: now, batch: copyBatch)),
            PeriodicQuery(
                "copies unopened",
                CopyStore.dueQuery(.unopened, before: now.addingTimeInterval(-OfflineRules.staleAfter), batch: copyBatch)
            ),
            PeriodicQuery(
                "conflict auto-resolution",
                SyncStore.autoResolveQuery(
                    before: now.addingTimeInterval(-OfflineRules.conflictAutoResolveAfter),
                    now: now,
                    batch: 1000
                )
            ),
            PeriodicQuery(
                "tombstone purge",
                CatalogStore.tombstonesQuery(before: now.addingTimeInterval(-OfflineRules.tombstoneWindow), batch: 1000)
            ),
        ]
    }

    func runOnce() async throws -> Report {
        let now = clock.now()
        var r = Report()
        r.anonymized = try await db.withConnection {
            try await locations.anonymize(olderThan: now.addingTimeInterval(-OfflineRules.staleAfter), on: $0)
        }
        // In batches (no long lock on a user's copies while a big backlog drains).
        for (due, cutoff) in [(CopyStore.Due.expired, now), (.unopened, now.addingTimeInterval(-OfflineRules.staleAfter))] {
            var n = 0
            while true {
                // Each batch in its own short transaction: no long lock on a user's copies.
                let removed = try await db.withTransaction(logger: logger) { conn in
                    try await copies.deleteDue(due, before: cutoff, batch: Self.copyBatch, on: conn)
                }
                n += removed
                if removed < Self.copyBatch { break }
            }
            if due == .expired { r.expired = n } else { r.stale = n }
        }
        r.conflicts = try await sync.autoResolveOld(before: now.addingTimeInterval(-OfflineRules.conflictAutoResolveAfter), now: now, db: db)
        var apps = Set<UUID>()
        while true {
            let (purged, touched) = try await db.withTransaction(logger: logger) { conn in
                try await catalog.purgeTombstones(before: now.addingTimeInterval(-OfflineRules.tombstoneWindow), batch: 1000, on: conn)
            }
            apps.formUnion(touched)
            if purged < 1000 { break }
        }
        r.tombstoneApps = apps.count
        return r
    }
}

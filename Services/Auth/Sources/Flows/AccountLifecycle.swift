import AuthDomain
import AuthMessaging
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import WireTypes

/// Account deletion at J+30 (seed 6b) and guest expiry after 30 days without activity: the
/// auth rows are anonymised or removed, and every other service is told, through the outbox,
/// to forget the user.
public struct AccountLifecycle: Sendable {
    public static let gracePeriod: TimeInterval = 30 * 24 * 3600
    public static let queue = "auth"
    public static let executeDeletionJob = "execute_deletion"

    let logger: Logger
    let clock: any WallClock
    let sessions: SessionRegistry
    var appleRevoker: AppleRevoker? = nil
    var facts: FactPublisher { FactPublisher(logger: logger) }
    var accounts: AccountStore { AccountStore(logger: logger) }

    /// The other services, each of which serves `DELETE /internal/users/{id}`.
    static let dataOwners: [ServiceName] = [.subscription, .offline, .ads]

    /// The erasure, as a versioned fact: every session ends at once (auth's replicas and every
    /// service refuse the user's tokens), then each service deletes what it holds. Auth keeps
    /// nothing of its fact versions; the erased state refuses anything later.
    func erase(userID: UUID, appID: UUID, on conn: PostgresConnection) async throws -> SessionFact {
        let fact = try await facts.endSessions(app: appID, user: userID, .erased, on: conn)
        for service in Self.dataOwners {
            try await Outbox.write(
                OutboxMessage(
                    InternalRoutes.erase,
                    to: service,
                    path: InternalRoutes.erase.path(user: userID, app: appID, query: [("version", String(fact.version))])
                ),
                on: conn,
                logger: logger
            )
        }
        try await facts.facts.forget(app: appID, user: userID, on: conn)
        try await MessagingOutbox.forgetLiveEvents(app: appID, user: userID, on: conn, logger: logger)
        // #33: after erasure the app's servers are told; only the id (UC-AUTH-1.4).
        try await MessagingOutbox.webhook(
            .userDeleted,
            app: appID,
            version: Int64(fact.version),
            data: ["user_id": .string(userID.lowercasedString)],
            on: conn,
            logger: logger
        )
        return fact
    }

    struct DeletionJob: Codable, Sendable {
        var deletionID: UUID
        enum CodingKeys: String, CodingKey { case deletionID = "deletion_id" }
    }

    /// The J+30 job: anonymises the account unless the deletion was cancelled meanwhile.
    func executeDeletion(_ job: Job, db: DatabasePool) async throws {
        let payload = try job.decode(DeletionJob.self)
        let now = clock.now()
        let erased: SessionFact? = try await db.withTransaction(logger: logger) { conn in
            guard let d = try await accounts.lockDeletion(payload.deletionID, on: conn), d.status == "scheduled" else { return nil }
            guard d.due <= now else { throw JobNotDue() }
            // Apple requires apps to revoke its tokens when an account is deleted; a failure
            // leaves the job to retry rather than deleting without revoking.
            try await appleRevoker?.revoke(userID: d.userID, appID: d.appID, on: conn, logger: logger, now: now)
            try await accounts.anonymise(userID: d.userID, now: now, on: conn)
            try await accounts.markExecuted(payload.deletionID, now: now, on: conn)
            let fact = try await erase(userID: d.userID, appID: d.appID, on: conn)
            try await AuditLog(logger: logger).record(.init(userID: d.userID, appID: d.appID, action: "account_deleted", result: "success"), on: conn)
            return fact
        }
        if let erased { sessions.apply([erased]) }
    }

    struct JobNotDue: Error {}

    /// Removes guests idle for 30 days (a batch at a time, `SKIP LOCKED` so replicas share
    /// the work) and tells the other services. Returns how many were removed.
    public static let guestExpiryBatch = 200
    @discardableResult
    public func expireGuests(db: DatabasePool, batch: Int = Self.guestExpiryBatch) async throws -> Int {
        let now = clock.now()
        let erased: [SessionFact] = try await db.withTransaction(logger: logger) { conn in
            let removed = try await accounts.deleteExpiredGuests(now: now, batch: batch, on: conn)
            var facts: [SessionFact] = []
            for (userID, appID) in removed {
                facts.append(try await erase(userID: userID, appID: appID, on: conn))
                try await AuditLog(logger: logger).record(.init(userID: userID, appID: appID, action: "guest_expired", result: "success"), on: conn)
            }
            return facts
        }
        sessions.apply(erased)
        return erased.count
    }
}

/// Runs the guest expiry sweep every `interval` while the service runs.
public struct GuestExpirySweeper: Service {
    let lifecycle: AccountLifecycle
    let db: DatabasePool
    let interval: Duration

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    while try await lifecycle.expireGuests(db: db) > 0 {}
                } catch {
                    lifecycle.logger.warning("guest expiry sweep failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}

/// Revokes the Apple refresh token kept for a user, if any.
struct AppleRevoker: Sendable {
    let apple: any AppleSignIn
    let configs: TenantSettings<AppleClientConfig>
    let box: SecretBox

    func revoke(userID: UUID, appID: UUID, on conn: PostgresConnection, logger: Logger, now: Date) async throws {
        for sealed in try await AccountStore(logger: logger).sealedAppleTokens(userID: userID, on: conn) {
            guard let config = try await configs.value(for: appID) else {
                logger.error("Apple token kept but no Apple key configured to revoke it", metadata: ["app_id": "\(appID)"])
                return
            }
            try await apple.revoke(refreshToken: try box.open(sealed), config: config, now: now)
        }
    }
}

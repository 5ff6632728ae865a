import AuthDomain
import Foundation
import Logging
import ServiceKit
import WireTypes

/// Seed 6b, the user's side of an account deletion: scheduled at J+30 (the execution is
/// `AccountLifecycle`'s job), or cancelled with the emailed link. The flow owns the
/// transactions (#50).
struct DeletionScheduling: Sendable {
    let db: DatabasePool
    let logger: Logger
    let users: UserStore
    let refreshTokens: RefreshTokenStore
    let emailTokens: EmailTokenStore
    let audit: AuditLog

    /// Seed 6b: the deletion at `due` (J+30) with its job and the cancel link's token, and the
    /// user signed out on every device. Answers the address to tell, if any.
    func schedule(appID: UUID, userID: UUID, reason: String?, token: String, now: Date, due: Date, origin: AuditLog.Origin) async throws -> String? {
        try await db.withTransaction(logger: logger) { conn in
            guard let user = try await users.find(.id(userID), appID: appID, on: conn, forUpdate: true) else {
                throw AppError(.unauthorized, "invalid_token", "This account no longer exists")
            }
            if let already = user.deletionScheduledAt {
                throw AppError(
                    AuthErrorCode.deletionAlreadyScheduled,
                    "Account deletion is already scheduled",
                    extra: ["scheduled_deletion_date": .string(ISO8601DateFormatter().string(from: already))]
                )
            }
            let deletionID = try await AccountStore(logger: logger).scheduleDeletion(
                userID: userID,
                appID: appID,
                reason: reason,
                now: now,
                due: due,
                on: conn
            )
            try await emailTokens.insert(token: token, userID: userID, purpose: .deletionCancel, expiresAt: due, on: conn)
            try await JobQueue.enqueue(
                on: conn,
                queue: AccountLifecycle.queue,
                kind: AccountLifecycle.executeDeletionJob,
                payload: AccountLifecycle.DeletionJob(deletionID: deletionID),
                runAt: due,
                maxAttempts: 20,
                uniqueKey: "deletion:\(deletionID)",
                logger: logger
            )
            // Seed 6b.7: the user is signed out on every device.
            try await refreshTokens.revokeAll(userID: userID, reason: "deletion_requested", on: conn)
            try await audit.record(
                origin.entry(
                    "deletion_requested",
                    "success",
                    app: appID,
                    user: userID,
                    details: ["scheduled_for": .string(ISO8601DateFormatter().string(from: due))]
                ),
                on: conn
            )
            return user.email
        }
    }

    /// The emailed link cancels a deletion still scheduled.
    func cancel(token: String, appID: UUID, now: Date, origin: AuditLog.Origin) async throws {
        try await db.withTransaction(logger: logger) { conn in
            guard let userID = try await emailTokens.consume(token: token, purpose: .deletionCancel, now: now, on: conn),
                try await users.find(.id(userID), appID: appID, on: conn) != nil
            else {
                throw EmailProofs.invalidLink
            }
            try await AccountStore(logger: logger).cancelDeletion(userID: userID, now: now, on: conn)
            try await audit.record(origin.entry("deletion_cancelled", "success", app: appID, user: userID), on: conn)
        }
    }
}

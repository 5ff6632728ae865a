import AuthDomain
import Foundation
import Logging
import ServiceKit
import WireTypes

/// Support acting for one player of the operator's app (#47): sign them out everywhere (a
/// stolen phone), cancel a scheduled deletion (they changed their mind on the phone with
/// support). Each with a reason, in the user's audit trail with the operator who did it, in one
/// transaction.
struct SupportActions: Sendable {
    let db: DatabasePool
    let logger: Logger
    let clock: any WallClock
    let users: UserStore
    let audit: AuditLog
    let sessions: SessionRegistry
    let signOut: SignOutEverywhere

    static let noDeletion = AppError(AuthErrorCode.deletionNotScheduled, "No deletion is scheduled for this user")

    /// Every refresh token revoked, every session ended (the other services hear it), every push
    /// device forgotten: what the user's own "sign out everywhere" does.
    func revokeSessions(app: UUID, user: UUID, reason: String, by who: Operator) async throws -> Int {
        let (revoked, fact) = try await db.withTransaction(logger: logger) { conn in
            guard try await users.find(.id(user), appID: app, on: conn, forUpdate: true) != nil else { throw AppError.notFound("User") }
            let (n, fact) = try await signOut.run(app: app, user: user, reason: "support", on: conn)
            try await audit.record(
                AuditLog.Entry(
                    userID: user,
                    appID: app,
                    action: "support.sessions_revoked",
                    result: "success",
                    details: ["operator": .string(who.auditName), "reason": .string(reason), "revoked": .int(n)]
                ),
                on: conn
            )
            return (n, fact)
        }
        sessions.apply([fact])
        return revoked
    }

    /// The scheduled deletion cancelled (its job then finds nothing to do); 409 when none is.
    func cancelDeletion(app: UUID, user: UUID, reason: String, by who: Operator) async throws {
        let now = clock.now()
        try await db.withTransaction(logger: logger) { conn in
            guard let found = try await users.find(.id(user), appID: app, on: conn, forUpdate: true) else { throw AppError.notFound("User") }
            guard found.deletionScheduledAt != nil else { throw Self.noDeletion }
            try await AccountStore(logger: logger).cancelDeletion(userID: user, now: now, on: conn)
            try await audit.record(
                AuditLog.Entry(
                    userID: user,
                    appID: app,
                    action: "deletion_cancelled",
                    result: "success",
                    details: ["operator": .string(who.auditName), "reason": .string(reason)]
                ),
                on: conn
            )
        }
    }
}

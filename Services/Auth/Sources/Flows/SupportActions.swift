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
    let ctx: AuthContext

    static let noDeletion = AppError(AuthErrorCode.deletionNotScheduled, "No deletion is scheduled for this user")

    /// Every refresh token revoked, every session ended (the other services hear it), every push
    /// device forgotten: what the user's own "sign out everywhere" does.
    func revokeSessions(app: UUID, user: UUID, reason: String, by who: Operator) async throws -> Int {
        let (revoked, fact) = try await ctx.db.withTransaction(logger: ctx.logger) { conn in
            guard try await ctx.users.find(.id(user), appID: app, on: conn, forUpdate: true) != nil else { throw AppError.notFound("User") }
            let (n, fact) = try await ctx.signOutEverywhere(app: app, user: user, reason: "support", on: conn)
            try await ctx.audit.record(
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
        ctx.sessions.apply([fact])
        return revoked
    }

    /// The scheduled deletion cancelled (its job then finds nothing to do); 409 when none is.
    func cancelDeletion(app: UUID, user: UUID, reason: String, by who: Operator) async throws {
        let now = ctx.clock.now()
        try await ctx.db.withTransaction(logger: ctx.logger) { conn in
            guard let found = try await ctx.users.find(.id(user), appID: app, on: conn, forUpdate: true) else { throw AppError.notFound("User") }
            guard found.deletionScheduledAt != nil else { throw Self.noDeletion }
            try await AccountStore(logger: ctx.logger).cancelDeletion(userID: user, now: now, on: conn)
            try await ctx.audit.record(
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

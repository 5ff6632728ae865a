import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// Seed 6b: `DELETE /auth/me` schedules the deletion at J+30 and signs the user out
/// everywhere; `POST /auth/deletion/cancel` with the emailed token cancels it.
struct DeletionController {
    let ctx: AuthContext

    func addRoutes(tenant: RouterGroup<ServiceRequestContext>, user: RouterGroup<ServiceRequestContext>) {
        user.delete("auth/me") { request, context in try await schedule(request, context) }
        tenant.post("auth/deletion/cancel") { request, context in try await cancel(request, context) }
    }

    struct ScheduleBody: Codable { var reason: String? }
    struct Scheduled: Codable {
        var scheduledDeletionDate: Date
        var cancellationToken: String
        enum CodingKeys: String, CodingKey { case scheduledDeletionDate = "scheduled_deletion_date"; case cancellationToken = "cancellation_token" }
    }

    func schedule(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        // The body is optional (`{"reason": "user_request"}`).
        let hasBody = (request.headers[.contentLength].flatMap(Int.init) ?? 0) > 0
        let reason = hasBody ? try await request.decodeJSON(as: ScheduleBody.self, context: context).reason.map { String($0.prefix(200)) } : nil
        let now = ctx.clock.now()
        let due = now.addingTimeInterval(AccountLifecycle.gracePeriod)
        let token = OpaqueToken.generate()
        let email: String? = try await ctx.db.withTransaction(logger: ctx.logger) { conn in
            guard let user = try await ctx.users.find(.id(userID), appID: appID, on: conn, forUpdate: true) else {
                throw AppError(.unauthorized, "invalid_token", "This account no longer exists")
            }
            if let already = user.deletionScheduledAt {
                throw AppError(
                    AuthErrorCode.deletionAlreadyScheduled, "Account deletion is already scheduled",
                    extra: ["scheduled_deletion_date": .string(ISO8601DateFormatter().string(from: already))])
            }
            let deletionID = try await AccountStore(logger: ctx.logger).scheduleDeletion(
                userID: userID, appID: appID, reason: reason,
                now: now, due: due, on: conn)
            try await ctx.emailTokens.insert(token: token, userID: userID, purpose: .deletionCancel, expiresAt: due, on: conn)
            try await JobQueue.enqueue(
                on: conn, queue: AccountLifecycle.queue, kind: AccountLifecycle.executeDeletionJob,
                payload: AccountLifecycle.DeletionJob(deletionID: deletionID), runAt: due,
                maxAttempts: 20, uniqueKey: "deletion:\(deletionID)", logger: ctx.logger)
            // Seed 6b.7: the user is signed out on every device.
            try await ctx.refreshTokens.revokeAll(userID: userID, reason: "deletion_requested", on: conn)
            try await ctx.audit.record(
                ctx.entry(
                    "deletion_requested", "success", app: appID, user: userID, request, context,
                    details: ["scheduled_for": .string(ISO8601DateFormatter().string(from: due))]), on: conn)
            return user.email
        }
        if let email {
            let date = String(ISO8601DateFormatter().string(from: due).prefix(10))
            do {
                try await ctx.mailer.send(
                    try await ctx.emails.message(
                        .deletionScheduled, app: appID, to: email,
                        locale: EmailLocale.preferred(request.headers[.acceptLanguage]),
                        path: "/cancel-deletion?token=\(token)", values: ["date": date]))
            } catch { ctx.logger.error("deletion email not sent", metadata: ["error": "\(error)"]) }
        }
        return try context.json(Scheduled(scheduledDeletionDate: due, cancellationToken: token), status: .accepted)
    }

    struct CancelBody: Codable { var token: String }

    func cancel(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let appID = try context.requireApp()
        try await ctx.enforceSignInLimit(context, scope: "deletion-cancel")
        let body = try await request.decodeJSON(as: CancelBody.self, context: context)
        let now = ctx.clock.now()
        try await ctx.db.withTransaction(logger: ctx.logger) { conn in
            guard let userID = try await ctx.emailTokens.consume(token: body.token, purpose: .deletionCancel, now: now, on: conn),
                try await ctx.users.find(.id(userID), appID: appID, on: conn) != nil
            else {
                throw EmailFlowsController.invalidLink
            }
            try await AccountStore(logger: ctx.logger).cancelDeletion(userID: userID, now: now, on: conn)
            try await ctx.audit.record(ctx.entry("deletion_cancelled", "success", app: appID, user: userID, request, context), on: conn)
        }
        return try context.json(["deletion_cancelled": true])
    }
}

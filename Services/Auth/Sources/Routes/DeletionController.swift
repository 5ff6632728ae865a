import AuthDomain
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// Seed 6b: `DELETE /auth/me` schedules the deletion at J+30 and signs the user out
/// everywhere; `POST /auth/deletion/cancel` with the emailed token cancels it.
struct DeletionController {
    let ctx: AuthContext
    var deletion: DeletionScheduling { DeletionScheduling(ctx: ctx) }

    func addRoutes(tenant: RouterGroup<ServiceRequestContext>, user: RouterGroup<ServiceRequestContext>) {
        user.delete("auth/me") { request, context in try await schedule(request, context) }
        tenant.post("auth/deletion/cancel") { request, context in try await cancel(request, context) }
    }

    struct ScheduleBody: Codable { var reason: String? }
    struct Scheduled: Codable {
        var scheduledDeletionDate: Date
        var cancellationToken: String
        enum CodingKeys: String, CodingKey {
            case scheduledDeletionDate = "scheduled_deletion_date"
            case cancellationToken = "cancellation_token"
        }
    }

    func schedule(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        // The body is optional (`{"reason": "user_request"}`).
        let hasBody = (request.headers[.contentLength].flatMap(Int.init) ?? 0) > 0
        let reason = hasBody ? try await request.decodeJSON(as: ScheduleBody.self, context: context).reason.map { String($0.prefix(200)) } : nil
        let now = ctx.clock.now()
        let due = now.addingTimeInterval(AccountLifecycle.gracePeriod)
        let token = OpaqueToken.generate()
        let email = try await deletion.schedule(
            appID: appID,
            userID: userID,
            reason: reason,
            token: token,
            now: now,
            due: due,
            origin: ctx.origin(request, context)
        )
        if let email {
            let date = String(ISO8601DateFormatter().string(from: due).prefix(10))
            do {
                try await ctx.mailer.send(
                    try await ctx.emails.message(
                        .deletionScheduled,
                        app: appID,
                        to: email,
                        locale: EmailLocale.preferred(request.headers[.acceptLanguage]),
                        path: "/cancel-deletion?token=\(token)",
                        values: ["date": date]
                    )
                )
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
        try await deletion.cancel(token: body.token, appID: appID, now: now, origin: ctx.origin(request, context))
        return try context.json(["deletion_cancelled": true])
    }
}

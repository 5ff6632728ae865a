import Foundation
import Hummingbird
import Logging
import ServiceKit
import SubscriptionDomain
import WireTypes

/// `/admin/users/{id}/premium`: support grants premium for a number of days, or ends what it
/// granted, with a reason (#16). A grant is a subscription of the store `support`: the
/// subscription events, the user's history and export, the expiry sweep and the facts told to
/// auth, ads and offline all treat it as any purchase.
struct SupportPremiumController {
    let grants: SupportGrants
    let clock: any WallClock

    struct GrantBody: Decodable {
        var days: Int
        var reason: String
    }
    struct RevokeBody: Decodable { var reason: String }
    struct Granted: Encodable {
        var subscriptionID: UUID, validUntil: Date, replayed: Bool
        enum CodingKeys: String, CodingKey {
            case subscriptionID = "subscription_id"
            case validUntil = "valid_until"
            case replayed
        }
    }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.post("admin/users/:id/premium") { request, context in
            let app = try context.requireApp()
            let user = try SupportCreditsController.userID(context)
            let key = try SupportCreditsController.requiredKey(request)
            let body = try await request.decodeJSON(as: GrantBody.self, context: context)
            guard (1...366).contains(body.days) else { throw AppError.validation("days", "days must be 1 to 366") }
            let reason = try OperatorReason.checked(body.reason)
            let now = clock.now()
            let until = now.addingTimeInterval(Double(body.days) * 86_400)
            let who = context.operator?.auditName ?? "unknown"
            let outcome = try await grants.grantPremium(
                app: app,
                user: user,
                key: key,
                days: body.days,
                until: until,
                reason: reason,
                operator: who,
                now: now
            )
            switch outcome {
            case .granted(let id): return try context.json(Granted(subscriptionID: id, validUntil: until, replayed: false), status: .created)
            case .replayed(let id): return try context.json(Granted(subscriptionID: id, validUntil: until, replayed: true))
            case .keyReused: throw AppError(.unprocessableContent, "idempotency_key_reused", "This Idempotency-Key was used for another user")
            }
        }
        admin.delete("admin/users/:id/premium") { request, context in
            let app = try context.requireApp()
            let user = try SupportCreditsController.userID(context)
            let reason = try OperatorReason.checked(try await request.decodeJSON(as: RevokeBody.self, context: context).reason)
            let now = clock.now()
            let who = context.operator?.auditName ?? "unknown"
            let ended = try await grants.endPremium(app: app, user: user, reason: reason, operator: who, now: now)
            guard !ended.isEmpty else {
                throw AppError(SubscriptionErrorCode.noSupportPremium, "Support granted this user no premium that is still running")
            }
            return try context.json(["ended": ended.map(\.lowercasedString)])
        }
    }
}

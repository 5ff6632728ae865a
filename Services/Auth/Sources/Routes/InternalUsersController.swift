import AuthDomain
import Foundation
import Hummingbird
import ServiceKit
import WireTypes

/// `/internal/users/...`: what other services ask auth about a user.
struct InternalUsersController {
    let ctx: AuthContext
    var facts: ServiceFacts { ServiceFacts(ctx: ctx) }

    func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.on(InternalRoutes.user) { request, context in
            let (appID, userID) = try ids(request, context)
            let user = try await find(userID, appID: appID)
            return try context.json(
                UserSummary(
                    id: user.id,
                    appID: user.appID,
                    email: user.email,
                    emailVerified: user.emailVerified,
                    status: user.status,
                    isGuest: user.isGuest,
                    createdAt: user.createdAt
                )
            )
        }
        group.on(InternalRoutes.consents) { request, context in
            let (appID, userID) = try ids(request, context)
            guard
                let (p, versions) = try await ctx.db.withConnection({ conn -> (PrivacySettings, [String: Int64])? in
                    guard try await ctx.users.find(.id(userID), appID: appID, on: conn) != nil,
                        let p = try await ctx.users.privacy(of: userID, on: conn)
                    else { return nil }
                    var versions: [String: Int64] = [:]
                    for consent in [ConsentFact.geolocation, ConsentFact.personalizedAds, ConsentFact.analytics] {
                        versions[consent] = try await ctx.facts.consentVersion(app: appID, user: userID, consent: consent, on: conn)
                    }
                    return (p, versions)
                })
            else { throw AppError.notFound("User") }
            return try context.json(
                ConsentChange(
                    appID: appID,
                    userID: userID,
                    geolocation: p.consentGeolocation,
                    personalizedAds: p.consentPersonalizedAds,
                    analytics: p.consentAnalytics,
                    changedAt: p.updatedAt ?? ctx.clock.now(),
                    versions: versions
                )
            )
        }
        group.on(InternalRoutes.purchaseConfirmation) { request, context in try await purchaseConfirmation(request, context) }
        // Subscription sets premium/free; suspension is an operator's decision, not a service's.
        group.on(InternalRoutes.userStatus) { request, context in
            guard let userID = context.parameters.get("id", as: UUID.self) else { throw AppError.badRequest("User id must be a UUID", field: "id") }
            let body = try await request.decodeJSON(as: UserStatusUpdate.self, context: context)
            guard body.status != .suspended else {
                throw AppError.validation("status", "Only 'premium' or 'free' can be set by a service")
            }
            guard body.version > 0 else { throw AppError.validation("version", "version must be a positive integer") }
            if let app = request.uri.queryParameters.get("app_id"), UUID(uuidString: app) != body.appID {
                throw AppError.validation("app_id", "the query and the body name different applications")
            }
            let updated = try await facts.status(body, userID: userID)
            guard let updated else { throw AppError.notFound("User") }
            return try context.json(
                UserSummary(
                    id: updated.id,
                    appID: updated.appID,
                    email: updated.email,
                    emailVerified: updated.emailVerified,
                    status: updated.status,
                    isGuest: updated.isGuest,
                    createdAt: updated.createdAt
                )
            )
        }
    }

    /// Seed 2.1: subscription asks for the purchase confirmation email (through its outbox). Sent
    /// once per subscription; a user without an address (a guest) gets none; a failed send is a
    /// 503, so the outbox delivers the request again.
    func purchaseConfirmation(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        guard context.callingService == .subscription else {
            throw AppError(.forbidden, "forbidden", "Only subscription confirms purchases")
        }
        guard let userID = context.parameters.get("id", as: UUID.self) else { throw AppError.badRequest("User id must be a UUID", field: "id") }
        let body = try await request.decodeJSON(as: PurchaseConfirmation.self, context: context)
        if let app = request.uri.queryParameters.get("app_id"), UUID(uuidString: app) != body.appID {
            throw AppError.validation("app_id", "the query and the body name different applications")
        }
        let outcome = try await facts.purchaseConfirmation(body, userID: userID)
        return try context.json(["sent": JSONValue.bool(outcome == "sent"), "result": .string(outcome)])
    }

    /// The user id from the path and the tenant from `?app_id=`: internal calls are scoped too.
    func ids(_ request: Request, _ context: ServiceRequestContext) throws -> (UUID, UUID) {
        let (user, app) = try request.internalUserAndApp(context)
        return (app, user)
    }

    func find(_ id: UUID, appID: UUID) async throws -> User {
        guard let user = try await ctx.db.withConnection({ try await ctx.users.find(.id(id), appID: appID, on: $0) }) else {
            throw AppError.notFound("User")
        }
        return user
    }
}

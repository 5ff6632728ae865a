import AuthDomain
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-AUTH-1.4: the six consents, applied to the other services through the outbox.
struct PrivacyController {
    let ctx: AuthContext
    var privacy: PrivacyChoices { PrivacyChoices(ctx: ctx) }

    func addRoutes(to user: RouterGroup<ServiceRequestContext>) {
        user.get("auth/privacy") { _, context in
            let (_, userID) = try context.requireUser()
            guard let settings = try await ctx.db.withConnection({ try await ctx.users.privacy(of: userID, on: $0) }) else {
                throw AppError.notFound("Privacy settings")
            }
            return try context.json(["privacy": settings])
        }
        user.patch("auth/privacy") { request, context in try await update(request, context) }
    }

    func addInternalRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.on(InternalRoutes.consentAnswer) { request, context in try await answerFromAds(request, context) }
    }

    struct Warning: Codable, Sendable {
        var setting: String
        var impact: String
        var message: String
    }
    struct UpdateResponse: Codable, Sendable {
        var privacy: PrivacySettings
        var appliedImmediately: Bool
        var warnings: [Warning]
        enum CodingKeys: String, CodingKey {
            case privacy
            case appliedImmediately = "applied_immediately"
            case warnings
        }
    }

    static let fields = [
        "consent_analytics", "consent_third_party", "consent_geolocation",
        "consent_personalized_ads", "consent_notifications", "consent_game_center",
    ]

    /// Only the six booleans are accepted (a subset is fine: the others keep their value).
    static func parse(_ body: [String: JSONValue], onto current: PrivacySettings) throws -> PrivacySettings {
        if body.isEmpty { throw AppError.badRequest("Give at least one of: \(fields.joined(separator: ", "))") }
        var s = current
        for (key, value) in body {
            guard fields.contains(key) else { throw AppError.badRequest("Unknown field '\(key)'", field: key) }
            guard case .bool(let b) = value else { throw AppError.badRequest("Field '\(key)' must be of type boolean", field: key) }
            switch key {
            case "consent_analytics": s.consentAnalytics = b
            case "consent_third_party": s.consentThirdParty = b
            case "consent_geolocation": s.consentGeolocation = b
            case "consent_personalized_ads": s.consentPersonalizedAds = b
            case "consent_notifications": s.consentNotifications = b
            default: s.consentGameCenter = b
            }
        }
        return s
    }

    func update(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        let body = try await request.decodeJSON(as: [String: JSONValue].self, context: context)
        let now = ctx.clock.now()
        let (old, new) = try await privacy.update(
            appID: appID,
            userID: userID,
            details: body,
            now: now,
            origin: ctx.origin(request, context)
        ) { current in try Self.parse(body, onto: current) }
        var warnings: [Warning] = []
        if old.consentGeolocation && !new.consentGeolocation {
            // Seed 11a: offline deletes the locations when it applies the withdrawal.
            warnings.append(
                Warning(
                    setting: "consent_geolocation",
                    impact: "local_questions_unavailable",
                    message: "Questions locales ne seront plus disponibles"
                )
            )
        }
        if old.consentPersonalizedAds && !new.consentPersonalizedAds {
            warnings.append(
                Warning(
                    setting: "consent_personalized_ads",
                    impact: "non_personalized_ads",
                    message: "Les publicités ne seront plus personnalisées"
                )
            )
        }
        let settings = new
        return try context.json(UpdateResponse(privacy: settings, appliedImmediately: true, warnings: warnings))
    }

    /// `POST /internal/users/{id}/consent-answers/personalized_ads?app_id=`: the user answered on
    /// the ads screen. Applied unless auth changed that consent since the answer ads held (then
    /// auth's newer answer stands and is already on its way to ads). Audited like any change.
    func answerFromAds(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        guard context.callingService == .ads else { throw AppError(.forbidden, "forbidden", "Only ads answers this consent") }
        let (user, app) = try request.internalUserAndApp(context)
        guard context.parameters.get("consent") == ConsentFact.personalizedAds else {
            throw AppError.validation("consent", "only personalized_ads is answered on another screen")
        }
        let answer = try await request.decodeJSON(as: ConsentAnswer.self, context: context)
        guard answer.appID == app else { throw AppError.validation("app_id", "the query and the body name different applications") }
        guard answer.basedOn >= 0 else { throw AppError.validation("based_on", "based_on must not be negative") }
        let now = ctx.clock.now()
        let outcome = try await privacy.answerFromAds(answer, app: app, user: user, now: now)
        return try context.json(outcome)
    }
}

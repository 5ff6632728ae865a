import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-AUTH-1.4: the six consents, applied to the other services through the outbox.
struct PrivacyController {
    let ctx: AuthContext

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

    struct Warning: Codable, Sendable { var setting: String; var impact: String; var message: String }
    struct UpdateResponse: Codable, Sendable {
        var privacy: PrivacySettings
        var appliedImmediately: Bool
        var warnings: [Warning]
        enum CodingKeys: String, CodingKey { case privacy; case appliedImmediately = "applied_immediately"; case warnings }
    }

    static let fields = ["consent_analytics", "consent_third_party", "consent_geolocation",
                         "consent_personalized_ads", "consent_notifications", "consent_game_center"]

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
        let (settings, warnings) = try await ctx.db.withTransaction(logger: ctx.logger) { conn -> (PrivacySettings, [Warning]) in
            guard let current = try await ctx.users.privacy(of: userID, on: conn) else { throw AppError.notFound("Privacy settings") }
            let wanted = try Self.parse(body, onto: current)
            guard let (old, new) = try await ctx.users.updatePrivacy(of: userID, to: wanted, now: now, on: conn) else {
                throw AppError.notFound("Privacy settings")
            }
            var warnings: [Warning] = []
            let consent = ConsentChange(appID: appID, userID: userID, geolocation: new.consentGeolocation,
                                        personalizedAds: new.consentPersonalizedAds, analytics: new.consentAnalytics,
                                        changedAt: now)
            // The receivers' internal routes are scoped by tenant too (`?app_id=`).
            let userPath = "/internal/users/\(userID.uuidString.lowercased())"
            let scope = "?app_id=\(appID.uuidString.lowercased())"
            if old.consentGeolocation && !new.consentGeolocation {
                // Seed 11a: locations are deleted at once, by offline, which owns them.
                try await Outbox.write(OutboxMessage(target: .offline, method: "DELETE",
                                                     path: userPath + "/locations" + scope),
                                       on: conn, logger: ctx.logger)
                warnings.append(Warning(setting: "consent_geolocation", impact: "local_questions_unavailable",
                                        message: "Questions locales ne seront plus disponibles"))
            }
            if old.consentGeolocation != new.consentGeolocation || old.consentPersonalizedAds != new.consentPersonalizedAds {
                try await Outbox.write(try OutboxMessage(target: .offline, method: "PUT",
                                                         path: userPath + "/consents" + scope, body: consent),
                                       on: conn, logger: ctx.logger)
                try await Outbox.write(try OutboxMessage(target: .ads, method: "PUT",
                                                         path: userPath + "/consents" + scope, body: consent),
                                       on: conn, logger: ctx.logger)
            }
            if old.consentPersonalizedAds && !new.consentPersonalizedAds {
                warnings.append(Warning(setting: "consent_personalized_ads", impact: "non_personalized_ads",
                                        message: "Les publicités ne seront plus personnalisées"))
            }
            try await ctx.audit.record(ctx.entry("privacy_update", "success", app: appID, user: userID, request, context,
                                                 details: body), on: conn)
            return (new, warnings)
        }
        return try context.json(UpdateResponse(privacy: settings, appliedImmediately: true, warnings: warnings))
    }
}

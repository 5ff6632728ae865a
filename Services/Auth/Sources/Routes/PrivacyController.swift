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

    func addInternalRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.on(InternalRoutes.consentAnswer) { request, context in try await answerFromAds(request, context) }
    }

    struct Warning: Codable, Sendable { var setting: String; var impact: String; var message: String }
    struct UpdateResponse: Codable, Sendable {
        var privacy: PrivacySettings
        var appliedImmediately: Bool
        var warnings: [Warning]
        enum CodingKeys: String, CodingKey { case privacy; case appliedImmediately = "applied_immediately"; case warnings }
    }

    static let fields = [
        "consent_analytics", "consent_third_party", "consent_geolocation",
        "consent_personalized_ads", "consent_notifications", "consent_game_center"
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
        let (settings, warnings) = try await ctx.db.withTransaction(logger: ctx.logger) { conn -> (PrivacySettings, [Warning]) in
            // Locked first: two screens changing different consents at once both count.
            guard let current = try await ctx.users.privacy(of: userID, on: conn, forUpdate: true) else { throw AppError.notFound("Privacy settings") }
            let wanted = try Self.parse(body, onto: current)
            guard let (old, new) = try await ctx.users.updatePrivacy(of: userID, to: wanted, now: now, on: conn) else {
                throw AppError.notFound("Privacy settings")
            }
            try await publishChanges(app: appID, user: userID, old: old, new: new, on: conn)
            var warnings: [Warning] = []
            if old.consentGeolocation && !new.consentGeolocation {
                // Seed 11a: offline deletes the locations when it applies the withdrawal.
                warnings.append(
                    Warning(
                        setting: "consent_geolocation", impact: "local_questions_unavailable",
                        message: "Questions locales ne seront plus disponibles"))
            }
            if old.consentPersonalizedAds && !new.consentPersonalizedAds {
                warnings.append(
                    Warning(
                        setting: "consent_personalized_ads", impact: "non_personalized_ads",
                        message: "Les publicités ne seront plus personnalisées"))
            }
            try await ctx.audit.record(
                ctx.entry(
                    "privacy_update", "success", app: appID, user: userID, request, context,
                    details: body), on: conn)
            return (new, warnings)
        }
        return try context.json(UpdateResponse(privacy: settings, appliedImmediately: true, warnings: warnings))
    }

    /// Each consent another service acts on gets a new version when it changes, and goes to
    /// that service through the outbox.
    func publishChanges(app: UUID, user: UUID, old: PrivacySettings, new: PrivacySettings, on conn: PostgresConnection) async throws {
        let changes: [(String, Bool, Bool)] = [
            (ConsentFact.geolocation, old.consentGeolocation, new.consentGeolocation),
            (ConsentFact.personalizedAds, old.consentPersonalizedAds, new.consentPersonalizedAds),
            (ConsentFact.analytics, old.consentAnalytics, new.consentAnalytics),
            // No service acts on these; they are versioned too, for the app's servers (#33
            // consent.changed).
            ("notifications", old.consentNotifications, new.consentNotifications),
            ("third_party", old.consentThirdParty, new.consentThirdParty),
            ("game_center", old.consentGameCenter, new.consentGameCenter)
        ]
        var version: Int64?
        var changed: [JSONValue] = []
        for (consent, before, after) in changes where before != after {
            version = try await ctx.facts.consentChanged(app: app, user: user, consent: consent, value: after, on: conn)
            changed.append(.string(consent))
        }
        // #46: the user's other devices hear it at commit.
        if let version {
            let consents: [String: JSONValue] = [
                "analytics": .bool(new.consentAnalytics), "third_party": .bool(new.consentThirdParty),
                "geolocation": .bool(new.consentGeolocation), "personalized_ads": .bool(new.consentPersonalizedAds),
                "notifications": .bool(new.consentNotifications), "game_center": .bool(new.consentGameCenter)
            ]
            try await LiveStore.record(
                app: app, user: user, type: .consentUpdated, version: version,
                data: ["consents": .object(consents), "changed": .array(changed), "version": .int(Int(version))], on: conn, logger: ctx.logger)
        }
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
        let outcome = try await ctx.db.withTransaction(logger: ctx.logger) { conn -> FactOutcome in
            guard try await ctx.users.find(.id(user), appID: app, on: conn) != nil,
                let current = try await ctx.users.privacy(of: user, on: conn, forUpdate: true)
            else {
                // An erased user's late answer is final news for the sender's outbox (410), not a retry.
                if try await ctx.facts.facts.isErased(app: app, user: user, on: conn) {
                    throw AppError(AuthErrorCode.userErased, "This user's data has been erased")
                }
                throw AppError.notFound("User")
            }
            let held = try await ctx.facts.consentVersion(app: app, user: user, consent: ConsentFact.personalizedAds, on: conn)
            guard answer.basedOn <= held else { throw AppError.validation("based_on", "based_on names a version auth never issued") }
            guard answer.basedOn == held else { return FactOutcome(applied: false, reason: "stale_version") }
            guard current.consentPersonalizedAds != answer.value else { return FactOutcome(applied: false, reason: "unchanged") }
            var wanted = current
            wanted.consentPersonalizedAds = answer.value
            guard let (old, new) = try await ctx.users.updatePrivacy(of: user, to: wanted, now: now, on: conn) else { throw AppError.notFound("User") }
            try await publishChanges(app: app, user: user, old: old, new: new, on: conn)
            try await ctx.audit.record(
                .init(
                    userID: user, appID: app, action: "privacy_update", result: "success",
                    details: ["consent_personalized_ads": .bool(answer.value), "source": .string(String(answer.source.prefix(40)))]),
                on: conn)
            return FactOutcome(applied: true)
        }
        return try context.json(outcome)
    }
}

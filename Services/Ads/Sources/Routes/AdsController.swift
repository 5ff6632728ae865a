import AdsDomain
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-ADS-4.1 and 4.2: eligibility, ad requests, impressions and completions.
struct AdsController: Sendable {
    let db: DatabasePool
    let ads: AdStore
    let consents: ConsentStore
    let rewarding: AdRewarding
    let serving: AdServing
    let delivery: RewardDelivery
    let entitlements: any EntitlementSource
    /// Each user's counters, cooldowns and latest consent as last read: `available` is
    /// evaluated from them at each request (the clock moves cooldowns on); every write to them
    /// is announced by triggers. `POST /ads/request` still decides on the atomic update.
    let eligibility: ReadCache<UserCacheKey, EligibilityInputs>
    let clock: any WallClock
    let logger: Logger
    struct EligibilityInputs: Sendable {
        var limits: UserAdLimits?
        var consent: AdConsentRecord?
        var entitlement: EntitlementState?
    }
    /// While subscription is down every request falls back: said once per interval.
    let fallbackLog = LogThrottle()

    func addRoutes(to user: RouterGroup<ServiceRequestContext>) {
        user.get("ads/available") { request, context in try await available(request, context) }
        user.post("ads/request") { request, context in try await requestAd(request, context) }
        user.post("ads/:id/impression") { request, context in try await impression(request, context) }
        user.post("ads/:id/complete") { request, context in try await complete(request, context) }
    }

    // MARK: eligibility

    /// The answers that do not depend on the clock (available, or refused for a reason with no
    /// wait), encoded once: most reads give one of them, and encoding was a tenth of their CPU.
    static let fixedAnswers: [Eligibility: ByteBuffer] = {
        var answers: [Eligibility: ByteBuffer] = [:]
        for e in [Eligibility.ok]
            + Ineligibility.allCases.map({ Eligibility(available: false, reason: $0, cooldownSeconds: nil, nextAvailableAt: nil) })
        {
            answers[e] = ByteBuffer(bytes: try! JSON.encoder.encode(AvailabilityResponse(eligibility: e)))
        }
        return answers
    }()

    struct AvailabilityResponse: Encodable {
        var eligibility: Eligibility
        func encode(to encoder: any Encoder) throws {
            // The seed's body shows nulls explicitly.
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(eligibility.available, forKey: .available)
            try c.encode(eligibility.reason?.rawValue, forKey: .reason)
            try c.encode(eligibility.cooldownSeconds, forKey: .cooldownSeconds)
            try c.encode(eligibility.nextAvailableAt, forKey: .nextAvailableAt)
        }
        enum CodingKeys: String, CodingKey {
            case available, reason
            case cooldownSeconds = "cooldown_seconds"
            case nextAvailableAt = "next_available_at"
        }
    }

    static func adType(_ raw: String?, field: String) throws -> AdType {
        guard let raw else { throw AppError.badRequest("'\(field)' is required (rewarded or interstitial)", field: field) }
        guard let t = AdType(rawValue: raw) else { throw AppError.validation(field, "\(field) must be rewarded or interstitial") }
        return t
    }

    static func placement(_ raw: String?, field: String = "placement") throws -> String {
        guard let raw, !raw.isEmpty else { return "default" }
        // ASCII names are checked on their bytes; Character's Unicode properties cost 1.4 % of an
        // availability check. Others keep the Unicode rule (letters and digits of any script).
        func asciiAllowed(_ b: UInt8) -> Bool { ((b | 0x20) >= 97 && (b | 0x20) <= 122) || (b >= 48 && b <= 57) || b == 95 || b == 45 }
        // The Unicode rule says the same of ASCII, so only a name it has not cleared meets it.
        let allowed = raw.utf8.allSatisfy(asciiAllowed) || raw.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" })
        guard raw.utf8.count <= 64, allowed else {
            throw AppError.validation(field, "placement must be 1 to 64 letters, digits, '_' or '-'")
        }
        return raw
    }

    static func country(_ request: Request) throws -> String? {
        guard let raw = request.uri.queryParameters.get("country") ?? request.headers.value(.xCountryCode) else { return nil }
        guard raw.count == 2, raw.allSatisfy({ $0.isASCII && $0.isLetter }) else {
            throw AppError.validation("country", "country must be an ISO 3166-1 alpha-2 code")
        }
        return raw.uppercased()
    }

    /// Premium from subscription (cached); if subscription cannot answer, the status in the
    /// access token decides (at most 7 days old) rather than failing the request.
    func isPremium(app: UUID, user: UUID, context: ServiceRequestContext) async -> Bool {
        do { return try await entitlements.entitlement(app: app, user: user).isPremium } catch {
            fallbackLog.warning(logger, "entitlement unavailable, using the token's status", metadata: ["error": "\(error)"])
            return context.identity?.status == .premium
        }
    }

    func available(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let q = request.uri.queryParameters
        let type = try Self.adType(q.get("ad_type"), field: "ad_type")
        _ = try Self.placement(q.get("placement"))
        let country = try Self.country(request)
        let now = clock.now()
        // One cached read: counters, consent and the entitlement subscription pushed here.
        let inputs = try await eligibility.value(for: UserCacheKey(app: app, user: user)) {
            let (limits, record, entitlement) = try await db.withConnection { try await ads.eligibilityInputs(app: app, user: user, on: $0) }
            return EligibilityInputs(limits: limits, consent: record, entitlement: entitlement)
        }
        let premium = EntitlementState.entitlement(inputs.entitlement, at: now).isPremium
        let (limits, record) = (inputs.limits, inputs.consent)
        let consent = record?.state() ?? .none(country: country)
        let e = Eligibility.evaluate(type: type, limits: limits, today: AdStore.day(now), consent: consent, isPremium: premium, now: now)
        if let body = Self.fixedAnswers[e] { return context.json(encoded: body) }
        return try context.json(AvailabilityResponse(eligibility: e))
    }

    // MARK: request

    struct AdRequestBody: Decodable {
        var adType: String
        var placement: String?
        var providerPreference: String?
        enum CodingKeys: String, CodingKey {
            case adType = "ad_type"
            case placement
            case providerPreference = "provider_preference"
        }
    }

    struct AdRequestResponse: Encodable {
        var adRequestID: UUID
        var provider: String
        var adUnitID: String
        var canShow: Bool
        var testMode: Bool
        var personalized: Bool
        var adDurationSeconds: Int
        var serverSideVerification: Bool
        enum CodingKeys: String, CodingKey {
            case adRequestID = "ad_request_id"
            case provider
            case adUnitID = "ad_unit_id"
            case canShow = "can_show"
            case testMode = "test_mode"
            case personalized
            case adDurationSeconds = "ad_duration_seconds"
            case serverSideVerification = "server_side_verification"
        }
    }

    func requestAd(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let body = try await request.decodeJSON(as: AdRequestBody.self, context: context)
        let type = try Self.adType(body.adType, field: "ad_type")
        let placement = try Self.placement(body.placement)
        if let p = body.providerPreference, p.isEmpty || p.utf8.count > 40 {
            throw AppError.validation("provider_preference", "provider_preference must be a provider name")
        }
        let premium = await isPremium(app: app, user: user, context: context)
        let country = try Self.country(request)
        let served = try await serving.serve(
            app: app,
            user: user,
            type: type,
            placement: placement,
            preference: body.providerPreference,
            premium: premium,
            country: country,
            now: clock.now()
        )
        let response = AdRequestResponse(
            adRequestID: served.record.id,
            provider: served.provider.name,
            adUnitID: served.unit,
            canShow: true,
            testMode: served.provider.testMode,
            personalized: served.personalized,
            adDurationSeconds: served.provider.adDurationSeconds,
            serverSideVerification: served.provider.verification == "ssv"
        )
        return try context.json(response, status: .created)
    }

    static func requestID(_ context: ServiceRequestContext) throws -> UUID {
        guard let id = context.parameters.get("id", as: UUID.self) else { throw AppError.badRequest("Ad request id must be a UUID", field: "id") }
        return id
    }

    // MARK: impression

    struct ImpressionBody: Decodable {
        var loaded: Bool
        var shown: Bool
        var loadTimeMs: Int?
        var error: String?
        enum CodingKeys: String, CodingKey {
            case loaded, shown
            case loadTimeMs = "load_time_ms"
            case error
        }
    }

    func impression(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let id = try Self.requestID(context)
        let body = try await request.decodeJSON(as: ImpressionBody.self, context: context)
        if let ms = body.loadTimeMs, !(0...600_000).contains(ms) { throw AppError.validation("load_time_ms", "load_time_ms must be 0 to 600000") }
        if let e = body.error, e.utf8.count > 500 { throw AppError.validation("error", "error must be at most 500 bytes") }
        guard !(body.shown && !body.loaded) else { throw AppError.validation("shown", "an ad cannot be shown without being loaded") }
        let found = try await db.withConnection { conn in
            try await ads.recordImpression(
                id: id,
                app: app,
                user: user,
                loaded: body.loaded,
                shown: body.shown,
                loadTimeMs: body.loadTimeMs,
                error: body.error,
                on: conn
            )
        }
        guard found else { throw AppError.notFound("Ad request") }
        return try context.json(["recorded": true])
    }

    // MARK: complete

    struct CompleteBody: Decodable {
        var completed: Bool
        var clicked: Bool?
        var displayDurationMs: Int
        var revenueUSD: Double?
        enum CodingKeys: String, CodingKey {
            case completed, clicked
            case displayDurationMs = "display_duration_ms"
            case revenueUSD = "revenue_usd"
        }
    }

    typealias RewardBody = AdCompletion.Reward
    typealias CompleteResponse = AdCompletion.Answer

    func complete(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let id = try Self.requestID(context)
        let body = try await request.decodeJSON(as: CompleteBody.self, context: context)
        guard (0...3_600_000).contains(body.displayDurationMs) else {
            throw AppError.validation("display_duration_ms", "display_duration_ms must be 0 to 3600000")
        }
        if let r = body.revenueUSD, !(0...1000).contains(r) { throw AppError.validation("revenue_usd", "revenue_usd must be 0 to 1000") }
        let report = AdCompletion.Report(
            completed: body.completed,
            clicked: body.clicked ?? false,
            displayMilliseconds: body.displayDurationMs,
            revenueUSD: body.revenueUSD
        )
        let response = try await completion.run(request: id, app: app, user: user, report: report)
        return try context.json(response)
    }

    var completion: AdCompletion {
        AdCompletion(db: db, ads: ads, rewarding: rewarding, delivery: delivery, clock: clock, logger: logger)
    }
}

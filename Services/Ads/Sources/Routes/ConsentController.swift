import AdsDomain
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-ADS-4.3: GDPR / COPPA / ATT consent, append-only. Auth owns the personalised-ads
/// consent (one answer for both screens): an answer given here is kept here at once and sent
/// to auth, which versions it and sends it back; auth's versions decide between the screens.
struct ConsentController: Sendable {
    let db: DatabasePool
    let consents: ConsentStore
    let recording: ConsentRecording
    let outbox: OutboxWorker
    let clock: any WallClock

    func addRoutes(user: RouterGroup<ServiceRequestContext>, internalGroup: RouterGroup<ServiceRequestContext>) {
        user.get("ads/consent") { request, context in try await show(request, context) }
        user.post("ads/consent") { request, context in try await update(request, context) }
        internalGroup.on(InternalRoutes.consentFact) { request, context in try await fromAuth(request, context) }
    }

    struct ConsentResponse: Encodable {
        var consent: AdConsentRecord?
        var required: Bool
        var gdprApplies: Bool
        var adsEnabled: Bool
        var personalizedAds: Bool
        var rewardedAdsAllowed: Bool
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(consent, forKey: .consent)  // null before the first answer (seed step 5)
            try c.encode(required, forKey: .required)
            try c.encode(gdprApplies, forKey: .gdprApplies)
            try c.encode(adsEnabled, forKey: .adsEnabled)
            try c.encode(personalizedAds, forKey: .personalizedAds)
            try c.encode(rewardedAdsAllowed, forKey: .rewardedAdsAllowed)
        }
        enum CodingKeys: String, CodingKey {
            case consent, required
            case gdprApplies = "gdpr_applies"
            case adsEnabled = "ads_enabled"
            case personalizedAds = "personalized_ads"
            case rewardedAdsAllowed = "rewarded_ads_allowed"
        }

        init(_ record: AdConsentRecord?, country: String?) {
            let state = record?.state() ?? .none(country: country)
            consent = record
            required = state.required
            gdprApplies = state.gdprApplies
            adsEnabled = !state.blocksAds && !state.isUnderAge
            personalizedAds = state.personalized
            rewardedAdsAllowed = !state.blocksAds && !state.isUnderAge
        }
    }

    func show(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let country = try AdsController.country(request)
        let record = try await db.withConnection { try await consents.latest(app: app, user: user, on: $0) }
        return try context.json(ConsentResponse(record, country: country))
    }

    static let attStatuses: Set<String> = ["authorized", "denied", "restricted", "not_determined"]
    static let formStatuses: Set<String> = ["obtained", "required", "not_required", "unknown"]

    /// A partial body changes only what it names (the ATT answer comes after the GDPR one);
    /// every change is a new row.
    func update(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let body = try await request.decodeJSON(as: ConsentRecording.Answer.self, context: context)
        guard !body.isEmpty else { throw AppError.badRequest("Nothing to record: name at least one consent field") }
        if let a = body.attStatus, !Self.attStatuses.contains(a) {
            throw AppError.validation("att_status", "att_status must be one of \(Self.attStatuses.sorted().joined(separator: ", "))")
        }
        if let f = body.consentFormStatus, !Self.formStatuses.contains(f) {
            throw AppError.validation(
                "consent_form_status",
                "consent_form_status must be one of \(Self.formStatuses.sorted().joined(separator: ", "))"
            )
        }
        // A TC string is web-safe base64 segments separated by dots.
        if let t = body.tcfString,
            t.isEmpty || t.utf8.count > 4096
                || !t.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") })
        {
            throw AppError.validation("tcf_string", "tcf_string must be an IAB TCF consent string")
        }
        if let c = body.country, c.count != 2 || !c.allSatisfy({ $0.isASCII && $0.isLetter }) {
            throw AppError.validation("country", "country must be an ISO 3166-1 alpha-2 code")
        }
        var birth: DateComponents?
        if let raw = body.birthDate {
            guard let parsed = AgeGate.parse(raw) else { throw AppError.validation("birth_date", "birth_date must be a date, yyyy-MM-dd") }
            birth = parsed
        }
        let (record, forwarded) = try await recording.answer(
            body,
            birth: birth,
            app: app,
            user: user,
            headerCountry: try AdsController.country(request),
            now: clock.now()
        )
        // Tried at once so the privacy screen shows it within a moment; else the worker delivers it.
        if let forwarded { _ = await outbox.deliverNow(id: forwarded, timeout: .seconds(2)) }
        return try context.json(ConsentResponse(record, country: record.country))
    }

    /// Auth's personalised-ads consent, versioned: applied only when newer than the one held.
    /// It answers the ads consent question (`required` becomes false) like an answer given here.
    func fromAuth(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        // Only auth tells a consent (one owner per fact): `decodeFact` checks the caller.
        let fact = try await request.decodeFact(ConsentFact.self, from: .auth, context: context)
        guard fact.consent == context.parameters.get("consent"), fact.consent == ConsentFact.personalizedAds else {
            throw AppError.validation("consent", "ads acts on the personalized_ads consent only")
        }
        let outcome = try await recording.fromAuth(fact, now: clock.now())
        return try context.json(outcome)
    }
}

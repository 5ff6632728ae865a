import AdsDomain
import Foundation
import HTTPTypes
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-ADS-4.2 an ad request: premium, consent and age first (no slot is taken for an ad that
/// cannot be shown), then the provider and the unit, then the slot taken atomically against the
/// counters and cooldowns, and the request recorded. The flow owns the transaction (#50).
struct AdServing: Sendable {
    let db: DatabasePool
    let ads: AdStore
    let consents: ConsentStore
    let logger: Logger

    struct Served: Sendable {
        var record: AdRequestRecord
        var provider: AdProvider
        var unit: String
        var personalized: Bool
    }

    func serve(
        app: UUID,
        user: UUID,
        type: AdType,
        placement: String,
        preference: String?,
        premium: Bool,
        country: String?,
        now: Date
    ) async throws -> Served {
        try await db.withTransaction(logger: logger) { conn -> Served in
            let consent = try await consentState(app: app, user: user, country: country, on: conn)
            // Premium, consent and age first: no slot is taken for an ad that cannot be shown.
            let gate = Eligibility.evaluate(type: type, limits: nil, today: AdStore.day(now), consent: consent, isPremium: premium, now: now)
            if let reason = gate.reason, [.premiumUser, .consentRequired, .underAge].contains(reason) { throw Self.refusal(gate) }
            let providers = try await ads.providers(app: app, on: conn).filter { $0.active && $0.unitID(for: type) != nil }
            guard let provider = providers.first(where: { $0.name == preference }) ?? providers.first,
                let unit = provider.unitID(for: type)
            else {
                throw AppError(AdsErrorCode.noAdProvider, "No active ad provider serves \(type.rawValue) ads for this app")
            }
            guard try await ads.reserve(type, app: app, user: user, now: now, on: conn) else {
                let limits = try await ads.limits(app: app, user: user, on: conn)
                var e = Eligibility.evaluate(type: type, limits: limits, today: AdStore.day(now), consent: consent, isPremium: false, now: now)
                if e.available { e = Eligibility(available: false, reason: .cooldownActive, cooldownSeconds: 1, nextAvailableAt: nil) }
                throw Self.refusal(e)
            }
            let record = AdRequestRecord(
                id: UUID(),
                appID: app,
                userID: user,
                adType: type,
                placement: placement,
                provider: provider.name,
                adDurationSeconds: provider.adDurationSeconds,
                verification: provider.verification,
                createdAt: now
            )
            try await ads.insertRequest(record, unitID: unit, personalized: consent.personalized, on: conn)
            return Served(record: record, provider: provider, unit: unit, personalized: consent.personalized)
        }
    }

    func consentState(app: UUID, user: UUID, country: String?, on conn: PostgresConnection) async throws -> ConsentState {
        try await consents.latest(app: app, user: user, on: conn)?.state() ?? .none(country: country)
    }

    static func refusal(_ e: Eligibility) -> AppError {
        let reason = e.reason ?? .cooldownActive
        var extra: [String: JSONValue] = ["reason": .string(reason.rawValue)]
        var headers = HTTPFields()
        if let next = e.nextAvailableAt { extra["next_available_at"] = .string(JSON.iso8601(next)) }
        switch reason {
        case .premiumUser:
            return AppError(AdsErrorCode.adsDisabledPremium, "Premium users see no ads", extra: extra)
        case .consentRequired:
            return AppError(AdsErrorCode.consentRequired, "Ad consent is required in this region before any ad (GDPR)", extra: extra)
        case .underAge:
            return AppError(AdsErrorCode.underAge, "No ads for users under 13 (COPPA): content only", extra: extra)
        case .dailyLimitReached:
            return AppError(AdsErrorCode.dailyLimitReached, "Daily ad limit reached", extra: extra)
        case .cooldownActive, .intervalNotElapsed:
            let seconds = max(1, e.cooldownSeconds ?? 1)
            extra["retry_after"] = .int(seconds)
            extra["cooldown_seconds"] = .int(seconds)
            headers[.retryAfter] = String(seconds)
            let code: AdsErrorCode = reason == .cooldownActive ? .cooldownActive : .intervalNotElapsed
            return AppError(code, "Wait \(seconds) s before the next ad", extra: extra, headers: headers)
        }
    }
}

import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-ADS-4.3 consent, append-only: an answer given on the ads screen is kept here at once and
/// its personalised-ads part goes to auth, which owns it (one answer for both screens); auth's
/// versioned fact comes back and is applied only when newer. The flow owns the transactions (#50).
struct ConsentRecording: Sendable {
    let db: DatabasePool
    let consents: ConsentStore
    let logger: Logger

    struct Answer: Decodable {
        var consentPersonalizedAds: Bool?
        var consentDataSharing: Bool?
        var ageGatePassed: Bool?
        var isUnderAge: Bool?
        var attStatus: String?
        var tcfString: String?
        var consentFormStatus: String?
        var country: String?
        /// The age gate's answer (`yyyy-MM-dd`): used to decide COPPA, never stored.
        var birthDate: String?
        enum CodingKeys: String, CodingKey {
            case birthDate = "birth_date"
            case consentPersonalizedAds = "consent_personalized_ads"
            case consentDataSharing = "consent_data_sharing"
            case ageGatePassed = "age_gate_passed"
            case isUnderAge = "is_under_age"
            case attStatus = "att_status"
            case tcfString = "tcf_string"
            case consentFormStatus = "consent_form_status"
            case country
        }
        var isEmpty: Bool {
            consentPersonalizedAds == nil && consentDataSharing == nil && ageGatePassed == nil && isUnderAge == nil && attStatus == nil
                && tcfString == nil && consentFormStatus == nil && country == nil && birthDate == nil
        }
    }

    /// A partial answer changes only what it names; every change is a new row. Answers the record
    /// and the outbox message that carries the answer to auth, if any.
    func answer(
        _ body: Answer,
        birth: DateComponents?,
        app: UUID,
        user: UUID,
        headerCountry: String?,
        now: Date
    ) async throws -> (AdConsentRecord, Int64?) {
        try await db.withTransaction(logger: logger) { conn -> (AdConsentRecord, Int64?) in
            try await consents.lock(app: app, user: user, on: conn)
            let previous = try await consents.latest(app: app, user: user, on: conn)
            let country = (body.country ?? headerCountry ?? previous?.country)?.uppercased()
            let underAge: Bool
            switch AgeGate.decide(previous: previous?.isUnderAge ?? false, claimed: body.isUnderAge, birth: birth, now: now) {
            case .underAge(let u): underAge = u
            case .birthDateRequired:
                throw AppError(
                    AdsErrorCode.ageVerificationRequired,
                    "This account is under 13 (COPPA); only the age gate with a birth date can change that",
                    extra: ["field": "birth_date"]
                )
            case .implausibleBirthDate:
                throw AppError.validation("birth_date", "birth_date must be in the past and less than 120 years ago")
            }
            var r = AdConsentRecord(
                consentPersonalizedAds: body.consentPersonalizedAds ?? previous?.consentPersonalizedAds ?? false,
                consentDataSharing: body.consentDataSharing ?? previous?.consentDataSharing ?? false,
                ageGatePassed: body.ageGatePassed ?? (birth != nil ? true : (previous?.ageGatePassed ?? false)),
                isUnderAge: underAge,
                attStatus: body.attStatus ?? previous?.attStatus,
                tcfString: body.tcfString ?? previous?.tcfString,
                consentFormStatus: body.consentFormStatus ?? previous?.consentFormStatus,
                country: country,
                gdprApplies: ConsentState.gdprApplies(country: country),
                source: "app",
                updatedAt: now,
                answered: (previous?.answered ?? false) || body.consentPersonalizedAds != nil || body.consentDataSharing != nil
            )
            // COPPA (8a): no personalisation and no sharing for a child, whatever was ticked.
            if underAge {
                r.consentPersonalizedAds = false
                r.consentDataSharing = false
            }
            try await consents.append(app: app, user: user, r, on: conn)
            // The personalised-ads answer goes to its owner, with the version of auth's answer
            // this screen was showing.
            guard let answer = body.consentPersonalizedAds else { return (r, nil) }
            let basedOn = try await consents.facts.version(app: app, user: user, fact: "consent.personalized_ads", on: conn) ?? 0
            let message = try OutboxMessage(
                InternalRoutes.consentAnswer,
                path: InternalRoutes.consentAnswer.path(user: user, consent: ConsentFact.personalizedAds, app: app),
                body: ConsentAnswer(appID: app, value: answer && !underAge, basedOn: basedOn, source: "ads")
            )
            return (r, try await Outbox.enqueue(message, on: conn, logger: logger, deliveredByWriter: .seconds(10)).id)
        }
    }

    /// Auth's personalised-ads consent, versioned: applied only when newer than the one held.
    func fromAuth(_ fact: ConsentFact, now: Date) async throws -> FactOutcome {
        let (user, app) = (fact.userID, fact.appID)
        return try await db.withTransaction(logger: logger) { conn -> FactOutcome in
            try await consents.lock(app: app, user: user, on: conn)
            let outcome = try await consents.facts.advance(app: app, user: user, fact: "consent.personalized_ads", version: fact.version, on: conn)
            guard outcome.applied else { return outcome }
            let previous = try await consents.latest(app: app, user: user, on: conn)
            let underAge = previous?.isUnderAge ?? false
            let personalized = fact.value && !underAge
            // The same answer this screen already holds (its own, come back versioned): no new row.
            if let previous, previous.answered, previous.consentPersonalizedAds == personalized { return outcome }
            let r = AdConsentRecord(
                consentPersonalizedAds: personalized,
                consentDataSharing: fact.value ? (previous?.consentDataSharing ?? false) : false,
                ageGatePassed: previous?.ageGatePassed ?? false,
                isUnderAge: underAge,
                attStatus: previous?.attStatus,
                tcfString: previous?.tcfString,
                consentFormStatus: previous?.consentFormStatus,
                country: previous?.country,
                gdprApplies: previous?.gdprApplies ?? true,
                source: "auth",
                updatedAt: now,
                answered: true
            )
            try await consents.append(app: app, user: user, r, on: conn)
            return outcome
        }
    }
}

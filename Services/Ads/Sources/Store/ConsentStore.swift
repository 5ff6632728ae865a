import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// One row of `user_consent_ads` (the latest one is the current consent).
struct AdConsentRecord: Codable, Sendable, Equatable {
    var consentPersonalizedAds: Bool
    var consentDataSharing: Bool
    var ageGatePassed: Bool
    var isUnderAge: Bool
    var attStatus: String?
    var tcfString: String?
    var consentFormStatus: String?
    var country: String?
    var gdprApplies: Bool
    var source: String
    var updatedAt: Date
    /// The ads consent question itself was answered (not only ATT, TCF or the form status).
    var answered: Bool = true

    enum CodingKeys: String, CodingKey {
        case consentPersonalizedAds = "consent_personalized_ads"
        case consentDataSharing = "consent_data_sharing"
        case ageGatePassed = "age_gate_passed"
        case isUnderAge = "is_under_age"
        case attStatus = "att_status"
        case tcfString = "tcf_string"
        case consentFormStatus = "consent_form_status"
        case country
        case gdprApplies = "gdpr_applies"
        case source
        case updatedAt = "updated_at"
        case answered
    }

    func state() -> ConsentState {
        ConsentState(
            answered: answered,
            personalizedAds: consentPersonalizedAds,
            dataSharing: consentDataSharing,
            isUnderAge: isUnderAge,
            attStatus: attStatus,
            gdprApplies: gdprApplies
        )
    }
}

/// `user_consent_ads`: append-only, so every change stays in the audit history.
struct ConsentStore: Sendable {
    let logger: Logger
    var facts: UserFactStore { UserFactStore(logger: logger) }

    func latest(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> AdConsentRecord? {
        let rows = try await conn.run(
            """
            SELECT consent_personalized_ads, consent_data_sharing, age_gate_passed, is_under_age, att_status, tcf_string,
                   consent_form_status, country, gdpr_applies, source, created_at, answered
            FROM user_consent_ads WHERE app_id = \(app) AND user_id = \(user) ORDER BY id DESC LIMIT 1
            """,
            logger: logger
        )
        for try await r in rows.decode((Bool, Bool, Bool, Bool, String?, String?, String?, String?, Bool, String, Date, Bool).self) {
            return AdConsentRecord(
                consentPersonalizedAds: r.0,
                consentDataSharing: r.1,
                ageGatePassed: r.2,
                isUnderAge: r.3,
                attStatus: r.4,
                tcfString: r.5,
                consentFormStatus: r.6,
                country: r.7,
                gdprApplies: r.8,
                source: r.9,
                updatedAt: r.10,
                answered: r.11
            )
        }
        return nil
    }

    func append(app: UUID, user: UUID, _ c: AdConsentRecord, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO user_consent_ads (app_id, user_id, consent_personalized_ads, consent_data_sharing, age_gate_passed, is_under_age,
                                          att_status, tcf_string, consent_form_status, country, gdpr_applies, source, created_at, answered)
            VALUES (\(app), \(user), \(c.consentPersonalizedAds), \(c.consentDataSharing), \(c.ageGatePassed), \(c.isUnderAge),
                    \(c.attStatus), \(c.tcfString), \(c.consentFormStatus), \(c.country), \(c.gdprApplies), \(c.source), \(c.updatedAt),
                    \(c.answered))
            """,
            logger: logger
        )
    }

    /// Serialises changes of one user's consent (two devices answering at once).
    func lock(app: UUID, user: UUID, on conn: PostgresConnection) async throws {
        try await conn.run("SELECT pg_advisory_xact_lock(hashtextextended(\("consent:\(app):\(user)"), 0))", logger: logger)
    }
}

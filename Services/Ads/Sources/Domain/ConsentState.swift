import Foundation

/// UC-ADS-4.3: where GDPR applies, and what the latest consent allows.
struct ConsentState: Sendable, Equatable {
    /// Whether the user answered the ads consent question (here, or the personalised-ads
    /// consent at auth). An ATT answer or a TCF string alone is not an answer.
    var answered: Bool
    var personalizedAds: Bool
    var dataSharing: Bool
    var isUnderAge: Bool
    var attStatus: String?
    var gdprApplies: Bool

    /// GDPR (EU/EEA), UK GDPR and the Swiss FADP: explicit opt-in before any ad.
    static let gdprCountries: Set<String> = [
        "AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE", "IT", "LV", "LT", "LU", "MT", "NL",
        "PL", "PT", "RO", "SK", "SI", "ES", "SE", "IS", "LI", "NO", "GB", "CH",
    ]

    /// Unknown region: GDPR is assumed to apply (the safe side).
    static func gdprApplies(country: String?) -> Bool {
        guard let c = country?.uppercased(), c.count == 2 else { return true }
        return gdprCountries.contains(c)
    }

    static func none(country: String?) -> ConsentState {
        // Outside GDPR regions consent is implicit (2a); inside, nothing until the user answers.
        let gdpr = gdprApplies(country: country)
        return ConsentState(answered: false, personalizedAds: !gdpr, dataSharing: !gdpr, isUnderAge: false, attStatus: nil, gdprApplies: gdpr)
    }

    /// GDPR needs an answer (any answer: 7b, a refusal still gets non-personalised ads).
    var required: Bool { gdprApplies && !answered }
    var blocksAds: Bool { required }

    /// Personalised ads need consent (an opt-in in GDPR regions; implicit elsewhere unless the
    /// user said no: 2a), no COPPA flag and no ATT refusal (15a).
    var personalized: Bool {
        let consented = gdprApplies || answered ? personalizedAds : true
        return consented && !isUnderAge && attStatus != "denied" && attStatus != "restricted"
    }
}

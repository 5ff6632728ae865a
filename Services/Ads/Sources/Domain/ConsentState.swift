import Foundation

/// UC-ADS-4.3: where GDPR applies, and what the latest consent allows.
struct ConsentState: Sendable, Equatable {
    /// The latest recorded consent, if any.
    var recorded: Bool
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
        return ConsentState(recorded: false, personalizedAds: !gdpr, dataSharing: !gdpr, isUnderAge: false, attStatus: nil, gdprApplies: gdpr)
    }

    /// GDPR needs an answer (any answer: 7b, a refusal still gets non-personalised ads).
    var required: Bool { gdprApplies && !recorded }
    var blocksAds: Bool { required }

    /// Personalised ads need the opt-in, no COPPA flag and no ATT refusal (15a).
    var personalized: Bool {
        personalizedAds && !isUnderAge && attStatus != "denied" && attStatus != "restricted"
    }
}

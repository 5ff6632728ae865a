import Foundation

/// UC-ADS-4.3: where GDPR applies, and what the latest consent allows.
package struct ConsentState: Sendable, Equatable {
    /// Whether the user answered the ads consent question (here, or the personalised-ads
    /// consent at auth). An ATT answer or a TCF string alone is not an answer.
    package var answered: Bool
    package var personalizedAds: Bool
    package var dataSharing: Bool
    package var isUnderAge: Bool
    package var attStatus: String?
    package var gdprApplies: Bool

    /// GDPR (EU/EEA), UK GDPR and the Swiss FADP: explicit opt-in before any ad.
    package static let gdprCountries: Set<String> = [
        "AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE", "IT", "LV", "LT", "LU", "MT", "NL",
        "PL", "PT", "RO", "SK", "SI", "ES", "SE", "IS", "LI", "NO", "GB", "CH",
    ]

    /// Unknown region: GDPR is assumed to apply (the safe side).
    package static func gdprApplies(country: String?) -> Bool {
        guard let c = country?.uppercased(), c.count == 2 else { return true }
        return gdprCountries.contains(c)
    }

    package static func none(country: String?) -> ConsentState {
        // Outside GDPR regions consent is implicit (2a); inside, nothing until the user answers.
        let gdpr = gdprApplies(country: country)
        return ConsentState(answered: false, personalizedAds: !gdpr, dataSharing: !gdpr, isUnderAge: false, attStatus: nil, gdprApplies: gdpr)
    }

    /// GDPR needs an answer (any answer: 7b, a refusal still gets non-personalised ads).
    package var required: Bool { gdprApplies && !answered }
    package var blocksAds: Bool { required }

    /// Personalised ads need consent (an opt-in in GDPR regions; implicit elsewhere unless the
    /// user said no: 2a), no COPPA flag and no ATT refusal (15a).
    package var personalized: Bool {
        let consented = gdprApplies || answered ? personalizedAds : true
        return consented && !isUnderAge && attStatus != "denied" && attStatus != "restricted"
    }
    package init(
        answered: Bool,
        personalizedAds: Bool,
        dataSharing: Bool,
        isUnderAge: Bool,
        attStatus: String? = nil,
        gdprApplies: Bool
    ) {
        self.answered = answered
        self.personalizedAds = personalizedAds
        self.dataSharing = dataSharing
        self.isUnderAge = isUnderAge
        self.attStatus = attStatus
        self.gdprApplies = gdprApplies
    }
}

/// COPPA (UC-ADS-4.3 8a): once a user is known to be under 13 the flag sticks; only an age-gate
/// answer with a birth date that makes him 13 or older clears it, never the bare flag.
package enum AgeGate {
    package static let minimumAge = 13

    package enum Outcome: Equatable, Sendable {
        case underAge(Bool)
        /// The bare flag tried to clear a child's status.
        case birthDateRequired
        /// A birth date in the future or more than 120 years ago.
        case implausibleBirthDate
    }

    /// Whole years between `birth` and `now`, in UTC calendar days.
    package static func age(birth: DateComponents, now: Date) -> Int? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let born = calendar.date(from: birth), born <= now else { return nil }
        return calendar.dateComponents([.year], from: born, to: now).year
    }

    /// A `yyyy-MM-dd` birth date.
    package static func parse(_ raw: String) -> DateComponents? {
        let parts = raw.split(separator: "-", omittingEmptySubsequences: false)
        guard raw.utf8.count == 10, parts.count == 3, let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
            (1...12).contains(m), (1...31).contains(d)
        else { return nil }
        var c = DateComponents(year: y, month: m, day: d)
        c.calendar = Calendar(identifier: .gregorian)
        c.calendar?.timeZone = TimeZone(identifier: "UTC")!
        guard c.isValidDate else { return nil }
        return c
    }

    package static func decide(previous: Bool, claimed: Bool?, birth: DateComponents?, now: Date) -> Outcome {
        if let birth {
            guard let age = age(birth: birth, now: now), age <= 120 else { return .implausibleBirthDate }
            return .underAge(age < minimumAge)
        }
        if previous && claimed == false { return .birthDateRequired }
        return .underAge(previous || (claimed ?? false))
    }
}

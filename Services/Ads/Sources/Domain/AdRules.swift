import Foundation

/// The seed's two ad formats.
package enum AdType: String, Codable, Sendable, CaseIterable {
    case rewarded, interstitial
}

/// UC-ADS-4.1 / 4.2 business rules, as numbers.
package enum AdRules {
    /// 1 rewarded ad = 1 credit.
    package static let rewardCredits = 1
    /// Limite FREE : 10 pubs/jour.
    package static let rewardedDailyLimit = 10
    /// Cooldown : 30 s entre pubs.
    package static let rewardedCooldown: TimeInterval = 30
    /// 18a: a view closed before the end sets a short cooldown.
    package static let abandonedCooldown: TimeInterval = 15
    /// Intervalle minimum : 3 minutes between interstitials.
    package static let interstitialInterval: TimeInterval = 180
    /// Max pubs/jour : 20 (soft limit).
    package static let interstitialDailySoftCap = 20
    /// Durée visionnage minimum : 80 % de la pub.
    package static let minimumWatchedRatio = 0.8
    /// A request not completed within this time cannot be completed any more (no hoarding).
    package static let requestLifetime: TimeInterval = 3600
    /// Slack between the server's clock and the display duration the client reports.
    package static let durationSlack: TimeInterval = 5

    /// Client-reported revenue is a hint, never the truth: one view may add at most this many
    /// times the provider's estimated revenue per impression (its eCPM / 1000).
    package static let clientRevenueCeilingFactor = 10.0
    /// The ceiling when the provider has no eCPM estimate (a $50 eCPM).
    package static let clientRevenueDefaultCeiling = 0.05

    /// What a client-reported revenue counts for: bounded by the provider's estimate, and
    /// flagged when the client claimed more.
    package static func clientRevenue(_ reported: Double?, ecpmEstimateUSD: Double?) -> (counted: Double?, flagged: Bool) {
        guard let reported else { return (nil, false) }
        let ceiling = ecpmEstimateUSD.flatMap { $0 > 0 ? $0 / 1000 * clientRevenueCeilingFactor : nil } ?? clientRevenueDefaultCeiling
        return reported > ceiling ? (ceiling, true) : (reported, false)
    }

    /// The minimum display for a reward, in milliseconds (24 000 for a 30 s ad).
    package static func minimumDisplayMilliseconds(adDurationSeconds: Int) -> Int {
        Int((Double(adDurationSeconds) * 1000 * minimumWatchedRatio).rounded(.up))
    }

    /// The start of the next UTC day: when the daily counters reset.
    package static func nextDay(after date: Date) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.startOfDay(for: date).addingTimeInterval(86400)
    }
}

/// The counters and cooldowns of one user (`user_ad_limits`), as of `day`.
package struct UserAdLimits: Sendable, Equatable {
    package var day: String
    package var rewardedViews: Int
    package var interstitialViews: Int
    package var lastRewardedAt: Date?
    package var rewardedCooldownUntil: Date?
    package var lastInterstitialAt: Date?

    package static func empty(day: String) -> UserAdLimits {
        UserAdLimits(day: day, rewardedViews: 0, interstitialViews: 0)
    }
    package init(
        day: String,
        rewardedViews: Int,
        interstitialViews: Int,
        lastRewardedAt: Date? = nil,
        rewardedCooldownUntil: Date? = nil,
        lastInterstitialAt: Date? = nil
    ) {
        self.day = day
        self.rewardedViews = rewardedViews
        self.interstitialViews = interstitialViews
        self.lastRewardedAt = lastRewardedAt
        self.rewardedCooldownUntil = rewardedCooldownUntil
        self.lastInterstitialAt = lastInterstitialAt
    }
}

/// Why an ad cannot be shown now (the `reason` of `GET /ads/available`).
package enum Ineligibility: String, Sendable, Hashable, CaseIterable {
    case premiumUser = "premium_user"
    case consentRequired = "consent_required"
    case underAge = "under_age"
    case dailyLimitReached = "daily_limit_reached"
    case cooldownActive = "cooldown_active"
    case intervalNotElapsed = "interval_not_elapsed"
}

/// The outcome of the eligibility checks (UC-ADS-4.1 step 3, 4.2 step 5).
package struct Eligibility: Sendable, Hashable {
    package var available: Bool
    package var reason: Ineligibility?
    package var cooldownSeconds: Int?
    package var nextAvailableAt: Date?

    package static let ok = Eligibility(available: true, reason: nil, cooldownSeconds: 0, nextAvailableAt: nil)

    /// Pure: the same inputs give the same answer; the SQL that reserves a slot applies the same
    /// conditions atomically.
    package static func evaluate(
        type: AdType,
        limits: UserAdLimits?,
        today: String,
        consent: ConsentState,
        isPremium: Bool,
        now: Date
    ) -> Eligibility {
        if isPremium { return Eligibility(available: false, reason: .premiumUser, cooldownSeconds: nil, nextAvailableAt: nil) }
        if consent.blocksAds { return Eligibility(available: false, reason: .consentRequired, cooldownSeconds: nil, nextAvailableAt: nil) }
        // COPPA: no ads at all under 13 (UC-ADS-4.1 rule; 4.3 8a.5 "content only").
        if consent.isUnderAge {
            return Eligibility(available: false, reason: .underAge, cooldownSeconds: nil, nextAvailableAt: nil)
        }
        let l = (limits?.day == today ? limits : nil) ?? .empty(day: today)
        // Cooldowns and intervals carry across midnight; counters do not.
        switch type {
        case .rewarded:
            if l.rewardedViews >= AdRules.rewardedDailyLimit {
                return Eligibility(available: false, reason: .dailyLimitReached, cooldownSeconds: nil, nextAvailableAt: AdRules.nextDay(after: now))
            }
            if let until = limits?.rewardedCooldownUntil, until > now {
                return Eligibility(
                    available: false,
                    reason: .cooldownActive,
                    cooldownSeconds: Int(until.timeIntervalSince(now).rounded(.up)),
                    nextAvailableAt: until
                )
            }
        case .interstitial:
            if l.interstitialViews >= AdRules.interstitialDailySoftCap {
                return Eligibility(available: false, reason: .dailyLimitReached, cooldownSeconds: nil, nextAvailableAt: AdRules.nextDay(after: now))
            }
            if let last = limits?.lastInterstitialAt, last.addingTimeInterval(AdRules.interstitialInterval) > now {
                let until = last.addingTimeInterval(AdRules.interstitialInterval)
                return Eligibility(
                    available: false,
                    reason: .intervalNotElapsed,
                    cooldownSeconds: Int(until.timeIntervalSince(now).rounded(.up)),
                    nextAvailableAt: until
                )
            }
        }
        return .ok
    }
    package init(
        available: Bool,
        reason: Ineligibility? = nil,
        cooldownSeconds: Int? = nil,
        nextAvailableAt: Date? = nil
    ) {
        self.available = available
        self.reason = reason
        self.cooldownSeconds = cooldownSeconds
        self.nextAvailableAt = nextAvailableAt
    }
}

/// What a rewarded completion earns (step 21a), from what the client reports and what the
/// provider's configuration says of the ad.
package enum RewardDecision: Sendable, Equatable {
    case grant
    /// 18a: not watched to the end: nothing, and a short cooldown.
    case notCompleted
    case tooShort(minimumMilliseconds: Int)
    /// The client claims more display time than has passed since the request.
    case implausibleDuration
    /// The provider confirms rewards server-side; the client's word is not enough.
    case awaitingVerification

    package static func decide(
        completed: Bool,
        displayMilliseconds: Int,
        adDurationSeconds: Int,
        verification: String,
        requestedAt: Date,
        now: Date
    ) -> RewardDecision {
        guard completed else { return .notCompleted }
        let minimum = AdRules.minimumDisplayMilliseconds(adDurationSeconds: adDurationSeconds)
        guard displayMilliseconds >= minimum else { return .tooShort(minimumMilliseconds: minimum) }
        guard Double(displayMilliseconds) <= (now.timeIntervalSince(requestedAt) + AdRules.durationSlack) * 1000 else { return .implausibleDuration }
        if verification == "ssv" { return .awaitingVerification }
        return .grant
    }

    package var refusal: String? {
        switch self {
        case .grant: nil
        case .notCompleted: "not_completed"
        case .tooShort: "display_too_short"
        case .implausibleDuration: "implausible_duration"
        case .awaitingVerification: "awaiting_server_verification"
        }
    }
}

import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// UC-ADS-4.2, completing an ad (main flow and alternates 18a, 21c): in one transaction the ad
/// request is locked, a replay answered with the first answer, an expired or never-shown ad
/// refused; `RewardDecision` judges a rewarded view from its values and `AdRewarding` grants
/// the credit (once per request, under the daily cap, counted for campaigns, into the outbox);
/// after the commit the credit gets one immediate try at subscription, so the answer carries
/// `new_balance` when it landed in time and `pending` otherwise.
struct AdCompletion: Sendable {
    let db: DatabasePool
    let ads: AdStore
    let rewarding: AdRewarding
    let delivery: RewardDelivery
    let clock: any WallClock
    let logger: Logger

    /// What the app reports of the view.
    struct Report: Sendable {
        var completed: Bool
        var clicked: Bool
        var displayMilliseconds: Int
        var revenueUSD: Double?
    }

    struct Reward: Codable {
        var type = "credits"
        var amount: Int
    }

    struct Answer: Encodable {
        var adRequestID: UUID
        var adType: String
        var completed: Bool
        var rewardGranted: Bool
        var reward: Reward?
        var newBalance: Int?
        /// `granted` (credited at subscription), `pending` (in the outbox, 21c),
        /// `awaiting_verification` (the network's callback decides), or null.
        var rewardStatus: String?
        var reason: String?
        var cooldownSeconds: Int?
        var message: String?
        /// A replay's credit whose outcome this side does not know yet: asked of subscription
        /// after the transaction (not encoded).
        var confirmOutboxID: Int64?
        enum CodingKeys: String, CodingKey {
            case adRequestID = "ad_request_id"
            case adType = "ad_type"
            case completed
            case rewardGranted = "reward_granted"
            case reward
            case newBalance = "new_balance"
            case rewardStatus = "reward_status"
            case reason
            case cooldownSeconds = "cooldown_seconds"
            case message
        }
    }

    func run(request id: UUID, app: UUID, user: UUID, report: Report) async throws -> Answer {
        let now = clock.now()
        var (response, outboxID) = try await db.withTransaction(logger: logger) { conn -> (Answer, Int64?) in
            guard let r = try await ads.lockRequest(id: id, on: conn), r.appID == app, r.userID == user else { throw AppError.notFound("Ad request") }
            if r.completedAt != nil { return (try await replay(r, on: conn), nil) }
            guard now.timeIntervalSince(r.createdAt) <= AdRules.requestLifetime else {
                throw AppError(AdsErrorCode.adRequestExpired, "This ad request is older than one hour; request a new ad")
            }
            // No impression, no view: an ad never reported on screen earns nothing and counts
            // for nothing (reward, interstitial frequency, revenue).
            guard r.shown else {
                throw AppError(
                    AdsErrorCode.adNotShown,
                    "Report the impression (shown: true) before completing this ad",
                    extra: ["ad_request_id": .string(id.lowercasedString)]
                )
            }
            try await ads.markCompleted(id: id, now: now, on: conn)
            var out = Answer(adRequestID: id, adType: r.adType.rawValue, completed: report.completed, rewardGranted: false)
            var outboxID: Int64?
            var granted = false
            var refusal: String?
            switch r.adType {
            case .interstitial:
                try await ads.countInterstitial(app: app, user: user, now: now, on: conn)
                out.cooldownSeconds = Int(AdRules.interstitialInterval)
            case .rewarded:
                let decision = RewardDecision.decide(
                    completed: report.completed,
                    displayMilliseconds: report.displayMilliseconds,
                    adDurationSeconds: r.adDurationSeconds,
                    verification: r.verification,
                    requestedAt: r.createdAt,
                    now: now
                )
                refusal = decision.refusal
                switch decision {
                case .grant:
                    switch try await rewarding.grant(r, user: user, now: now, on: conn) {
                    case .granted(let o):
                        outboxID = o
                        granted = true
                    case .alreadyGranted: granted = true
                    case .dailyLimitReached: refusal = Ineligibility.dailyLimitReached.rawValue
                    }
                    out.cooldownSeconds = Int(AdRules.rewardedCooldown)
                case .notCompleted:
                    try await ads.setShortCooldown(app: app, user: user, now: now, on: conn)
                    out.cooldownSeconds = Int(AdRules.abandonedCooldown)
                    out.message = "Watch the whole ad to earn the credit"
                case .awaitingVerification:
                    // The network's callback may already have come.
                    granted =
                        try await rewarding.rewards.reward(
                            app: app,
                            source: AdRewarding.source,
                            reference: id.lowercasedString,
                            on: conn
                        ) != nil
                    if granted { refusal = nil }
                    out.rewardStatus = granted ? nil : "awaiting_verification"
                case .tooShort(let minimum):
                    out.message = "The ad must be watched for at least \(minimum) ms"
                case .implausibleDuration:
                    out.message = "The reported display time is longer than the time since the request"
                }
            }
            let revenue = AdRules.clientRevenue(
                report.revenueUSD,
                ecpmEstimateUSD: report.revenueUSD == nil
                    ? nil
                    : try await ads.ecpmEstimate(app: app, provider: r.provider, on: conn)
            )
            if revenue.flagged {
                logger.warning(
                    "client-reported revenue above the provider's bound; counted at the bound",
                    metadata: ["ad_request_id": "\(id)", "provider": "\(r.provider)", "reported": "\(report.revenueUSD ?? 0)"]
                )
            }
            try await ads.insertView(
                request: r,
                completed: report.completed,
                clicked: report.clicked,
                displayMs: report.displayMilliseconds,
                rewardGranted: granted,
                rewardAmount: granted ? AdRules.rewardCredits : 0,
                refusal: refusal,
                revenueUSD: revenue.counted,
                revenueFlagged: revenue.flagged,
                now: now,
                on: conn
            )
            out.rewardGranted = granted
            out.reason = refusal
            if granted {
                out.reward = Reward(amount: AdRules.rewardCredits)
                if outboxID == nil { out = try await replay(r, on: conn, base: out) }
            }
            return (out, outboxID)
        }
        if let outboxID {
            if let balance = await delivery.attempt(outboxID: outboxID) {
                response.newBalance = balance
                response.rewardStatus = "granted"
            } else {
                response.rewardStatus = "pending"
                response.message = "Your credit is being added"
            }
        } else if let confirm = response.confirmOutboxID {
            // A replay answers the truth now: the credit may have landed since the first answer.
            if let balance = await delivery.confirm(outboxID: confirm) {
                response.newBalance = balance
                response.rewardStatus = "granted"
                response.message = nil
            } else if response.rewardStatus == "pending" {
                response.message = "Your credit is being added"
            }
        }
        return response
    }

    /// The first answer again, for a completion sent twice (and for a reward the server-side
    /// callback granted first).
    func replay(_ r: AdRequestRecord, on conn: PostgresConnection, base: Answer? = nil) async throws -> Answer {
        var out = base ?? Answer(adRequestID: r.id, adType: r.adType.rawValue, completed: false, rewardGranted: false)
        if base == nil, let view = try await ads.view(request: r.id, on: conn) {
            out.completed = view.completed
            out.rewardGranted = view.rewardGranted
            out.reason = view.refusal
        }
        if let reward = try await rewarding.rewards.reward(app: r.appID, source: AdRewarding.source, reference: r.id.lowercasedString, on: conn) {
            out.rewardGranted = true
            out.reason = nil
            out.reward = Reward(amount: reward.amount)
            out.newBalance = reward.newBalance
            out.rewardStatus = reward.delivery == "delivered" ? "granted" : "pending"
            if reward.newBalance == nil, reward.delivery != "dead" { out.confirmOutboxID = reward.outboxID }
        } else if out.reason == RewardDecision.awaitingVerification.refusal {
            out.rewardStatus = "awaiting_verification"
        }
        return out
    }
}

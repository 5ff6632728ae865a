import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// The one path by which a rewarded view earns its credit, whether the client's `complete`
/// or the network's server-side callback confirms it: recorded once per ad request, counted
/// against the daily cap, counted for watch-ads campaigns, and written to the outbox.
struct AdRewarding: Sendable {
    let ads: AdStore
    let rewards: RewardStore
    let campaigns: CampaignStore

    static let source = "ad_reward"

    enum Outcome: Sendable, Equatable {
        /// Newly granted: the outbox row to attempt at once.
        case granted(outboxID: Int64)
        case alreadyGranted
        case dailyLimitReached
    }

    func grant(_ request: AdRequestRecord, user: UUID, now: Date, on conn: PostgresConnection) async throws -> Outcome {
        let reference = request.id.lowercasedString
        guard
            let outboxID = try await rewards.grant(
                app: request.appID,
                user: user,
                amount: AdRules.rewardCredits,
                source: Self.source,
                reference: reference,
                now: now,
                on: conn
            )
        else { return .alreadyGranted }
        guard try await ads.countRewardedView(app: request.appID, user: user, now: now, on: conn) else {
            try await rewards.withdraw(app: request.appID, source: Self.source, reference: reference, on: conn)
            return .dailyLimitReached
        }
        try await campaigns.countWatchedAd(app: request.appID, user: user, placement: request.placement, now: now, on: conn)
        // A referred friend's first rewarded view is the "play" that makes his referral count.
        try await campaigns.countReferral(app: request.appID, referee: user, now: now, on: conn)
        return .granted(outboxID: outboxID)
    }
}

import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-ADS-4.4 a user's part in a campaign: the progress the server counted (a streak's check-in),
/// the claim that pays the reward once through the outbox, and a referral code redeemed. The flow
/// owns the transactions (#50); the routes answer from what it returns.
struct CampaignParticipation: Sendable {
    let db: DatabasePool
    let campaigns: CampaignStore
    let rewards: RewardStore
    let logger: Logger

    static let claimSource = "promo"

    struct Progress: Sendable {
        var progress: Int
        var required: Int
        var completed: Bool
        var canClaimReward: Bool
    }
    enum Claim: Sendable {
        case granted(amount: Int, outboxID: Int64)
        case alreadyClaimed(RewardStore.Reward?)
    }

    /// The campaign as this user meets it; a holdout user does not see it at all (404).
    func offer(app: UUID, id: UUID, user: UUID, expose: Bool, now: Date, on conn: PostgresConnection) async throws -> CampaignOffer {
        guard let c = try await campaigns.campaign(app: app, id: id, on: conn),
            let offer = try await campaigns.offers([c], app: app, user: user, expose: expose, now: now, on: conn).first,
            !offer.hidden
        else { throw AppError.notFound("Campaign") }
        return offer
    }

    static func expired(_ c: Campaign, _ p: Participation?) -> AppError {
        AppError(
            AdsErrorCode.campaignExpired,
            "This campaign has ended; progress is kept but earns no reward",
            extra: [
                "progress": .int(min(p?.progress ?? 0, p?.required ?? c.required)), "required": .int(p?.required ?? c.required),
                "ended_at": .string(JSON.iso8601(c.endsAt)),
            ]
        )
    }

    /// A campaign that has not begun: nothing counts yet, and the app is told when it starts.
    static func notStarted(_ c: Campaign) -> AppError {
        AppError(
            AdsErrorCode.campaignNotStarted,
            "This campaign has not started yet",
            extra: ["starts_at": .string(JSON.iso8601(c.startsAt)), "ends_at": .string(JSON.iso8601(c.endsAt))]
        )
    }

    /// Step 12b/13: a streak campaign records today's check-in; watch-ads and referral progress
    /// only moves on views and redemptions the server saw, so nothing the client says advances it.
    func updateProgress(app: UUID, user: UUID, campaign id: UUID, now: Date) async throws -> Progress {
        try await db.withTransaction(logger: logger) { conn -> Progress in
            let offer = try await offer(app: app, id: id, user: user, expose: false, now: now, on: conn)
            let c = offer.campaign
            guard c.isRunning(at: now) else {
                if c.active && now < c.startsAt { throw Self.notStarted(c) }
                throw Self.expired(c, try await campaigns.participation(campaign: id, user: user, on: conn))
            }
            if c.type == .streakBonus { try await campaigns.checkIn(offer, user: user, now: now, on: conn) }
            let p = try await campaigns.participation(campaign: id, user: user, on: conn)
            let required = p?.required ?? offer.required
            return Progress(
                progress: min(p?.progress ?? 0, required),
                required: required,
                completed: p?.completed ?? false,
                canClaimReward: (p?.completed ?? false) && !(p?.rewardClaimed ?? false)
            )
        }
    }

    /// 23a-23d: completed and not yet claimed: credits through the outbox, once. A second claim
    /// answers with the first claim's reward.
    func claim(app: UUID, user: UUID, campaign id: UUID, now: Date) async throws -> Claim {
        let reference = "campaign:\(id.lowercasedString):\(user.lowercasedString)"
        return try await db.withTransaction(logger: logger) { conn -> Claim in
            // The user's variant pays its own reward (#31); a holdout user has no campaign.
            let offer = try await offer(app: app, id: id, user: user, expose: false, now: now, on: conn)
            let c = offer.campaign
            let p = try await campaigns.participation(campaign: id, user: user, lock: true, on: conn)
            if p?.rewardClaimed == true {
                return .alreadyClaimed(try await rewards.reward(app: app, source: Self.claimSource, reference: reference, on: conn))
            }
            guard let p, p.completed, let done = p.completedAt else {
                if c.active && now < c.startsAt { throw Self.notStarted(c) }
                // 17a: an ended campaign keeps the progress but pays nothing.
                if now > c.endsAt || !c.active { throw Self.expired(c, p) }
                throw AppError(
                    AdsErrorCode.campaignNotCompleted,
                    "The campaign's conditions are not met yet",
                    extra: ["progress": .int(p?.progress ?? 0), "required": .int(p?.required ?? offer.required)]
                )
            }
            // Completed while the campaign ran: still paid after its end (never lose a reward).
            guard done <= c.endsAt else { throw Self.expired(c, p) }
            guard try await campaigns.markClaimed(campaign: id, user: user, now: now, on: conn),
                let outboxID = try await rewards.grant(
                    app: app,
                    user: user,
                    amount: offer.rewardAmount,
                    source: Self.claimSource,
                    reference: reference,
                    now: now,
                    on: conn
                )
            else {
                return .alreadyClaimed(try await rewards.reward(app: app, source: Self.claimSource, reference: reference, on: conn))
            }
            return .granted(amount: offer.rewardAmount, outboxID: outboxID)
        }
    }

    func redeem(app: UUID, user: UUID, code: String, now: Date) async throws -> CampaignStore.Redemption {
        try await db.withTransaction(logger: logger) { try await campaigns.redeem(app: app, referee: user, code: code, now: now, on: $0) }
    }
}

import AdsDomain
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-ADS-4.4: campaigns with the user's progress, check-ins, referrals and claims.
struct CampaignsController: Sendable {
    let db: DatabasePool
    let campaigns: CampaignStore
    let delivery: RewardDelivery
    let participation: CampaignParticipation
    let clock: any WallClock

    func addRoutes(to user: RouterGroup<ServiceRequestContext>) {
        user.get("campaigns/active") { _, context in try await active(context) }
        user.get("campaigns/:id") { _, context in try await show(context) }
        user.post("campaigns/:id") { _, context in try await updateProgress(context) }
        user.post("campaigns/:id/claim-reward") { _, context in try await claim(context) }
        user.get("referral/code") { _, context in try await referralCode(context) }
        user.post("referral/redeem") { request, context in try await redeem(request, context) }
    }

    struct Progress: Codable {
        var current: Int
        var required: Int
        var completed: Bool
        var rewardClaimed: Bool
        enum CodingKeys: String, CodingKey {
            case current, required, completed
            case rewardClaimed = "reward_claimed"
        }
    }
    struct RewardBody: Codable {
        var type = "credits"
        var amount: Int
    }

    struct CampaignView: Encodable {
        var id: UUID
        var name: String
        var description: String
        var campaignType: String
        var reward: RewardBody
        var conditions: JSONValue
        var progress: Progress
        var startsAt: Date
        var endsAt: Date
        var status: String
        /// #31: the user's variant (only its reward and goal are shown); absent without variants.
        var variant: String?
        enum CodingKeys: String, CodingKey {
            case id, name, description
            case campaignType = "campaign_type"
            case reward, conditions, progress
            case startsAt = "starts_at"
            case endsAt = "ends_at"
            case status, variant
        }

        init(_ c: Campaign, _ p: Participation?, now: Date) {
            self.init(CampaignOffer(campaign: c, variant: nil), p, now: now)
        }

        init(_ o: CampaignOffer, _ p: Participation?, now: Date) {
            let c = o.campaign
            id = c.id
            name = c.name
            description = c.description
            campaignType = c.type.rawValue
            reward = RewardBody(amount: o.rewardAmount)
            conditions = o.conditions
            let required = p?.required ?? o.required
            progress = Progress(
                current: min(p?.progress ?? 0, required),
                required: required,
                completed: p?.completed ?? false,
                rewardClaimed: p?.rewardClaimed ?? false
            )
            startsAt = c.startsAt
            endsAt = c.endsAt
            status = c.isRunning(at: now) ? "active" : (now < c.startsAt && c.active ? "upcoming" : "expired")
            variant = o.variant?.key
        }
    }

    static func id(_ context: ServiceRequestContext) throws -> UUID {
        guard let id = context.parameters.get("id", as: UUID.self) else { throw AppError.badRequest("Campaign id must be a UUID", field: "id") }
        return id
    }

    /// Listing shows the user's variant of each campaign and records the first exposure (#31);
    /// a holdout user is not shown the campaign.
    func active(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let now = clock.now()
        let views = try await db.withConnection { conn in
            let list = try await campaigns.running(app: app, now: now, on: conn)
            let offers = try await campaigns.offers(list, app: app, user: user, expose: true, now: now, on: conn)
            let mine = try await campaigns.participations(app: app, user: user, on: conn)
            return offers.filter { !$0.hidden }.map { CampaignView($0, mine[$0.campaign.id], now: now) }
        }
        return try context.json(["campaigns": views])
    }

    func show(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let id = try Self.id(context)
        let now = clock.now()
        let view = try await db.withConnection { conn in
            let offer = try await participation.offer(app: app, id: id, user: user, expose: true, now: now, on: conn)
            return CampaignView(offer, try await campaigns.participation(campaign: id, user: user, on: conn), now: now)
        }
        return try context.json(view)
    }

    struct ProgressResponse: Encodable {
        var campaignID: UUID
        var progress: Int
        var required: Int
        var completed: Bool
        var canClaimReward: Bool
        enum CodingKeys: String, CodingKey {
            case campaignID = "campaign_id"
            case progress, required, completed
            case canClaimReward = "can_claim_reward"
        }
    }

    /// Step 12b/13: the progress the server counted. A streak campaign records today's
    /// check-in; watch-ads and referral progress only moves on views and redemptions the
    /// server saw, so nothing the client says can advance it.
    func updateProgress(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let id = try Self.id(context)
        let p = try await participation.updateProgress(app: app, user: user, campaign: id, now: clock.now())
        let out = ProgressResponse(
            campaignID: id,
            progress: p.progress,
            required: p.required,
            completed: p.completed,
            canClaimReward: p.canClaimReward
        )
        return try context.json(out)
    }

    struct ClaimResponse: Encodable {
        var claimed: Bool
        var reward: RewardBody
        var newBalance: Int?
        var rewardStatus: String
        enum CodingKeys: String, CodingKey {
            case claimed, reward
            case newBalance = "new_balance"
            case rewardStatus = "reward_status"
        }
    }

    /// 23a-23d: completed and not yet claimed → credits through the outbox, once. A second
    /// claim is the seed's 400 `already_claimed`, with the first claim's truth now
    /// (`reward_status`, and `new_balance` once subscription has credited it).
    func claim(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let id = try Self.id(context)
        let outcome = try await participation.claim(app: app, user: user, campaign: id, now: clock.now())
        switch outcome {
        case .granted(let amount, let outboxID):
            let balance = await delivery.attempt(outboxID: outboxID)
            return try context.json(
                ClaimResponse(
                    claimed: true,
                    reward: RewardBody(amount: amount),
                    newBalance: balance,
                    rewardStatus: balance == nil ? "pending" : "granted"
                )
            )
        case .alreadyClaimed(let reward):
            var extra: [String: JSONValue] = [:]
            if let reward {
                var balance = reward.newBalance
                if balance == nil, reward.delivery != "dead", let outboxID = reward.outboxID {
                    balance = await delivery.confirm(outboxID: outboxID)
                }
                extra["reward"] = .object(["type": "credits", "amount": .int(reward.amount)])
                extra["reward_status"] = .string(balance != nil || reward.delivery == "delivered" ? "granted" : "pending")
                if let balance { extra["new_balance"] = .int(balance) }
            }
            throw AppError(AdsErrorCode.alreadyClaimed, "Reward already claimed; a campaign rewards each user once", extra: extra)
        }
    }

    func referralCode(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let now = clock.now()
        let code = try await db.withConnection { try await campaigns.referralCode(app: app, user: user, now: now, on: $0) }
        return try context.json(["code": code])
    }

    struct RedeemBody: Decodable { var code: String }

    func redeem(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let body = try await request.decodeJSON(as: RedeemBody.self, context: context)
        guard (4...16).contains(body.code.count), body.code.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw AppError.validation("code", "code must be 4 to 16 letters or digits")
        }
        let result = try await participation.redeem(app: app, user: user, code: body.code, now: clock.now())
        switch result {
        case .redeemed(_, let counted):
            // The referrer's progress moves once this user has played (a first rewarded view).
            return try context.json([
                "redeemed": JSONValue.bool(true), "counted": .bool(counted),
                "counts_after": .string(counted ? "counted" : "first_rewarded_view"),
            ])
        case .unknownCode: throw AppError.notFound("Referral code")
        case .ownCode: throw AppError(AdsErrorCode.ownReferralCode, "You cannot redeem your own referral code")
        case .alreadyReferred: throw AppError(AdsErrorCode.alreadyReferred, "You have already redeemed a referral code")
        }
    }
}

import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// Operator routes (admin credential + tenant headers): ad providers and campaigns.
struct AdminController: Sendable {
    let db: DatabasePool
    let ads: AdStore
    let campaigns: CampaignStore
    let clock: any WallClock
    let logger: Logger

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/providers") { _, context in
            let app = try context.requireApp()
            return try context.json(["providers": try await db.withConnection { try await ads.providers(app: app, on: $0) }])
        }
        admin.put("admin/providers/:name") { request, context in try await putProvider(request, context) }
        admin.post("admin/campaigns") { request, context in try await createCampaign(request, context) }
        admin.post("admin/campaigns/:id/end") { _, context in try await endCampaign(context) }
    }

    struct ProviderBody: Decodable {
        var priority: Int?
        var active: Bool?
        var rewardedUnitID: String?
        var interstitialUnitID: String?
        var bannerUnitID: String?
        var adDurationSeconds: Int?
        var verification: String?
        var testMode: Bool?
        var ecpmEstimateUSD: Double?
        enum CodingKeys: String, CodingKey {
            case priority, active
            case rewardedUnitID = "rewarded_unit_id"
            case interstitialUnitID = "interstitial_unit_id"
            case bannerUnitID = "banner_unit_id"
            case adDurationSeconds = "ad_duration_seconds"
            case verification
            case testMode = "test_mode"
            case ecpmEstimateUSD = "ecpm_estimate_usd"
        }
    }

    func putProvider(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let app = try context.requireApp()
        guard let name = context.parameters.get("name"), name.utf8.count <= 40, !name.isEmpty,
              name.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") }) else {
            throw AppError.validation("name", "provider name must be 1 to 40 lowercase letters, digits or '_'")
        }
        let b = try await request.decodeJSON(as: ProviderBody.self, context: context)
        if let d = b.adDurationSeconds, !(1...600).contains(d) { throw AppError.validation("ad_duration_seconds", "ad_duration_seconds must be 1 to 600") }
        if let v = b.verification, !["client", "ssv"].contains(v) { throw AppError.validation("verification", "verification must be client or ssv") }
        if let p = b.priority, !(0...10_000).contains(p) { throw AppError.validation("priority", "priority must be 0 to 10000") }
        if let e = b.ecpmEstimateUSD, !(0...10_000).contains(e) { throw AppError.validation("ecpm_estimate_usd", "ecpm_estimate_usd must be 0 to 10000") }
        for (field, unit) in [("rewarded_unit_id", b.rewardedUnitID), ("interstitial_unit_id", b.interstitialUnitID), ("banner_unit_id", b.bannerUnitID)] {
            if let unit, unit.isEmpty || unit.utf8.count > 200 { throw AppError.validation(field, "\(field) must be 1 to 200 bytes") }
        }
        let provider = try await db.withTransaction(logger: logger) { conn -> AdProvider in
            let existing = try await ads.providers(app: app, on: conn).first { $0.name == name }
            let p = AdProvider(name: name, priority: b.priority ?? existing?.priority ?? 100, active: b.active ?? existing?.active ?? true,
                               rewardedUnitID: b.rewardedUnitID ?? existing?.rewardedUnitID,
                               interstitialUnitID: b.interstitialUnitID ?? existing?.interstitialUnitID,
                               bannerUnitID: b.bannerUnitID ?? existing?.bannerUnitID,
                               adDurationSeconds: b.adDurationSeconds ?? existing?.adDurationSeconds ?? 30,
                               verification: b.verification ?? existing?.verification ?? "client",
                               testMode: b.testMode ?? existing?.testMode ?? false,
                               ecpmEstimateUSD: b.ecpmEstimateUSD ?? existing?.ecpmEstimateUSD ?? 0)
            return try await ads.upsertProvider(app: app, p, on: conn)
        }
        return try context.json(provider)
    }

    struct CampaignBody: Decodable {
        struct Reward: Decodable { var type: String?; var amount: Int }
        var name: String
        var description: String?
        var campaignType: String
        var reward: Reward
        var conditions: [String: JSONValue]
        var startsAt: Date?
        var endsAt: Date
        enum CodingKeys: String, CodingKey {
            case name, description
            case campaignType = "campaign_type"
            case reward, conditions
            case startsAt = "starts_at"
            case endsAt = "ends_at"
        }
    }

    func createCampaign(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let b = try await request.decodeJSON(as: CampaignBody.self, context: context)
        guard (1...120).contains(b.name.count) else { throw AppError.validation("name", "name must be 1 to 120 characters") }
        if let d = b.description, d.count > 1000 { throw AppError.validation("description", "description must be at most 1000 characters") }
        guard let type = CampaignType(rawValue: b.campaignType) else {
            throw AppError.validation("campaign_type", "campaign_type must be watch_ads, streak_bonus or referral")
        }
        guard b.reward.type == nil || b.reward.type == "credits" else { throw AppError.validation("reward.type", "reward.type must be credits") }
        guard (1...1000).contains(b.reward.amount) else { throw AppError.validation("reward.amount", "reward.amount must be 1 to 1000") }
        guard case .int(let required)? = b.conditions[type.conditionKey], (1...1000).contains(required) else {
            throw AppError.validation("conditions.\(type.conditionKey)", "conditions.\(type.conditionKey) must be a number from 1 to 1000")
        }
        var placement: String?
        if let p = b.conditions["placement"] {
            guard case .string(let s) = p else { throw AppError.validation("conditions.placement", "conditions.placement must be a string") }
            placement = try AdsController.placement(s, field: "conditions.placement")
        }
        let now = clock.now()
        let starts = b.startsAt ?? now
        guard b.endsAt > starts else { throw AppError.validation("ends_at", "ends_at must be after starts_at") }
        let campaign = try await db.withConnection { conn in
            try await campaigns.create(Campaign(id: UUID(), appID: app, name: b.name, description: b.description ?? "", type: type,
                                                rewardAmount: b.reward.amount, conditions: .object(b.conditions), required: required,
                                                placement: placement, startsAt: starts, endsAt: b.endsAt, active: true), on: conn)
        }
        return try context.json(CampaignsController.CampaignView(campaign, nil, now: now), status: .created)
    }

    func endCampaign(_ context: ServiceRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let id = try CampaignsController.id(context)
        let now = clock.now()
        guard let c = try await db.withConnection({ try await campaigns.end(app: app, id: id, now: now, on: $0) }) else {
            throw AppError.notFound("Campaign")
        }
        return try context.json(CampaignsController.CampaignView(c, nil, now: now))
    }
}

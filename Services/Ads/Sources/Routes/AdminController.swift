import AdsDomain
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
    let administration: AdsAdministration
    let clock: any WallClock

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/providers") { _, context in
            let app = try context.requireApp()
            return try context.json(["providers": try await db.withConnection { try await ads.providers(app: app, on: $0) }])
        }
        admin.put("admin/providers/:name") { request, context in try await putProvider(request, context) }
        admin.post("admin/campaigns") { request, context in try await createCampaign(request, context) }
        admin.get("admin/campaigns") { request, context in try await listCampaigns(request, context) }
        admin.get("admin/campaigns/:id") { _, context in try await showCampaign(context) }
        admin.post("admin/campaigns/:id/end") { _, context in try await endCampaign(context) }
        admin.patch("admin/campaigns/:id") { request, context in try await editCampaign(request, context) }
        admin.get("admin/campaigns/:id/results") { request, context in try await results(request, context) }
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
            name.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") })
        else {
            throw AppError.validation("name", "provider name must be 1 to 40 lowercase letters, digits or '_'")
        }
        let b = try await request.decodeJSON(as: ProviderBody.self, context: context)
        if let d = b.adDurationSeconds, !(1...600).contains(d) {
            throw AppError.validation("ad_duration_seconds", "ad_duration_seconds must be 1 to 600")
        }
        if let v = b.verification, !["client", "ssv"].contains(v) { throw AppError.validation("verification", "verification must be client or ssv") }
        if let p = b.priority, !(0...10_000).contains(p) { throw AppError.validation("priority", "priority must be 0 to 10000") }
        if let e = b.ecpmEstimateUSD, !(0...10_000).contains(e) {
            throw AppError.validation("ecpm_estimate_usd", "ecpm_estimate_usd must be 0 to 10000")
        }
        for (field, unit) in [
            ("rewarded_unit_id", b.rewardedUnitID), ("interstitial_unit_id", b.interstitialUnitID), ("banner_unit_id", b.bannerUnitID),
        ] {
            if let unit, unit.isEmpty || unit.utf8.count > 200 { throw AppError.validation(field, "\(field) must be 1 to 200 bytes") }
        }
        let provider = try await administration.saveProvider(app: app, name: name) { existing in
            AdProvider(
                name: name,
                priority: b.priority ?? existing?.priority ?? 100,
                active: b.active ?? existing?.active ?? true,
                rewardedUnitID: b.rewardedUnitID ?? existing?.rewardedUnitID,
                interstitialUnitID: b.interstitialUnitID ?? existing?.interstitialUnitID,
                bannerUnitID: b.bannerUnitID ?? existing?.bannerUnitID,
                adDurationSeconds: b.adDurationSeconds ?? existing?.adDurationSeconds ?? 30,
                verification: b.verification ?? existing?.verification ?? "client",
                testMode: b.testMode ?? existing?.testMode ?? false,
                ecpmEstimateUSD: b.ecpmEstimateUSD ?? existing?.ecpmEstimateUSD ?? 0
            )
        }
        return try context.json(provider)
    }

    struct CampaignBody: Decodable {
        struct Reward: Decodable {
            var type: String?
            var amount: Int
        }
        var name: String
        var description: String?
        var campaignType: String
        var reward: Reward
        var conditions: [String: JSONValue]
        var startsAt: Date?
        var endsAt: Date
        var variants: [CampaignExperiment.VariantInput]?
        enum CodingKeys: String, CodingKey {
            case name, description
            case campaignType = "campaign_type"
            case reward, conditions
            case startsAt = "starts_at"
            case endsAt = "ends_at"
            case variants
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
        // #31: variants, each with its weight and optionally its own reward and goal.
        let variants =
            try b.variants.map {
                try CampaignExperiment.variants($0, type: type, reward: b.reward.amount, required: required, conditions: b.conditions)
            } ?? []
        let campaign = try await administration.createCampaign(
            Campaign(
                id: UUID(),
                appID: app,
                name: b.name,
                description: b.description ?? "",
                type: type,
                rewardAmount: b.reward.amount,
                conditions: .object(b.conditions),
                required: required,
                placement: placement,
                startsAt: starts,
                endsAt: b.endsAt,
                active: true
            ),
            variants: variants
        )
        return try context.json(AdminCampaignView(campaign, variants: variants, now: now), status: .created)
    }

    /// `GET /admin/campaigns/{id}`: what the create and the edit answer (#45: the same body).
    func showCampaign(_ context: ServiceRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let id = try CampaignsController.id(context)
        let (campaign, variants) = try await db.withConnection { conn -> (Campaign, [CampaignVariant]) in
            guard let c = try await campaigns.campaign(app: app, id: id, on: conn) else { throw AppError.notFound("Campaign") }
            return (c, try await campaigns.variants(of: [id], on: conn)[id] ?? [])
        }
        return try context.json(AdminCampaignView(campaign, variants: variants, now: clock.now()))
    }

    /// `GET /admin/campaigns?limit=&offset=`: the app's campaigns, latest start first.
    func listCampaigns(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let query = request.uri.queryParameters
        guard let limit = Int(query.get("limit") ?? "50"), (1...100).contains(limit) else {
            throw AppError.validation("limit", "limit must be 1 to 100")
        }
        guard let offset = Int(query.get("offset") ?? "0"), (0...100_000).contains(offset) else {
            throw AppError.validation("offset", "offset must be 0 to 100000")
        }
        let now = clock.now()
        let views = try await db.withConnection { conn -> [AdminCampaignView] in
            let page = try await campaigns.list(app: app, limit: limit, offset: offset, on: conn)
            let variants = try await campaigns.variants(of: page.map(\.id), on: conn)
            return page.map { AdminCampaignView($0, variants: variants[$0.id] ?? [], now: now) }
        }
        return try context.json(CampaignPage(campaigns: views, limit: limit, offset: offset))
    }

    struct CampaignPage: Encodable {
        var campaigns: [AdminCampaignView]
        var limit: Int
        var offset: Int
    }

    /// The campaign as its operator sees it: every variant with its weight.
    struct AdminCampaignView: Encodable {
        var campaign: CampaignsController.CampaignView
        var variants: [CampaignVariant]
        init(_ c: Campaign, variants: [CampaignVariant], now: Date) {
            campaign = CampaignsController.CampaignView(c, nil, now: now)
            self.variants = variants
        }
        func encode(to encoder: any Encoder) throws {
            try campaign.encode(to: encoder)
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(variants, forKey: .variants)
        }
        enum CodingKeys: String, CodingKey { case variants }
    }

    /// `PATCH /admin/campaigns/{id}`: name, description, end, and the variants' weights, rewards
    /// and goals. An assigned user never moves: a variant with users cannot be removed (409), new
    /// users follow the new weights. Nothing changes when any part is refused.
    func editCampaign(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let id = try CampaignsController.id(context)
        let b = try await request.decodeJSON(as: AdsAdministration.CampaignEdit.self, context: context)
        if let n = b.name { guard (1...120).contains(n.count) else { throw AppError.validation("name", "name must be 1 to 120 characters") } }
        if let d = b.description, d.count > 1000 { throw AppError.validation("description", "description must be at most 1000 characters") }
        let now = clock.now()
        let (campaign, variants) = try await administration.editCampaign(app: app, id: id, edit: b)
        return try context.json(AdminCampaignView(campaign, variants: variants, now: now))
    }

    /// `GET /admin/campaigns/{id}/results` (`?format=csv`): per variant, the funnel from the
    /// rows (assigned, exposed, joined, completed, claimed, credits), the completion rate
    /// (completed ÷ exposed), each variant against the first with its 95 % interval and the
    /// z-test's p-value, and a sample-ratio warning; by day too.
    func results(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let id = try CampaignsController.id(context)
        let format = request.uri.queryParameters.get("format") ?? "json"
        guard ["json", "csv"].contains(format) else { throw AppError.badRequest("format must be json or csv", field: "format") }
        let (c, variants, rows, days) = try await db.withConnection { conn in
            guard let c = try await campaigns.campaign(app: app, id: id, on: conn) else { throw AppError.notFound("Campaign") }
            return (
                c, try await campaigns.variants(of: [id], on: conn)[id] ?? [], try await campaigns.results(campaign: id, on: conn),
                try await campaigns.resultsByDay(campaign: id, on: conn)
            )
        }
        let report = CampaignReport(
            campaignID: c.id,
            name: c.name,
            rewardAmount: c.rewardAmount,
            required: c.required,
            variants: variants,
            rows: rows,
            days: days
        )
        if format == "csv" {
            return Response(
                status: .ok,
                headers: [
                    .contentType: "text/csv; charset=utf-8",
                    .contentDisposition: "attachment; filename=\"campaign-\(id.lowercasedString)-results.csv\"",
                ],
                body: .init(byteBuffer: ByteBuffer(string: report.csv))
            )
        }
        return try context.json(report)
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

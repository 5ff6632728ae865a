import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// The operators' side of ads (UC-ADS-4.4's campaigns, the providers): a provider saved with
/// what the request did not name kept, a campaign created with its variants, a campaign edited
/// (an assigned user never moves; nothing changes when any part is refused). The flow owns the
/// transactions (#50).
struct AdsAdministration: Sendable {
    let db: DatabasePool
    let ads: AdStore
    let campaigns: CampaignStore
    let logger: Logger

    struct CampaignEdit: Decodable, Sendable {
        var name: String?
        var description: String?
        var endsAt: Date?
        var variants: [CampaignExperiment.VariantInput]?
        enum CodingKeys: String, CodingKey {
            case name, description
            case endsAt = "ends_at"
            case variants
        }
    }

    /// `merge` gives the provider to store from the one stored under that name, if any.
    func saveProvider(app: UUID, name: String, merge: @Sendable (AdProvider?) -> AdProvider) async throws -> AdProvider {
        try await db.withTransaction(logger: logger) { conn -> AdProvider in
            let existing = try await ads.providers(app: app, on: conn).first { $0.name == name }
            return try await ads.upsertProvider(app: app, merge(existing), on: conn)
        }
    }

    func createCampaign(_ campaign: Campaign, variants: [CampaignVariant]) async throws -> Campaign {
        try await db.withTransaction(logger: logger) { conn in try await campaigns.create(campaign, variants: variants, on: conn) }
    }

    func editCampaign(app: UUID, id: UUID, edit: CampaignEdit) async throws -> (Campaign, [CampaignVariant]) {
        try await db.withTransaction(logger: logger) { conn -> (Campaign, [CampaignVariant]) in
            guard let c = try await campaigns.campaign(app: app, id: id, on: conn) else { throw AppError.notFound("Campaign") }
            if let e = edit.endsAt { guard e > c.startsAt else { throw AppError.validation("ends_at", "ends_at must be after starts_at") } }
            var variants = try await campaigns.variants(of: [id], on: conn)[id] ?? []
            if let input = edit.variants {
                guard c.hasVariants else {
                    throw AppError.validation("variants", "this campaign was created without variants; create a new one to run an experiment")
                }
                guard case .object(let conditions) = c.conditions else { throw AppError.unavailable }
                let new = try CampaignExperiment.variants(input, type: c.type, reward: c.rewardAmount, required: c.required, conditions: conditions)
                try CampaignExperiment.checkEdit(old: variants, new: new, assigned: try await campaigns.assignedCounts(campaign: id, on: conn))
                try await campaigns.saveVariants(campaign: id, new, on: conn)
                variants = new
            }
            guard
                let edited = try await campaigns.edit(app: app, id: id, name: edit.name, description: edit.description, endsAt: edit.endsAt, on: conn)
            else {
                throw AppError.notFound("Campaign")
            }
            return (edited, variants)
        }
    }
}

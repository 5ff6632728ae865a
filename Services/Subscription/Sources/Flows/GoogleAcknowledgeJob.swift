import Foundation
import ServiceKit
import SubscriptionDomain

/// Google refunds a purchase that is not acknowledged within 3 days: acknowledging is a job,
/// written with the subscription, retried until Google says yes.
struct GoogleAcknowledgeJob: Codable, Sendable {
    static let queue = "subscription"
    static let kind = "google_acknowledge"
    var appID: UUID
    var purchaseToken: String
    var productID: String
    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case purchaseToken = "purchase_token"
        case productID = "product_id"
    }

    static func handler(client: GooglePlayClient, configs: TenantSettings<GooglePlayConfig>, clock: any WallClock) -> JobHandler {
        { job in
            let p = try job.decode(GoogleAcknowledgeJob.self)
            guard let config = try await configs.value(for: p.appID) else { throw ConfigurationError("no Google Play configuration for \(p.appID)") }
            try await client.acknowledge(token: p.purchaseToken, productID: p.productID, config: config, now: clock.now())
        }
    }
}

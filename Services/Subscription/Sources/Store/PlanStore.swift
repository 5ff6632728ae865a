import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

public struct Plan: Codable, Sendable, Equatable {
    public var id: UUID
    public var name: String
    public var planType: String
    public var appleProductID: String?
    public var googleProductID: String?
    public var price: Double
    public var currency: String
    public var trialEnabled: Bool
    public var trialDurationDays: Int
    public var features: JSONValue
    public var discountVsMonthly: String?

    enum CodingKeys: String, CodingKey {
        case id, name
        case planType = "plan_type"
        case appleProductID = "apple_product_id"
        case googleProductID = "google_product_id"
        case price, currency
        case trialEnabled = "trial_enabled"
        case trialDurationDays = "trial_duration_days"
        case features
        case discountVsMonthly = "discount_vs_monthly"
    }
}

public struct PlanStore: Sendable {
    let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    /// The app's active plans ordered by price, with the saving of the longer ones computed.
    public func active(app: UUID, on conn: PostgresConnection) async throws -> [Plan] {
        let rows = try await conn.run("""
            SELECT id, name, plan_type, apple_product_id, google_product_id, price::float8, currency, trial_enabled,
                   trial_duration_days, features::text
            FROM subscription_plans WHERE app_id = \(app) AND active ORDER BY price ASC, name
            """, logger: logger)
        var plans: [Plan] = []
        for try await r in rows.decode((UUID, String, String, String?, String?, Double, String, Bool, Int, String).self) {
            plans.append(Plan(id: r.0, name: r.1, planType: r.2, appleProductID: r.3, googleProductID: r.4, price: r.5, currency: r.6,
                              trialEnabled: r.7, trialDurationDays: r.8,
                              features: (try? JSONDecoder().decode(JSONValue.self, from: Data(r.9.utf8))) ?? .object([:]),
                              discountVsMonthly: nil))
        }
        for i in plans.indices {
            let monthly = plans.first { $0.planType == "monthly" && $0.currency == plans[i].currency }?.price
            plans[i].discountVsMonthly = PlanPricing.discountVsMonthly(price: plans[i].price, planType: plans[i].planType, monthlyPrice: monthly)
        }
        return plans
    }

    /// The seed's two plans (monthly 4.99 EUR, annual 39.99 EUR, 7-day trials); a second call
    /// changes nothing.
    public func seedDefaults(app: UUID, on conn: PostgresConnection) async throws -> Int {
        let features = #"{"unlimited_content":true,"no_ads":true,"offline_unlimited":true,"premium_categories":["all"]}"#
        var created = 0
        for (name, type, apple, google, price) in [("Premium Mensuel", "monthly", "com.quiz.premium.monthly", "premium_monthly", 4.99),
                                                   ("Premium Annuel", "annual", "com.quiz.premium.annual", "premium_annual", 39.99)] {
            let rows = try await conn.run("""
                INSERT INTO subscription_plans (app_id, name, plan_type, apple_product_id, google_product_id, price, currency,
                                                trial_enabled, trial_duration_days, features)
                VALUES (\(app), \(name), \(type), \(apple), \(google), \(price)::numeric, 'EUR', true, 7, \(features)::jsonb)
                ON CONFLICT DO NOTHING RETURNING id
                """, logger: logger)
            for try await _ in rows { created += 1 }
        }
        return created
    }

    public func deactivate(plan: UUID, on conn: PostgresConnection) async throws -> Bool {
        var n = 0
        for try await _ in try await conn.run("UPDATE subscription_plans SET active = false WHERE id = \(plan) RETURNING id", logger: logger) { n += 1 }
        return n > 0
    }
}

import Foundation
import Logging
import PostgresNIO
import ServiceKit
import SubscriptionDomain
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
        let rows = try await conn.run(
            """
            SELECT id, name, plan_type, apple_product_id, google_product_id, price::float8, currency, trial_enabled,
                   trial_duration_days, features::text
            FROM subscription_plans WHERE app_id = \(app) AND active ORDER BY price ASC, name
            """,
            logger: logger
        )
        var plans: [Plan] = []
        for try await r in rows.decode((UUID, String, String, String?, String?, Double, String, Bool, Int, String).self) {
            plans.append(
                Plan(
                    id: r.0,
                    name: r.1,
                    planType: r.2,
                    appleProductID: r.3,
                    googleProductID: r.4,
                    price: r.5,
                    currency: r.6,
                    trialEnabled: r.7,
                    trialDurationDays: r.8,
                    features: (try? JSONDecoder().decode(JSONValue.self, from: Data(r.9.utf8))) ?? .object([:]),
                    discountVsMonthly: nil
                )
            )
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
        for (name, type, apple, google, price) in [
            ("Premium Mensuel", "monthly", "com.quiz.premium.monthly", "premium_monthly", 4.99),
            ("Premium Annuel", "annual", "com.quiz.premium.annual", "premium_annual", 39.99),
        ] {
            let rows = try await conn.run(
                """
                INSERT INTO subscription_plans (app_id, name, plan_type, apple_product_id, google_product_id, price, currency,
                                                trial_enabled, trial_duration_days, features)
                VALUES (\(app), \(name), \(type), \(apple), \(google), \(price)::numeric, 'EUR', true, 7, \(features)::jsonb)
                ON CONFLICT DO NOTHING RETURNING id
                """,
                logger: logger
            )
            created += try await rows.count()
        }
        return created
    }

    public func deactivate(plan: UUID, on conn: PostgresConnection) async throws -> Bool {
        let n = try await conn.run("UPDATE subscription_plans SET active = false WHERE id = \(plan) RETURNING id", logger: logger).count()
        return n > 0
    }

    /// An operator's new plan (`subscription-service plans create`).
    public func create(
        app: UUID,
        name: String,
        type: String,
        appleProductID: String?,
        googleProductID: String?,
        price: Double,
        currency: String,
        trialDays: Int,
        features: String,
        on conn: PostgresConnection
    ) async throws -> UUID {
        for try await id in try await conn.run(
            """
            INSERT INTO subscription_plans (app_id, name, plan_type, apple_product_id, google_product_id, price, currency,
                                            trial_enabled, trial_duration_days, features)
            VALUES (\(app), \(name), \(type), \(appleProductID), \(googleProductID), \(price)::numeric, \(currency), \(trialDays > 0),
                    \(trialDays), \(features)::jsonb)
            RETURNING id
            """,
            logger: logger
        ).decode(UUID.self) { return id }
        throw AppError.unavailable
    }

    /// Changes what is given; false when there is no such plan.
    public func update(
        plan: UUID,
        name: String?,
        price: Double?,
        trialDays: Int?,
        features: String?,
        on conn: PostgresConnection
    ) async throws -> Bool {
        var n = 0
        for try await _ in try await conn.run(
            """
            UPDATE subscription_plans SET name = COALESCE(\(name), name), price = COALESCE(\(price)::numeric, price),
                   trial_duration_days = COALESCE(\(trialDays), trial_duration_days),
                   trial_enabled = COALESCE(\(trialDays.map { $0 > 0 }), trial_enabled),
                   features = COALESCE(\(features)::jsonb, features)
            WHERE id = \(plan) RETURNING id
            """,
            logger: logger
        ) { n += 1 }
        return n == 1
    }

    /// Creates or replaces a content's access rule (and puts it back in use).
    public func setContentRule(app: UUID, content: String, level: String, cost: Int, hours: Int, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO content_rules (app_id, content_id, access_level, credit_cost, unlock_hours)
            VALUES (\(app), \(content), \(level), \(cost), \(hours))
            ON CONFLICT (app_id, content_id) DO UPDATE SET access_level = EXCLUDED.access_level,
                credit_cost = EXCLUDED.credit_cost, unlock_hours = EXCLUDED.unlock_hours, active = true, updated_at = now()
            """,
            logger: logger
        )
    }

    /// Takes a content rule out of use; false when there is no such rule.
    public func deactivateContentRule(app: UUID, content: String, on conn: PostgresConnection) async throws -> Bool {
        let n = try await conn.run(
            """
            UPDATE content_rules SET active = false, updated_at = now() WHERE app_id = \(app) AND content_id = \(content) RETURNING content_id
            """,
            logger: logger
        ).count()
        return n == 1
    }
}

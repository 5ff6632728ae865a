import Foundation
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import TestSupport
import WireTypes
import XCTest

@testable import SubscriptionService

final class PlansTests: XCTestCase {
    func testDiscountVsMonthly() {
        XCTAssertEqual(PlanPricing.discountVsMonthly(price: 39.99, planType: "annual", monthlyPrice: 4.99), "-33%")
        XCTAssertNil(PlanPricing.discountVsMonthly(price: 4.99, planType: "monthly", monthlyPrice: 4.99))
        XCTAssertNil(PlanPricing.discountVsMonthly(price: 70, planType: "annual", monthlyPrice: 4.99), "no saving, nothing shown")
        XCTAssertNil(PlanPricing.discountVsMonthly(price: 39.99, planType: "annual", monthlyPrice: nil))
    }

    func testPlansOfTheAppOrderedByPrice() async throws {
        try await CreditsTests.run { h in
            let runtime = TestEnvironment.runtime(.subscription, migrations: try SubscriptionService.migrations())
            try await withPostgres(runtime.db) { db in
                let created = try await db.withConnection { try await PlanStore(logger: runtime.logger).seedDefaults(app: h.app, on: $0) }
                XCTAssertEqual(created, 2)
                let again = try await db.withConnection { try await PlanStore(logger: runtime.logger).seedDefaults(app: h.app, on: $0) }
                XCTAssertEqual(again, 0, "seeding twice changes nothing")
            }
            let r = try await h.client.execute(uri: "/subscription/v1/plans", method: .get, headers: try h.headers(UUID())) { $0 }
            XCTAssertEqual(r.status, .ok)
            struct Body: Decodable { var plans: [Plan] }
            let plans = try r.json(Body.self).plans
            XCTAssertEqual(plans.map(\.planType), ["monthly", "annual"])
            XCTAssertEqual(plans[1].discountVsMonthly, "-33%")
            XCTAssertEqual(plans[0].trialDurationDays, 7)
            XCTAssertEqual(
                plans[0].features,
                .object([
                    "unlimited_content": true, "no_ads": true, "offline_unlimited": true,
                    "premium_categories": .array(["all"]),
                ])
            )
            // Another tenant sees none of them.
            var other = try h.headers(UUID())
            other[.xAppID] = UUID().uuidString
            let none = try await h.client.execute(uri: "/subscription/v1/plans", method: .get, headers: other) { $0 }
            XCTAssertEqual(none.status, .unauthorized, "this app's token under another app's headers")
        }
    }
}

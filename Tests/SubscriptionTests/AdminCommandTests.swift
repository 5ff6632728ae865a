import Foundation
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import TestSupport
import XCTest

/// The operator's commands for plans and content rules, run as the binary.
final class AdminCommandTests: XCTestCase {
    func run(_ args: [String]) throws -> (Int32, String) {
        let r = try runServiceCommand("subscription-service", args)
        return (r.status, r.out)
    }

    func scalar(_ sql: String) async throws -> Int {
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
            for try await n in try await db.query(PostgresQuery(unsafeSQL: sql)).decode(Int.self) { return n }
            return -1
        }
    }

    func testPlansAndContentRulesThroughTheCommand() async throws {
        let app = UUID().uuidString
        let (created, out) = try run([
            "admin", "plans", "create", "--app-id", app, "--name", "Premium Hebdo", "--plan-type", "weekly",
            "--apple-product-id", "com.quiz.premium.weekly", "--price", "1.99", "--trial-days", "3",
            "--features", #"{"no_ads":true}"#,
        ])
        XCTAssertEqual(created, 0, out)
        let id = try XCTUnwrap(out.split(separator: " ").dropFirst().first.map(String.init))
        let (updated, _) = try run(["admin", "plans", "update", "--plan-id", id, "--price", "2.49"])
        XCTAssertEqual(updated, 0)
        let price = try await scalar("SELECT (price * 100)::int FROM subscription.subscription_plans WHERE id = '\(id)'")
        XCTAssertEqual(price, 249)
        let (deactivated, _) = try run(["admin", "plans", "deactivate", "--plan-id", id])
        XCTAssertEqual(deactivated, 0)
        let active = try await scalar("SELECT count(*)::int FROM subscription.subscription_plans WHERE id = '\(id)' AND active")
        XCTAssertEqual(active, 0)
        let (bad, _) = try run(["admin", "plans", "create", "--app-id", app, "--name", "X", "--plan-type", "daily", "--price", "1"])
        XCTAssertNotEqual(bad, 0, "an unknown plan type is refused")

        XCTAssertEqual(
            try run(["admin", "content", "set", "--app-id", app, "--content-id", "flags-africa", "--level", "freemium", "--cost", "5"]).0,
            0
        )
        let cost = try await scalar(
            "SELECT credit_cost FROM subscription.content_rules WHERE app_id = '\(app)' AND content_id = 'flags-africa' AND active"
        )
        XCTAssertEqual(cost, 5)
        XCTAssertEqual(try run(["admin", "content", "deactivate", "--app-id", app, "--content-id", "flags-africa"]).0, 0)
        let left = try await scalar("SELECT count(*)::int FROM subscription.content_rules WHERE app_id = '\(app)' AND active")
        XCTAssertEqual(left, 0)
        XCTAssertNotEqual(try run(["admin", "content", "set", "--app-id", app, "--content-id", "x", "--level", "gold"]).0, 0)
    }
}

import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import SubscriptionDomain
import TestSupport
import WireTypes
import XCTest

@testable import SubscriptionService

/// `GET /subscriptions/me` is answered from each replica's memory (#17) and never outlives a
/// change: a purchase or a refund made through one replica is in the next answer of the other
/// within a second, and in the buyer's own next answer on the replica that took it at once.
final class StatusCacheTests: XCTestCase {
    /// Two replicas (own runtime, pool, change feed, caches) on one database.
    /// Without `bootstrap`, the app's store settings are not in the environment (set at run time).
    static func runTwo(bootstrap: Bool = true, _ body: @Sendable (PurchaseTests.H, PurchaseTests.H, ServiceRuntime) async throws -> Void) async throws
    {
        let store = try FakeAppStore()
        let app = UUID()
        let clock = MovableClock()
        let signer = AccessTokenSigner(privateKey: .init())
        func replica() throws -> (ServiceRuntime, some ApplicationProtocol) {
            let runtime = TestEnvironment.runtime(
                .subscription,
                migrations: try SubscriptionService.migrations(),
                overrides: ["APPLE_IAP_APPS": bootstrap ? store.config(app: app) : "", "RUN_WORKERS": "false"],
                clock: clock
            )
            return (
                runtime,
                try SubscriptionService.buildApplication(
                    runtime: runtime,
                    appVerifier: PurchaseTests.AllowAll(),
                    tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [signer.jwk])), clock: clock)
                )
            )
        }
        let (r1, a1) = try replica()
        let (r2, a2) = try replica()
        try await a1.test(.router) { c1 in
            await r1.readiness.waitUntilMigrated()
            _ = try await r1.db.withConnection { try await PlanStore(logger: r1.logger).seedDefaults(app: app, on: $0) }
            try await a2.test(.router) { c2 in
                await r2.readiness.waitUntilMigrated()
                while r1.changes.livePeriod == nil || r2.changes.livePeriod == nil { try await Task.sleep(for: .milliseconds(10)) }
                try await body(
                    PurchaseTests.H(client: c1, signer: signer, app: app, clock: clock, store: store),
                    PurchaseTests.H(client: c2, signer: signer, app: app, clock: clock, store: store),
                    r2
                )
            }
        }
    }

    static func eventually(_ h: PurchaseTests.H, _ user: UUID, premium: Bool, _ what: String) async throws {
        let end = ContinuousClock.now + .seconds(1)
        while try await StoreNotificationTests.me(h, user).is_premium != premium {
            guard ContinuousClock.now < end else { return XCTFail("\(what): is_premium still \(!premium) after 1 s") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func testPurchaseAndRefundOnOneReplicaReachTheOtherWithinASecond() async throws {
        try await Self.runTwo { a, b, runtimeB in
            let user = UUID()
            // B holds the free answer (read twice: the second from memory).
            let free = try await StoreNotificationTests.me(b, user)
            XCTAssertFalse(free.is_premium)
            let before = runtimeB.cacheHits("subscription_state")
            _ = try await StoreNotificationTests.me(b, user)
            XCTAssertEqual(runtimeB.cacheHits("subscription_state"), before + 1, "the second read is answered from memory")

            let original = "9100000\(Int.random(in: 100000...999999))"
            let tx = try a.store.transaction(id: original, original: original, trial: false, expires: Date() + 30 * 86400)
            let bought = try await a.post("subscriptions/purchase", user, jws: tx)
            XCTAssertEqual(bought.status, .created, String(buffer: bought.body))
            let own = try await StoreNotificationTests.me(a, user)
            XCTAssertTrue(own.is_premium, "the buyer's next read on the replica that took the purchase")
            try await Self.eventually(b, user, premium: true, "a purchase on another replica")

            // The store's refund arrives at A: B stops granting within a second.
            _ = try await StoreNotificationTests.me(b, user)
            let refund = try await StoreNotificationTests.post(a, try a.store.notification("REFUND", transaction: tx))
            XCTAssertEqual(refund.status, .ok, String(buffer: refund.body))
            try await Self.eventually(b, user, premium: false, "a refund on another replica")
        }
    }

    /// The period's end ends the held answer even before the sweep or any event.
    func testAHeldAnswerEndsWithThePeriod() async throws {
        try await Self.runTwo { a, _, _ in
            let user = UUID()
            let original = "9200000\(Int.random(in: 100000...999999))"
            // Ends within the cache's 5 minutes, so only the period's end can end the held answer.
            _ = try await a.post(
                "subscriptions/purchase",
                user,
                jws: try a.store.transaction(
                    id: original,
                    original: original,
                    trial: false,
                    expires: a.clock.now() + 120
                )
            )
            let first = try await StoreNotificationTests.me(a, user)
            let again = try await StoreNotificationTests.me(a, user)
            XCTAssertTrue(first.is_premium && again.is_premium)
            a.clock.advance(by: 150)
            let later = try await StoreNotificationTests.me(a, user)
            XCTAssertFalse(later.is_premium)
            XCTAssertEqual(later.warning, "subscription_expired")
        }
    }
}

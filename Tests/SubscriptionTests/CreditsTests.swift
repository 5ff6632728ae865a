import Crypto
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

/// UC-SUB-2.4: the append-only ledger, earning once per reference, unlocking freemium content
/// without ever going below zero.
final class CreditsTests: XCTestCase {
    struct AllowAll: AppVerifier { func verify(appID: UUID, apiKey: String) async throws -> Bool { true } }

    struct Harness: Sendable {
        let client: any TestClientProtocol
        let signer: AccessTokenSigner
        let app: UUID
        let clock: MovableClock

        func token(_ user: UUID) throws -> String {
            let now = Int(clock.now().timeIntervalSince1970)
            return try signer.sign(
                AccessTokenClaims(
                    userID: user,
                    appID: app,
                    email: nil,
                    status: .free,
                    isGuest: false,
                    issuer: "auth",
                    issuedAt: now,
                    expiresAt: now + 3600,
                    jti: UUID().uuidString
                )
            )
        }

        func headers(_ user: UUID, idempotency: String? = nil) throws -> HTTPFields {
            var h: HTTPFields = [.xAppID: app.uuidString, .xAPIKey: "k", .authorization: "Bearer \(try token(user))"]
            if let idempotency { h[.idempotencyKey] = idempotency }
            return h
        }

        func earn(_ user: UUID, _ amount: Int, reference: String = UUID().uuidString, source: String = "ad_reward") async throws -> TestResponse {
            try await client.execute(
                uri: "/internal/credits/earn",
                method: .post,
                headers: [.authorization: "Bearer local-internal-ads", .xServiceName: "ads", .contentType: "application/json"],
                body: ByteBuffer(
                    string: #"{"user_id":"\#(user)","app_id":"\#(app)","amount":\#(amount),"source":"\#(source)","reference_id":"\#(reference)"}"#
                )
            ) { $0 }
        }

        func unlock(_ user: UUID, _ content: String, idempotency: String? = nil) async throws -> TestResponse {
            try await client.execute(
                uri: "/subscription/v1/content/\(content)/unlock",
                method: .post,
                headers: try headers(user, idempotency: idempotency)
            ) {
                $0
            }
        }

        func balance(_ user: UUID) async throws -> Int {
            let r = try await client.execute(uri: "/subscription/v1/credits/balance", method: .get, headers: try headers(user)) { $0 }
            return try r.json([String: Int].self)["balance"]!
        }

        func rules(_ n: Int, level: String = "freemium", cost: Int = 3, prefix: String) async throws {
            try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
                try await db.query(
                    """
                    INSERT INTO subscription.content_rules (app_id, content_id, access_level, credit_cost, unlock_hours)
                    SELECT \(app), \(prefix) || g, \(level), \(cost), 24 FROM generate_series(1, \(n)) g
                    """
                )
            }
        }
    }

    static func run(_ body: @Sendable (Harness) async throws -> Void) async throws {
        let clock = MovableClock()
        let key = Curve25519.Signing.PrivateKey()
        let signer = AccessTokenSigner(privateKey: key)
        let runtime = TestEnvironment.runtime(.subscription, migrations: try SubscriptionService.migrations(), clock: clock)
        let app = try SubscriptionService.buildApplication(
            runtime: runtime,
            appVerifier: AllowAll(),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [signer.jwk])), clock: clock)
        )
        try await app.test(.router) { client in
            await runtime.readiness.waitUntilMigrated()
            try await body(Harness(client: client, signer: signer, app: UUID(), clock: clock))
        }
    }

    /// A reward delivered after the user's erasure (still in ads' outbox) recreates nothing: the
    /// erasure fence refuses the ledger's row, and the internal route answers 410 `user_erased`,
    /// final for the sender's outbox (not 401, not 500).
    func testARewardForAnErasedUserIsGoneAndWritesNothing() async throws {
        try await Self.run { h in
            let user = UUID()
            try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
                try await db.query(
                    """
                    INSERT INTO subscription.session_state (app_id, user_id, version, session_epoch, state)
                    VALUES (\(h.app), \(user), 9, 2147483647, 'erased')
                    """
                )
            }
            let late = try await h.earn(user, 5)
            XCTAssertEqual(late.status, .gone)
            XCTAssertEqual(try late.envelope().error, "user_erased")
            let rows = try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db -> Int in
                let sql = """
                    SELECT ((SELECT count(*) FROM subscription.credit_ledger WHERE user_id = '\(user)')
                        + (SELECT count(*) FROM subscription.credit_balances WHERE user_id = '\(user)'))::int
                    """
                for try await n in try await db.query(PostgresQuery(unsafeSQL: sql)).decode(Int.self) { return n }
                return -1
            }
            XCTAssertEqual(rows, 0, "nothing written for the erased user")
        }
    }

    func testEarnOncePerReferenceEvenFiftyAtOnce() async throws {
        try await Self.run { h in
            let user = UUID()
            let reference = "reward-\(UUID())"
            let results = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
                for _ in 0..<50 {
                    group.addTask {
                        let r = try await h.earn(user, 1, reference: reference)
                        struct E: Decodable { var credited: Bool }
                        return (Int(r.status.code), try r.json(E.self).credited)
                    }
                }
                return try await group.reduce(into: [(Int, Bool)]()) { $0.append($1) }
            }
            XCTAssertTrue(results.allSatisfy { $0.0 == 200 })
            XCTAssertEqual(results.filter(\.1).count, 1, "credited once")
            let balance = try await h.balance(user)
            XCTAssertEqual(balance, 1)
        }
    }

    func testTwoHundredSimultaneousUnlocksNeverOverspend() async throws {
        try await Self.run { h in
            let user = UUID()
            let prefix = "quiz-\(UUID().uuidString.prefix(6))-"
            try await h.rules(200, prefix: prefix)
            _ = try await h.earn(user, 10)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for i in 1...200 { group.addTask { Int(try await h.unlock(user, "\(prefix)\(i)").status.code) } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            XCTAssertEqual(statuses.filter { $0 == 200 }.count, 3)
            XCTAssertEqual(statuses.filter { $0 == 402 }.count, 197)
            let balance = try await h.balance(user)
            XCTAssertEqual(balance, 1)
            // The ledger adds up to the balance.
            let r = try await h.client.execute(uri: "/subscription/v1/credits/transactions?limit=100", method: .get, headers: try h.headers(user)) {
                $0
            }
            struct Page: Decodable { var transactions: [CreditTransaction] }
            let rows = try r.json(Page.self).transactions
            XCTAssertEqual(rows.count, 4)
            XCTAssertEqual(rows.map(\.amount).reduce(0, +), 1)
        }
    }

    func testUnlockRulesAndIdempotency() async throws {
        try await Self.run { h in
            let user = UUID()
            let prefix = "c-\(UUID().uuidString.prefix(6))-"
            try await h.rules(2, prefix: prefix)
            try await h.rules(1, level: "premium", prefix: prefix + "p")
            try await h.rules(1, level: "free", prefix: prefix + "f")
            _ = try await h.earn(user, 8)
            let first = try await h.unlock(user, "\(prefix)1")
            XCTAssertEqual(first.status, .ok)
            struct U: Decodable {
                var charged: Bool
                var balance: Int
                var unlock: ContentUnlock
            }
            let u = try first.json(U.self)
            XCTAssertTrue(u.charged)
            XCTAssertEqual(u.balance, 5)
            XCTAssertEqual(u.unlock.expiresAt.timeIntervalSince(u.unlock.unlockedAt), 24 * 3600, accuracy: 1)
            // Still unlocked: no second charge.
            let again = try await h.unlock(user, "\(prefix)1")
            XCTAssertFalse(try again.json(U.self).charged)
            // After 24 h it costs again; not enough now for a second content then.
            h.clock.advance(by: 24 * 3600 + 1)
            let renewed = try await h.unlock(user, "\(prefix)1", idempotency: "tap-1")
            XCTAssertTrue(try renewed.json(U.self).charged)
            // The same Idempotency-Key (a retried tap) answers the same and charges nothing.
            let retried = try await h.unlock(user, "\(prefix)1", idempotency: "tap-1")
            XCTAssertEqual(String(buffer: retried.body), String(buffer: renewed.body))
            // The same key for another content is refused, not answered "unlocked" (Stripe's rule).
            let reused = try await h.unlock(user, "\(prefix)2", idempotency: "tap-1")
            XCTAssertEqual(reused.status, .unprocessableContent)
            XCTAssertEqual(try reused.envelope().error, "idempotency_key_reused")
            do {
                let v = try await h.balance(user)
                XCTAssertEqual(v, 2, "nothing spent")
            }
            let poor = try await h.unlock(user, "\(prefix)2")
            XCTAssertEqual(poor.status.code, 402)
            let e = try poor.envelope()
            XCTAssertEqual(e.error, "insufficient_credits")
            XCTAssertEqual(e.extra["balance"], .int(2))
            XCTAssertEqual(e.extra["cost"], .int(3))
            // Not unlockable with credits, unknown content, no token.
            let premium = try await h.unlock(user, "\(prefix)p1")
            XCTAssertEqual(premium.status, .unprocessableContent)
            let free = try await h.unlock(user, "\(prefix)f1")
            XCTAssertEqual(free.status, .unprocessableContent)
            let unknown = try await h.unlock(user, "nope")
            XCTAssertEqual(unknown.status, .notFound)
            let anonymous = try await h.client.execute(
                uri: "/subscription/v1/content/\(prefix)1/unlock",
                method: .post,
                headers: [.xAppID: h.app.uuidString, .xAPIKey: "k"]
            ) { $0 }
            XCTAssertEqual(anonymous.status, .unauthorized)

            // FREEMIUM = subscription OR credits: a subscriber is never charged.
            let subscriber = UUID()
            _ = try await h.earn(subscriber, 5)
            try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
                try await db.query(
                    """
                    INSERT INTO subscription.subscriptions (app_id, user_id, plan_type, status, start_date, end_date, store, store_product_id,
                                                            store_transaction_id, store_original_transaction_id, environment)
                    VALUES (\(h.app), \(subscriber), 'monthly', 'active', now() - interval '1 day', \(h.clock.now().addingTimeInterval(86400)),
                            'apple', 'com.quiz.premium.monthly', \(prefix + "s1"), \(prefix + "s1"), 'Sandbox')
                    """
                )
            }
            let viaSubscription = try await h.unlock(subscriber, "\(prefix)2")
            XCTAssertEqual(viaSubscription.status, .ok)
            let body = try viaSubscription.json([String: JSONValue].self)
            XCTAssertEqual(body["charged"], .bool(false))
            XCTAssertEqual(body["via"], .string("subscription"))
            XCTAssertEqual(body["unlock"], .null)
            do {
                let v = try await h.balance(subscriber)
                XCTAssertEqual(v, 5, "no credit spent")
            }
        }
    }

    func testEarnBadInputAndCredential() async throws {
        try await Self.run { h in
            let user = UUID()
            let zero = try await h.earn(user, 0)
            XCTAssertEqual(zero.status, .unprocessableContent)
            let badSource = try await h.earn(user, 5, source: "hacked")
            XCTAssertEqual(badSource.status, .unprocessableContent)
            let noReference = try await h.earn(user, 5, reference: "")
            XCTAssertEqual(noReference.status, .unprocessableContent)
            let noCredential = try await h.client.execute(
                uri: "/internal/credits/earn",
                method: .post,
                headers: [.contentType: "application/json"],
                body: ByteBuffer(string: "{}")
            ) { $0 }
            XCTAssertEqual(noCredential.status, .unauthorized)
            let wrongType = try await h.client.execute(
                uri: "/internal/credits/earn",
                method: .post,
                headers: [.authorization: "Bearer local-internal-ads", .xServiceName: "ads", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"user_id":"\#(user)","app_id":"\#(h.app)","amount":"ten","source":"promo","reference_id":"x"}"#)
            ) { $0 }
            XCTAssertEqual(wrongType.status, .badRequest)
            let balance = try await h.balance(user)
            XCTAssertEqual(balance, 0)
            let page = try await h.client.execute(uri: "/subscription/v1/credits/transactions?limit=500", method: .get, headers: try h.headers(user))
            { $0 }
            XCTAssertEqual(page.status, .badRequest)
        }
    }
}

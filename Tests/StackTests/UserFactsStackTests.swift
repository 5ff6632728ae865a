import Foundation
import PostgresNIO
import ServiceKit
import Synchronization
import TestSupport
import WireTypes
import XCTest

/// One truth about each user across the running services, through the gateway: sessions that
/// end are refused by all four within 5 s; consents flipped as fast as a client can end with
/// the last answer everywhere; purchase→refund pairs end `free` at auth; an erased user leaves
/// no row and gets nothing recreated.
final class UserFactsStackTests: XCTestCase {
    let http = DocumentedHTTPClient()
    let gateway = TestEnvironment.gatewayURL
    deinit { http.shutdown() }

    var client: StackClient { StackClient(http: http, gateway: gateway) }
    func guest() async throws -> StackSession { try await client.guest() }
    func call(_ method: String, _ path: String, _ headers: [(String, String)], _ json: String? = nil) async throws -> (Int, [String: JSONValue]) {
        try await client.call(method, path, headers, json)
    }

    /// A read at each service that needs a valid session.
    static let probes = [
        ("auth", "/auth/v1/auth/me"), ("subscription", "/subscription/v1/credits/balance"),
        ("offline", "/offline/v1/sync/profile"), ("ads", "/ads/v1/ads/consent"),
    ]

    /// Seconds from `start` until every service refuses the session with `status`; fails past 5 s.
    func secondsUntilRefusedEverywhere(_ s: StackSession, status: Int, since start: ContinuousClock.Instant) async throws -> [String: Double] {
        var refusedAfter: [String: Double] = [:]
        while refusedAfter.count < Self.probes.count {
            for (service, path) in Self.probes where refusedAfter[service] == nil {
                let (code, _) = try await call("GET", path, s.headers)
                if code == status {
                    let d = (ContinuousClock.now - start).components
                    refusedAfter[service] = Double(d.seconds) + Double(d.attoseconds) / 1e18
                } else {
                    XCTAssertEqual(code, 200, "\(service) answers 200 until it refuses")
                }
            }
            if ContinuousClock.now - start > .seconds(5) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        for (service, _) in Self.probes { XCTAssertNotNil(refusedAfter[service], "\(service) still accepts the token after 5 s") }
        return refusedAfter
    }

    func db<T: Sendable>(_ body: @Sendable (DatabasePool) async throws -> T) async throws -> T {
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.stackDatabase), body)
    }

    func testLogoutEverywhereAndSuspensionAreRefusedByEveryServiceWithinFiveSeconds() async throws {
        let s = try await guest()
        for (service, path) in Self.probes {
            do {
                let (code, _) = try await call("GET", path, s.headers)
                XCTAssertEqual(code, 200, service)
            }
        }
        let start = ContinuousClock.now
        let (out, _) = try await call("POST", "/auth/v1/auth/logout", s.headers, #"{"all":true}"#)
        XCTAssertEqual(out, 200)
        let after = try await secondsUntilRefusedEverywhere(s, status: 401, since: start)
        print("revocation after logout-all: \(after)")

        // Suspension by the operator's command (another process, on the stack's database).
        let t = try await guest()
        let app = try DemoApp.values()["APP_ID"] ?? ""
        var env = ProcessInfo.processInfo.environment
        env["DATABASE_NAME"] = TestEnvironment.stackDatabase
        env["LOG_LEVEL"] = "error"
        let suspendedAt = ContinuousClock.now
        let suspend = try runServiceBinary(
            "auth-service",
            ["admin", "users", "suspend", "--app-id", app, "--user-id", t.userID.uuidString, "--reason", "Cheating"],
            environment: env
        )
        XCTAssertEqual(suspend.status, 0, suspend.err)
        _ = try await secondsUntilRefusedEverywhere(t, status: 403, since: suspendedAt)
        let (_, me) = try await call("GET", "/auth/v1/auth/me", t.headers)
        XCTAssertEqual(me["error"], .string("account_suspended"))
        XCTAssertEqual(me["reason"], .string("Cheating"))
        let (refresh, refused) = try await call("POST", "/auth/v1/auth/refresh", t.headers, #"{"refresh_token":"\#(t.refresh)"}"#)
        XCTAssertEqual(refresh, 403)
        XCTAssertEqual(refused["error"], .string("account_suspended"))
    }

    func testConsentsFlippedAsFastAsPossibleEndWithTheLastAnswerEverywhere() async throws {
        let client = self.client
        let users = try await withThrowingTaskGroup(of: StackSession.self) { group in
            for _ in 0..<50 { group.addTask { try await client.guest() } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        // Half go on→off, half on→off→on, each as fast as the client can send.
        let last = try await withThrowingTaskGroup(of: (UUID, Bool).self) { group in
            for (i, u) in users.enumerated() {
                group.addTask {
                    let answers = i % 2 == 0 ? [true, false] : [true, false, true]
                    for a in answers {
                        let (code, _) = try await client.call(
                            "PATCH",
                            "/auth/v1/auth/privacy",
                            u.headers,
                            #"{"consent_geolocation":\#(a),"consent_personalized_ads":\#(a)}"#
                        )
                        XCTAssertEqual(code, 200)
                    }
                    return (u.userID, answers.last!)
                }
            }
            return try await group.reduce(into: [UUID: Bool]()) { $0[$1.0] = $1.1 }
        }
        let ids = Array(last.keys)
        let deadline = Date() + 20
        var offline: [UUID: Bool] = [:]
        var ads: [UUID: Bool] = [:]
        while Date() < deadline {
            (offline, ads) = try await db { db in
                var o: [UUID: Bool] = [:]
                var a: [UUID: Bool] = [:]
                for try await (u, g) in try await db.query("SELECT user_id, geolocation FROM offline.user_consents WHERE user_id = ANY(\(ids))")
                    .decode((UUID, Bool).self)
                { o[u] = g }
                for try await (u, p) in try await db.query(
                    """
                    SELECT DISTINCT ON (user_id) user_id, consent_personalized_ads FROM ads.user_consent_ads WHERE user_id = ANY(\(ids)) ORDER BY user_id, id DESC
                    """
                ).decode((UUID, Bool).self) { a[u] = p }
                return (o, a)
            }
            if offline == last && ads == last { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        XCTAssertEqual(offline, last, "offline ends with the last geolocation answer of every user")
        XCTAssertEqual(ads, last, "ads ends with the last personalised-ads answer of every user")
        // What the apps see agrees: the ads screen, and a location update.
        for u in users.prefix(6) {
            let (_, consent) = try await call("GET", "/ads/v1/ads/consent", u.headers + [("X-Country-Code", "FR")])
            XCTAssertEqual(consent["personalized_ads"], .bool(last[u.userID]!))
            XCTAssertEqual(consent["required"], .bool(false), "the answer at auth answers the ads question")
            let (code, _) = try await call(
                "POST",
                "/offline/v1/location/update",
                u.headers,
                #"{"latitude":48.85,"longitude":2.35,"accuracy":20,"consent_given":true}"#
            )
            XCTAssertEqual(code, last[u.userID]! ? 201 : 403)
        }
    }

    func testPurchaseThenRefundEndsFreeAtAuthForEveryUser() async throws {
        let store = try LocalStoreKit()
        let client = self.client
        let users = try await withThrowingTaskGroup(of: StackSession.self) { group in
            for _ in 0..<50 { group.addTask { try await client.guest() } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for u in users {
                group.addTask {
                    let original = "3000\(Int.random(in: 100_000_000...999_999_999))"
                    let tx = try store.transaction(id: original, original: original, product: "com.quiz.premium.monthly", expires: Date() + 600)
                    let (bought, body) = try await client.call(
                        "POST",
                        "/subscription/v1/subscriptions/purchase",
                        u.headers,
                        #"{"store":"apple","signed_transaction":"\#(tx)"}"#
                    )
                    XCTAssertEqual(bought, 201, "\(body)")
                    let refund = try store.notification("REFUND", transaction: tx)
                    let r = try await client.http.send(
                        HTTPRequest(
                            method: "POST",
                            url: client.gateway + "/subscription/v1/webhooks/apple",
                            headers: [("Content-Type", "application/json")],
                            body: Data(#"{"signedPayload":"\#(refund)"}"#.utf8)
                        )
                    )
                    XCTAssertEqual(r.status, 200)
                }
            }
            try await group.waitForAll()
        }
        let ids = users.map(\.userID)
        let deadline = Date() + 20
        var statuses: [String: Int] = [:]
        while Date() < deadline {
            statuses = try await db { db in
                var s: [String: Int] = [:]
                for try await (status, n) in try await db.query("SELECT status, count(*)::int FROM auth.users WHERE id = ANY(\(ids)) GROUP BY status")
                    .decode((String, Int).self)
                { s[status] = n }
                return s
            }
            let delivered = try await db { db in
                var n = 0
                for try await c in try await db.query(
                    """
                    SELECT count(*)::int FROM subscription.outbox WHERE target_service = 'auth' AND status <> 'delivered'
                    AND path LIKE '/internal/users/%/status%' AND (body->>'app_id')::uuid IS NOT NULL
                    AND lower(split_part(split_part(path, '/', 4), '?', 1))::uuid = ANY(\(ids))
                    """
                ).decode(Int.self) { n = c }
                return n == 0
            }
            if statuses == ["free": 50] && delivered { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        XCTAssertEqual(statuses, ["free": 50], "every refund stands at auth, whatever order the two messages arrived in")
        let (_, me) = try await call("GET", "/auth/v1/auth/me", users[0].headers)
        if case .object(let user)? = me["user"] { XCTAssertEqual(user["status"], .string("free")) } else { XCTFail("\(me)") }
    }

    /// #45, read as the app reads right after its paywall closes, under load: a purchase's 201
    /// comes back only once auth, ads and offline hold it (ads stops offering ads at once), and a
    /// restore that moves the purchase to another account answers only once the account it left
    /// is free everywhere. Twenty pairs at once beside clients reading as fast as they can; every
    /// read is made right after the answer, without waiting.
    func testAPurchaseAndARestoreAreEverywhereWhenTheyAnswerUnderLoad() async throws {
        let store = try LocalStoreKit()
        let client = self.client
        let consent = #"{"consent_personalized_ads":true,"consent_data_sharing":false,"age_gate_passed":true,"is_under_age":false,"country":"FR"}"#
        let available = "/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits"
        @Sendable func facts(_ s: StackSession) async throws -> (auth: JSONValue?, ads: JSONValue?, offline: JSONValue?) {
            async let me = client.call("GET", "/auth/v1/auth/me", s.headers)
            async let ads = client.call("GET", available, s.headers)
            async let profile = client.call("GET", "/offline/v1/sync/profile", s.headers)
            let (m, a, p) = try await (me, ads, profile)
            guard case .object(let user)? = m.1["user"], case .object(let limits)? = p.1["limits"] else { throw XCTSkip("unreadable: \(m) \(p)") }
            return (user["status"], a.1["available"], limits["tier"])
        }
        var loaders: [StackSession] = []
        for _ in 0..<4 { loaders.append(try await client.guest()) }
        try await withThrowingTaskGroup(of: Void.self) { load in
            for u in loaders {
                load.addTask {
                    while !Task.isCancelled {
                        _ = try await client.call("GET", "/subscription/v1/credits/balance", u.headers)
                        _ = try await client.call("GET", available, u.headers)
                    }
                }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let (a, b) = (try await client.guest(), try await client.guest())
                        for u in [a, b] { _ = try await client.call("POST", "/ads/v1/ads/consent", u.headers, consent) }
                        let original = "3100\(Int.random(in: 100_000_000...999_999_999))"
                        let tx = try store.transaction(id: original, original: original, product: "com.quiz.premium.monthly", expires: Date() + 600)
                        let body = #"{"store":"apple","signed_transaction":"\#(tx)"}"#
                        let (bought, answer) = try await client.call("POST", "/subscription/v1/subscriptions/purchase", a.headers, body)
                        XCTAssertEqual(bought, 201, "\(answer)")
                        let afterPurchase = try await facts(a)
                        XCTAssertEqual(afterPurchase.auth, .string("premium"), "auth, right after the purchase answered")
                        XCTAssertEqual(afterPurchase.ads, .bool(false), "ads still offered right after the purchase answered")
                        XCTAssertEqual(afterPurchase.offline, .string("premium"), "offline, right after the purchase answered")
                        let (restored, moved) = try await client.call("POST", "/subscription/v1/subscriptions/restore", b.headers, body)
                        XCTAssertEqual(restored, 200, "\(moved)")
                        let left = try await facts(a)
                        XCTAssertEqual(left.auth, .string("free"), "the account the purchase left, at auth")
                        XCTAssertEqual(left.ads, .bool(true), "the account the purchase left, at ads")
                        XCTAssertEqual(left.offline, .string("free"), "the account the purchase left, at offline")
                        let took = try await facts(b)
                        XCTAssertEqual(took.auth, .string("premium"))
                        XCTAssertEqual(took.ads, .bool(false))
                        XCTAssertEqual(took.offline, .string("premium"))
                    }
                }
                try await group.waitForAll()
            }
            // The readers stop with the test; the group waits for them and drops what they threw
            // (a request cut short by the cancellation is no failure).
            load.cancelAll()
        }
    }

    /// The deletion runs (its due date moved to now): every service refuses the old token, no
    /// row keyed by the user is left but the detached accounting and the erasure marker, the old
    /// token creates nothing.
    func testAnErasedUserLeavesNothingAndGetsNothingRecreated() async throws {
        let s = try await guest()
        // Some data in every service first.
        _ = try await call("GET", "/offline/v1/sync/profile", s.headers)
        _ = try await call("PATCH", "/auth/v1/auth/privacy", s.headers, #"{"consent_geolocation":true}"#)
        _ = try await call("POST", "/ads/v1/ads/consent", s.headers, #"{"consent_personalized_ads":true,"country":"FR"}"#)
        let (scheduled, _) = try await call("DELETE", "/auth/v1/auth/me", s.headers)
        XCTAssertEqual(scheduled, 202)
        let user = s.userID
        try await db { db in
            try await db.query(
                "UPDATE auth.deletions SET scheduled_for = now() - interval '1 second' WHERE user_id = \(user) AND status = 'scheduled'"
            )
            try await db.query("UPDATE auth.jobs SET run_at = now() WHERE kind = 'execute_deletion' AND status = 'pending'")
        }
        let start = ContinuousClock.now
        _ = try await secondsUntilRefusedEverywhere(s, status: 401, since: start)
        // Every service has run its deletion.
        let tables: [(String, String)] = [
            ("auth", "exports"), ("auth", "game_center_connections"), ("auth", "refresh_tokens"), ("auth", "privacy_settings"),
            ("auth", "fact_counters"), ("auth", "fact_versions"),
            ("offline", "sync_profiles"), ("offline", "user_consents"), ("offline", "user_locations"), ("offline", "fact_versions"),
            ("ads", "user_consent_ads"), ("ads", "fact_versions"), ("subscription", "fact_versions"),
        ]
        let deadline = Date() + 20
        var left: [String: Int] = [:]
        while Date() < deadline {
            left = try await db { db in
                var out: [String: Int] = [:]
                for (schema, table) in tables {
                    for try await n in try await db.query(
                        PostgresQuery(unsafeSQL: "SELECT count(*)::int FROM \(schema).\(table) WHERE user_id = '\(user)'")
                    )
                    .decode(Int.self)
                    where n > 0 { out["\(schema).\(table)"] = n }
                }
                return out
            }
            if left.isEmpty { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        XCTAssertEqual(left, [:], "rows keyed by the erased user")
        // The old token creates nothing afterwards.
        let (profile, _) = try await call("GET", "/offline/v1/sync/profile", s.headers)
        XCTAssertEqual(profile, 401)
        let recreated = try await db { db in
            for try await n in try await db.query("SELECT count(*)::int FROM offline.sync_profiles WHERE user_id = \(user)").decode(Int.self) {
                return n
            }
            return -1
        }
        XCTAssertEqual(recreated, 0)
        for schema in ["subscription", "offline", "ads"] {
            let marker = try await db { db in
                for try await n in try await db.query(
                    PostgresQuery(unsafeSQL: "SELECT count(*)::int FROM \(schema).session_state WHERE user_id = '\(user)' AND state = 'erased'")
                )
                .decode(Int.self) { return n }
                return -1
            }
            XCTAssertEqual(marker, 1, "\(schema) keeps the erasure marker while tokens live")
        }
    }
}

struct StackSession: Sendable {
    var headers: [(String, String)]
    var userID: UUID
    var refresh: String
}

/// The calls the stack tests make, usable from concurrent tasks.
struct StackClient: Sendable {
    let http: DocumentedHTTPClient
    let gateway: String

    /// A guest signed up at auth directly, as its own client address (sign-ups are limited per
    /// address).
    func guest() async throws -> StackSession {
        let t = try DemoApp.tenantHeaders()
        let r = try await http.send(
            HTTPRequest(
                method: "POST",
                url: "http://127.0.0.1:3001/auth/v1/auth/register",
                headers: t + [("X-Forwarded-For", "10.89.\(Int.random(in: 0...250)).\(Int.random(in: 1...250))")],
                body: Data(#"{"provider":"guest","credentials":{"device_id":"facts-\#(UUID())"}}"#.utf8)
            )
        )
        XCTAssertEqual(r.status, 201)
        struct Body: Decodable {
            struct T: Decodable {
                var access_token: String
                var refresh_token: String
            }
            struct U: Decodable { var id: UUID }
            var tokens: T
            var user: U
        }
        let b = try r.decode(Body.self)
        return StackSession(
            headers: t + [("Authorization", "Bearer \(b.tokens.access_token)"), ("Content-Type", "application/json")],
            userID: b.user.id,
            refresh: b.tokens.refresh_token
        )
    }

    func call(_ method: String, _ path: String, _ headers: [(String, String)], _ json: String? = nil) async throws -> (Int, [String: JSONValue]) {
        let r = try await http.send(HTTPRequest(method: method, url: gateway + path, headers: headers, body: json.map { Data($0.utf8) }))
        return (r.status, (try? JSONDecoder().decode([String: JSONValue].self, from: r.body)) ?? [:])
    }

}

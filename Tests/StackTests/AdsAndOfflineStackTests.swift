import Foundation
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// Ads and offline in the running stack, through the gateway: a rewarded view credited by the
/// real subscription service; a demo category downloaded by the real offline worker, an answer
/// synced, a place found nearby.
final class AdsAndOfflineStackTests: XCTestCase {
    let http = DocumentedHTTPClient()
    let gateway = TestEnvironment.gatewayURL
    deinit { http.shutdown() }

    func tenant() throws -> [(String, String)] { try DemoApp.tenantHeaders() }

    /// A guest for the setup, signed up at auth directly as its own client address (sign-ups are
    /// limited per address, and the journey test signs up through the gateway).
    func guest() async throws -> [(String, String)] {
        try await signUp(#"{"provider":"guest","credentials":{"device_id":"stack-\#(UUID())"}}"#)
    }

    /// An account (guests have no cloud save), signed up the same way.
    func account() async throws -> [(String, String)] {
        let email = "stack-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        return try await signUp(#"{"provider":"email","credentials":{"email":"\#(email)","password":"Tr1cky-Geography-42!"}}"#)
    }

    func signUp(_ json: String) async throws -> [(String, String)] {
        let t = try tenant()
        let r = try await http.send(
            HTTPRequest(
                method: "POST",
                url: "http://127.0.0.1:3001/auth/v1/auth/register",
                headers: t + [("X-Forwarded-For", "10.88.\(Int.random(in: 0...250)).\(Int.random(in: 1...250))")],
                body: Data(json.utf8)
            )
        )
        XCTAssertEqual(r.status, 201)
        struct Tokens: Decodable {
            struct T: Decodable { var access_token: String }
            var tokens: T
        }
        return t + [("Authorization", "Bearer \(try r.decode(Tokens.self).tokens.access_token)")]
    }

    func call(_ method: String, _ path: String, _ headers: [(String, String)], _ json: String? = nil) async throws -> (Int, [String: JSONValue]) {
        let r = try await http.send(HTTPRequest(method: method, url: gateway + path, headers: headers, body: json.map { Data($0.utf8) }))
        let body = (try? JSONDecoder().decode([String: JSONValue].self, from: r.body)) ?? [:]
        return (r.status, body)
    }

    /// #15: one request id follows a change from the gateway through an outbox delivery into
    /// the receiving service's log (an answer given on the ads screen, sent to auth).
    func testOneRequestIDFollowsAnOutboxDeliveryIntoTheReceiversLog() async throws {
        let user = try await guest()
        let id = "trace-\(UUID().uuidString.lowercased())"
        let (status, _) = try await call(
            "POST",
            "/ads/v1/ads/consent",
            user + [("X-Request-ID", id)],
            #"{"consent_personalized_ads":true,"consent_data_sharing":true,"age_gate_passed":true,"is_under_age":false,"country":"FR"}"#
        )
        XCTAssertEqual(status, 200)
        let deadline = Date() + 20
        var found = false
        while Date() < deadline && !found {
            let log = (try? String(contentsOfFile: ".data/logs/auth.log", encoding: .utf8)) ?? ""
            found = log.split(separator: "\n").contains { $0.contains(id) && $0.contains("consent-answers") }
            if !found { try await Task.sleep(for: .milliseconds(200)) }
        }
        XCTAssertTrue(found, "auth logged the delivery under the gateway's request id \(id)")
        let adsLog = (try? String(contentsOfFile: ".data/logs/ads.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(adsLog.contains(id), "and ads logged the request itself")
    }

    func testRewardedViewIsCreditedByTheRealSubscriptionService() async throws {
        let user = try await guest()
        let (consent, _) = try await call(
            "POST",
            "/ads/v1/ads/consent",
            user,
            #"{"consent_personalized_ads":true,"consent_data_sharing":false,"age_gate_passed":true,"is_under_age":false,"country":"FR"}"#
        )
        XCTAssertEqual(consent, 200)
        let (_, available) = try await call("GET", "/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits", user)
        XCTAssertEqual(available["available"], .bool(true))
        let (status, request) = try await call("POST", "/ads/v1/ads/request", user, #"{"ad_type":"rewarded","placement":"earn_credits"}"#)
        XCTAssertEqual(status, 201)
        XCTAssertEqual(request["test_mode"], .bool(true))
        guard case .string(let id)? = request["ad_request_id"] else { return XCTFail("no ad request id") }
        // The ad plays: the server checks the reported time against the time since the request.
        try await Task.sleep(for: .seconds(20))
        let (shown, _) = try await call("POST", "/ads/v1/ads/\(id)/impression", user, #"{"loaded":true,"shown":true}"#)
        XCTAssertEqual(shown, 200)
        let (done, completion) = try await call(
            "POST",
            "/ads/v1/ads/\(id)/complete",
            user,
            #"{"completed":true,"clicked":false,"display_duration_ms":24500}"#
        )
        XCTAssertEqual(done, 200)
        XCTAssertEqual(completion["reward_granted"], .bool(true))
        XCTAssertEqual(completion["new_balance"], .int(1))
        let (_, balance) = try await call("GET", "/subscription/v1/credits/balance", user)
        XCTAssertEqual(balance["balance"], .int(1))
    }

    func testDemoCategoryDownloadedAnswerSyncedAndPlaceNearby() async throws {
        let user = try await account()
        let (_, profile) = try await call("GET", "/offline/v1/sync/profile", user)
        guard case .array(let categories)? = profile["categories"] else { return XCTFail("no categories") }
        XCTAssertTrue(
            categories.contains {
                if case .object(let c) = $0 { return c["id"] == .string("capitals-europe") }
                return false
            }
        )
        let (accepted, job) = try await call("POST", "/offline/v1/categories/download", user, #"{"category_ids":["capitals-europe"]}"#)
        XCTAssertEqual(accepted, 202)
        guard case .string(let jobID)? = job["job_id"] else { return XCTFail("no job") }
        var status: [String: JSONValue] = [:]
        for _ in 0..<100 {
            (_, status) = try await call("GET", "/offline/v1/categories/download/\(jobID)", user)
            if status["status"] == .string("completed") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        XCTAssertEqual(status["status"], .string("completed"))
        XCTAssertEqual(status["downloaded_count"], .int(20))
        let (_, items) = try await call("GET", "/offline/v1/categories/capitals-europe/items", user)
        guard case .array(let list)? = items["items"] else { return XCTFail("no items") }
        XCTAssertEqual(list.count, 20)

        let answer = """
            {"client_action_id":"stack-\(UUID())","action_type":"answer_submit","entity_type":"quiz_completion","entity_id":"quiz_1",
             "category_id":"capitals-europe","payload":{"quiz_id":"quiz_1","score":8}}
            """
        let (queued, _) = try await call("POST", "/offline/v1/sync/queue", user, answer)
        XCTAssertEqual(queued, 201)
        // #45: the same action again (an answer lost on the way back) is the first answer, a
        // documented 200 (the client checks it against the contract).
        let (again, replay) = try await call("POST", "/offline/v1/sync/queue", user, answer)
        XCTAssertEqual(again, 200)
        XCTAssertEqual(replay["replayed"], .bool(true))
        let (_, execution) = try await call("POST", "/offline/v1/sync/execute", user)
        guard case .string(let syncJob)? = execution["job_id"] else { return XCTFail("no sync job") }
        var sync: [String: JSONValue] = [:]
        for _ in 0..<100 {
            (_, sync) = try await call("GET", "/offline/v1/sync/execute/\(syncJob)", user)
            if sync["status"] == .string("completed") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        XCTAssertEqual(sync["succeeded"], .int(1))

        let (refused, _) = try await call(
            "POST",
            "/offline/v1/location/update",
            user,
            #"{"latitude":48.8566,"longitude":2.3522,"accuracy":20,"consent_given":true}"#
        )
        XCTAssertEqual(refused, 403, "geolocation consent is off at auth by default")
        let (patched, _) = try await call("PATCH", "/auth/v1/auth/privacy", user, #"{"consent_geolocation":true}"#)
        XCTAssertEqual(patched, 200)
        let (created, _) = try await call(
            "POST",
            "/offline/v1/location/update",
            user,
            #"{"latitude":48.8566,"longitude":2.3522,"accuracy":20,"consent_given":true}"#
        )
        XCTAssertEqual(created, 201)
        let (_, nearby) = try await call("GET", "/offline/v1/location/nearby-content?radius_km=50", user)
        guard case .array(let places)? = nearby["content"], case .object(let first)? = places.first else { return XCTFail("nothing nearby") }
        XCTAssertEqual(first["id"], .string("around-fr"))

        // Geolocation withdrawn at auth: offline is told through auth's outbox and deletes the
        // locations at once (seed 11a); every message auth wrote for this user is delivered.
        let (_, me) = try await call("GET", "/auth/v1/auth/me", user)
        guard case .object(let profileUser)? = me["user"], case .string(let userID)? = profileUser["id"] else { return XCTFail("no user: \(me)") }
        let (withdrawn, _) = try await call("PATCH", "/auth/v1/auth/privacy", user, #"{"consent_geolocation":false}"#)
        XCTAssertEqual(withdrawn, 200)
        let app = try DemoApp.values()["APP_ID"]!.lowercased()
        let internalHeaders = [("Authorization", "Bearer local-internal-auth"), ("X-Service-Name", "auth")]
        let http = self.http
        let (locations, delivered, undelivered) = try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.stackDatabase)) { db in
            var seen = (locations: -1, delivered: -1, undelivered: -1)
            for _ in 0..<60 {
                let export = try await http.send(
                    HTTPRequest(url: "http://127.0.0.1:3003/internal/users/\(userID)/export?app_id=\(app)", headers: internalHeaders)
                )
                if case .array(let rows)? = try export.decode(UserDataExport.self).sections["locations"] { seen.locations = rows.count }
                for try await (done, pending) in try await db.query(
                    """
                    SELECT count(*) FILTER (WHERE status = 'delivered')::int, count(*) FILTER (WHERE status <> 'delivered')::int
                    FROM auth.outbox WHERE path LIKE \("%" + userID.lowercased() + "%")
                    """
                ).decode((Int, Int).self) { (seen.delivered, seen.undelivered) = (done, pending) }
                if seen.locations == 0 && seen.undelivered == 0 && seen.delivered >= 2 { break }
                try await Task.sleep(for: .milliseconds(250))
            }
            return seen
        }
        XCTAssertEqual(locations, 0, "offline deleted the locations")
        // Two geolocation changes (on, then off), each a versioned fact to offline (which deletes the locations with the withdrawal).
        XCTAssertEqual(delivered, 2, "auth wrote the two versioned geolocation messages and they were delivered")
        XCTAssertEqual(undelivered, 0, "auth's messages to offline and ads were all delivered")
    }

    /// App Store Server Notifications are retried by Apple: a renewal, auto-renew turned off and
    /// a refund, each delivered ten times at once through the gateway, change the subscription
    /// once each (one event each, auth told of the refund once).
    func testAppleNotificationsDeliveredTenTimesAtOnceChangeStateOnceEach() async throws {
        let user = try await guest()
        let store = try LocalStoreKit()
        let original = "2000\(Int.random(in: 100_000_000...999_999_999))"
        let purchase = try store.transaction(id: original, original: original, product: "com.quiz.premium.monthly", expires: Date() + 600)
        let bought = try await call(
            "POST",
            "/subscription/v1/subscriptions/purchase",
            user,
            #"{"store":"apple","signed_transaction":"\#(purchase)"}"#
        )
        XCTAssertEqual(bought.0, 201, "\(bought.1)")
        let renewedUntil = Date() + 30 * 86400
        let renewed = try store.transaction(
            id: original + "1",
            original: original,
            product: "com.quiz.premium.monthly",
            expires: renewedUntil,
            environment: "Sandbox"
        )
        let http = self.http
        let gateway = self.gateway
        let deliveries: [(String, String, check: ([String: JSONValue]) -> Void)] = [
            (
                "renewed", try store.notification("DID_RENEW", transaction: renewed),
                { me in
                    guard case .object(let sub)? = me["subscription"], case .string(let end)? = sub["end_date"],
                        let endDate = ISO8601DateFormatter().date(from: end)
                    else { return XCTFail("no subscription: \(me)") }
                    XCTAssertEqual(endDate.timeIntervalSince1970, renewedUntil.timeIntervalSince1970, accuracy: 2)
                }
            ),
            (
                "auto_renew_disabled", try store.notification("DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", transaction: renewed),
                { me in
                    if case .object(let sub)? = me["subscription"] { XCTAssertEqual(sub["auto_renew"], .bool(false)) } else { XCTFail("\(me)") }
                    XCTAssertEqual(me["is_premium"], .bool(true), "access continues to the end of the period")
                }
            ),
            (
                "refunded", try store.notification("REFUND", transaction: renewed),
                { me in
                    XCTAssertEqual(me["is_premium"], .bool(false))
                }
            ),
        ]
        let database = TestEnvironment.stackDatabase
        for (event, signed, check) in deliveries {
            let answers = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        let r = try await http.send(
                            HTTPRequest(
                                method: "POST",
                                url: gateway + "/subscription/v1/webhooks/apple",
                                headers: [("Content-Type", "application/json")],
                                body: Data(#"{"signedPayload":"\#(signed)"}"#.utf8)
                            )
                        )
                        return (r.status, String(decoding: r.body, as: UTF8.self))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            XCTAssertEqual(answers.map(\.0), Array(repeating: 200, count: 10), "\(event): \(answers)")
            XCTAssertEqual(answers.filter { $0.1.contains("applied") }.count, 1, "\(event): \(answers)")
            XCTAssertEqual(answers.filter { $0.1.contains("duplicate") }.count, 9, "\(event): \(answers)")
            check(try await call("GET", "/subscription/v1/subscriptions/me", user).1)
            let events = try await withPostgres(TestEnvironment.adminClient(database: database)) { db -> Int in
                var n = 0
                for try await c in try await db.query(
                    """
                    SELECT count(*)::int FROM subscription.subscription_events e JOIN subscription.subscriptions s ON s.id = e.subscription_id
                    WHERE s.store_original_transaction_id = \(original) AND e.event_type = \(event)
                    """
                ).decode(Int.self) { n = c }
                return n
            }
            XCTAssertEqual(events, 1, event)
        }
        let toldFree = try await withPostgres(TestEnvironment.adminClient(database: database)) { db -> Int in
            var n = 0
            for try await c in try await db.query(
                """
                SELECT count(*)::int FROM subscription.outbox o JOIN subscription.subscriptions s ON o.path = '/internal/users/' || s.user_id || '/status?app_id=' || s.app_id
                WHERE s.store_original_transaction_id = \(original) AND o.body->>'status' = 'free'
                """
            ).decode(Int.self) { n = c }
            return n
        }
        XCTAssertEqual(toldFree, 1, "auth is told of the refund once")
    }
}

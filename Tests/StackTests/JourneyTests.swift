import Crypto
import Foundation
import PostgresNIO
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// The app's journey through the gateway, against the four binaries `make test` started:
/// guest → email upgrade (the verification mail opened from the mail folder) → second device →
/// plans → a StoreKit 2 purchase (signed with the stack's local chain, Apple's "Xcode"
/// environment) → premium everywhere → offline play and sync, a conflict merged → a place nearby → ad consent →
/// back to free when the period ends → a rewarded ad, a campaign, an unlock with credits → the
/// revenue report → a privacy export from all four services → deletion scheduled, cancelled,
/// scheduled again and executed when due → every service has forgotten the user.
final class JourneyTests: XCTestCase {
    let http = CurlHTTPClient()
    let gateway = TestEnvironment.gatewayURL
    deinit { http.shutdown() }

    func demo() throws -> [String: String] { try DemoApp.values() }

    @discardableResult
    func call(_ method: String, _ path: String, _ headers: [(String, String)], _ json: String? = nil, expect: Int? = nil,
              file: StaticString = #filePath, line: UInt = #line) async throws -> [String: JSONValue] {
        let r = try await http.send(HTTPRequest(method: method, url: path.hasPrefix("http") ? path : gateway + path, headers: headers,
                                                body: json.map { Data($0.utf8) }, timeout: .seconds(30)))
        if let expect { XCTAssertEqual(r.status, expect, "\(method) \(path): \(String(decoding: r.body.prefix(400), as: UTF8.self))", file: file, line: line) }
        return (try? JSONDecoder().decode([String: JSONValue].self, from: r.body)) ?? [:]
    }

    func eventually(_ what: String, seconds: Double, _ check: () async throws -> Bool) async throws {
        let deadline = Date() + seconds
        while Date() < deadline {
            if try await check() { return }
            try await Task.sleep(for: .milliseconds(seconds <= 2 ? 50 : 500))
        }
        XCTFail("not within \(seconds) s: \(what)")
    }

    /// A StoreKit 2 signed transaction from the local chain, for a new original transaction.
    func signedTransaction(product: String, expires: Date) throws -> String {
        let id = "2000\(Int.random(in: 100_000_000...999_999_999))"
        return try LocalStoreKit().transaction(id: id, original: id, product: product, expires: expires)
    }

    func testTheWholeJourney() async throws {
        let demo = try demo()
        let tenant = [("X-App-ID", demo["APP_ID"]!), ("X-API-Key", demo["API_KEY"]!), ("Content-Type", "application/json")]
        let admin = [("X-App-ID", demo["APP_ID"]!), ("X-API-Key", demo["API_KEY"]!), ("Content-Type", "application/json"),
                     ("Authorization", "Bearer local-admin-token")]

        // Guest, then upgraded by email: the guest keeps its id.
        let guest = try await call("POST", "/auth/v1/auth/register", tenant, #"{"provider":"guest","credentials":{"device_id":"journey-\#(UUID())"}}"#, expect: 201)
        guard case .object(let tokens)? = guest["tokens"], case .string(let guestToken)? = tokens["access_token"],
              case .object(let guestUser)? = guest["user"], case .string(let userID)? = guestUser["id"] else { return XCTFail("no guest") }
        var user = tenant + [("Authorization", "Bearer \(guestToken)")]
        let email = "journey-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let password = "Tr1cky-Geography-42!"
        let linked = try await call("POST", "/auth/v1/auth/link", user, #"{"provider":"email","credentials":{"email":"\#(email)","password":"\#(password)"}}"#, expect: 200)
        guard case .object(let linkedUser)? = linked["user"] else { return XCTFail("no link") }
        XCTAssertEqual(linkedUser["id"], .string(userID))
        var verifyToken: String?
        try await eventually("the verification email", seconds: 15) {
            let mails = (try? FileManager.default.contentsOfDirectory(atPath: ".data/mail")) ?? []
            for m in mails where m.hasSuffix(".eml") {
                let text = try String(contentsOfFile: ".data/mail/" + m, encoding: .utf8).replacingOccurrences(of: "=\r\n", with: "").replacingOccurrences(of: "=\n", with: "").replacingOccurrences(of: "=3D", with: "=")
                guard text.contains(email), let r = text.range(of: "token=") else { continue }
                verifyToken = String(text[r.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
                return true
            }
            return false
        }
        try await call("POST", "/auth/v1/auth/verify-email", tenant, #"{"token":"\#(verifyToken ?? "")"}"#, expect: 200)

        // A second device signs in with the email.
        let second = try await call("POST", "/auth/v1/auth/login", tenant,
                                    #"{"provider":"email","credentials":{"email":"\#(email)","password":"\#(password)"},"device_info":{"device_id":"journey-tablet","platform":"android"}}"#, expect: 200)
        guard case .object(let t2)? = second["tokens"], case .string(let token2)? = t2["access_token"] else { return XCTFail("no second device") }
        user = tenant + [("Authorization", "Bearer \(token2)")]

        // Plans, then a StoreKit 2 purchase that ends in two minutes.
        let plans = try await call("GET", "/subscription/v1/plans", user, expect: 200)
        guard case .array(let planList)? = plans["plans"] else { return XCTFail("no plans") }
        XCTAssertEqual(planList.count, 2)
        let periodEnd = Date() + 120
        try await call("POST", "/subscription/v1/subscriptions/purchase", user,
                       #"{"store":"apple","signed_transaction":"\#(try signedTransaction(product: "com.quiz.premium.monthly", expires: periodEnd))"}"#, expect: 201)
        let me = try await call("GET", "/subscription/v1/subscriptions/me", user, expect: 200)
        XCTAssertEqual(me["is_premium"], .bool(true))
        // Premium everywhere within a second (subscription's outbox tells ads and offline at
        // commit): no ads, offline limits lifted, auth knows.
        let told = Date()
        try await eventually("ads and offline see the premium entitlement", seconds: 1) {
            let ads = try await call("GET", "/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits", user, expect: 200)
            let profile = try await call("GET", "/offline/v1/sync/profile", user, expect: 200)
            guard case .object(let limits)? = profile["limits"] else { return false }
            return ads["reason"] == .string("premium_user") && limits["tier"] == .string("premium")
        }
        print("journey: premium seen by ads and offline \(Int(Date().timeIntervalSince(told) * 1000)) ms after the purchase answered")
        try await eventually("auth sees the premium status", seconds: 15) {
            let m = try await call("GET", "/auth/v1/auth/me", user)
            if case .object(let u)? = m["user"] { return u["status"] == .string("premium") }
            return false
        }

        // Offline: three categories, answers queued and synced.
        let job = try await call("POST", "/offline/v1/categories/download", user, #"{"category_ids":["capitals-europe","flags-europe","flags-asia"]}"#, expect: 202)
        guard case .string(let jobID)? = job["job_id"] else { return XCTFail("no download job") }
        try await eventually("the download", seconds: 30) {
            try await call("GET", "/offline/v1/categories/download/\(jobID)", user)["status"] == .string("completed")
        }
        for i in 1...3 {
            try await call("POST", "/offline/v1/sync/queue", user, """
                {"client_action_id":"journey-\(userID)-\(i)","action_type":"answer_submit","entity_type":"quiz_completion","entity_id":"quiz_\(i)",
                 "category_id":"capitals-europe","payload":{"quiz_id":"quiz_\(i)","score":\(5 + i)}}
                """, expect: 201)
        }
        let sync = try await call("POST", "/offline/v1/sync/execute", user, expect: 202)
        guard case .string(let syncID)? = sync["job_id"] else { return XCTFail("no sync job") }
        try await eventually("the sync", seconds: 30) {
            let s = try await call("GET", "/offline/v1/sync/execute/\(syncID)", user)
            return s["status"] == .string("completed") && s["succeeded"] == .int(3)
        }
        // Both devices saved progress offline on the same version: the game server takes the
        // first and refuses the second (409): a conflict, which the player resolves by merging.
        try await call("PATCH", "/offline/v1/sync/profile", user, #"{"conflict_strategy":"manual"}"#, expect: 200)
        for (i, save) in [(level: 3, stars: 9), (level: 5, stars: 2)].enumerated() {
            try await call("POST", "/offline/v1/sync/queue", user, """
                {"client_action_id":"journey-\(userID)-progress-\(i)","action_type":"progress_save","entity_type":"progress","entity_id":"capitals-europe",
                 "payload":{"based_on_version":0,"level":\(save.level),"stars":\(save.stars)}}
                """, expect: 201)
        }
        let conflictSync = try await call("POST", "/offline/v1/sync/execute", user, expect: 202)
        guard case .string(let secondID)? = conflictSync["job_id"] else { return XCTFail("no sync job") }
        try await eventually("the sync with a conflict", seconds: 30) {
            let s = try await call("GET", "/offline/v1/sync/execute/\(secondID)", user)
            return s["status"] == .string("completed") && s["succeeded"] == .int(1) && s["conflicts"] == .int(1)
        }
        let conflicts = try await call("GET", "/offline/v1/sync/conflicts", user, expect: 200)
        guard case .array(let open)? = conflicts["conflicts"], open.count == 1, case .object(let conflict)? = open.first,
              case .string(let conflictID)? = conflict["id"] else { return XCTFail("one conflict expected: \(conflicts)") }
        if case .object(let server)? = conflict["server_data"] { XCTAssertEqual(server["level"], .int(3)) } else { XCTFail("no server data") }
        if case .object(let local)? = conflict["local_data"] { XCTAssertEqual(local["level"], .int(5)) } else { XCTFail("no local data") }
        let merged = try await call("POST", "/offline/v1/sync/conflicts/\(conflictID)/resolve", user,
                                    #"{"resolution":"merge","merge_data":{"level":"local","stars":"server"}}"#, expect: 200)
        XCTAssertEqual(merged["resolved"], .bool(true))
        if case .object(let final)? = merged["final_data"] {
            XCTAssertEqual(final["level"], .int(5))
            XCTAssertEqual(final["stars"], .int(9))
        } else { XCTFail("no merged data: \(merged)") }

        // A place nearby, once geolocation is allowed.
        try await call("PATCH", "/auth/v1/auth/privacy", user, #"{"consent_geolocation":true,"consent_personalized_ads":true}"#, expect: 200)
        try await call("POST", "/offline/v1/location/update", user, #"{"latitude":41.9028,"longitude":12.4964,"accuracy":12,"consent_given":true}"#, expect: 201)
        let nearby = try await call("GET", "/offline/v1/location/nearby-content?radius_km=20", user, expect: 200)
        if case .array(let places)? = nearby["content"], case .object(let first)? = places.first {
            XCTAssertEqual(first["id"], .string("around-it"))
        } else { XCTFail("nothing near Rome") }

        // Ad consent; the campaign the admin starts; the period ends: back to free.
        try await call("POST", "/ads/v1/ads/consent", user, #"{"consent_personalized_ads":true,"consent_data_sharing":true,"age_gate_passed":true,"is_under_age":false,"country":"IT"}"#, expect: 200)
        let campaign = try await call("POST", "/ads/v1/admin/campaigns", admin, """
            {"name":"Journey week","description":"Watch 1 ad, get 5 credits","campaign_type":"watch_ads","reward":{"type":"credits","amount":5},
             "conditions":{"min_ads_watched":1},"ends_at":"\(JSON.iso8601(Date() + 86400))"}
            """, expect: 201)
        guard case .string(let campaignID)? = campaign["id"] else { return XCTFail("no campaign") }
        try await eventually("the subscription period to end and ads to come back", seconds: 240) {
            guard Date() > periodEnd else { return false }
            let m = try await call("GET", "/subscription/v1/subscriptions/me", user)
            let a = try await call("GET", "/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits", user)
            return m["is_premium"] == .bool(false) && a["available"] == .bool(true)
        }

        // A rewarded ad earns a credit; the campaign pays 5; 3 unlock the freemium flags.
        let request = try await call("POST", "/ads/v1/ads/request", user, #"{"ad_type":"rewarded","placement":"earn_credits"}"#, expect: 201)
        guard case .string(let adID)? = request["ad_request_id"] else { return XCTFail("no ad") }
        try await Task.sleep(for: .seconds(20))
        _ = try await call("POST", "/ads/v1/ads/\(adID)/impression", user, #"{"loaded":true,"shown":true,"load_time_ms":900}"#, expect: 200)
        let done = try await call("POST", "/ads/v1/ads/\(adID)/complete", user, #"{"completed":true,"clicked":true,"display_duration_ms":24500,"revenue_usd":0.021}"#, expect: 200)
        XCTAssertEqual(done["new_balance"], .int(1))
        let claim = try await call("POST", "/ads/v1/campaigns/\(campaignID)/claim-reward", user, expect: 200)
        XCTAssertEqual(claim["new_balance"], .int(6))
        let unlock = try await call("POST", "/subscription/v1/content/flags-asia/unlock", user, expect: 200)
        XCTAssertEqual(unlock["balance"], .int(3))

        // The operator's revenue report and its CSV.
        try await call("POST", "/ads/v1/analytics/refresh", admin, expect: 200)
        let report = try await call("GET", "/ads/v1/analytics/revenue", admin, expect: 200)
        if case .int(let n)? = report["total_impressions"] { XCTAssertGreaterThanOrEqual(n, 1) } else { XCTFail("no impressions") }
        let csv = try await http.send(HTTPRequest(url: gateway + "/ads/v1/analytics/revenue?format=csv", headers: admin))
        XCTAssertTrue(String(decoding: csv.body, as: UTF8.self).hasPrefix("date,ad_type,provider,placement"))

        // The privacy export holds data from all four services.
        let export = try await call("POST", "/auth/v1/auth/privacy/export", user, expect: 202)
        guard case .string(let exportID)? = export["export_id"] else { return XCTFail("no export") }
        var url: String?
        try await eventually("the export", seconds: 30) {
            let s = try await call("GET", "/auth/v1/auth/privacy/export/\(exportID)", user)
            if case .string(let u)? = s["download_url"] { url = u; return true }
            return false
        }
        // The link is relative to the API's public base (the gateway here).
        let link = try XCTUnwrap(url)
        let document = try await http.send(HTTPRequest(url: link.hasPrefix("http") ? link : gateway + link))
        let text = String(decoding: document.body, as: UTF8.self)
        for needle in ["\"subscription\"", "\"offline\"", "\"ads\"", "capitals-europe", "41.9028", "earn_credits", "com.quiz.premium.monthly"] {
            XCTAssertTrue(text.contains(needle), "the export mentions \(needle)")
        }

        // Deletion: scheduled, cancelled, scheduled again, executed when due.
        let scheduled = try await call("DELETE", "/auth/v1/auth/me", user, expect: 202)
        guard case .string(let cancelToken)? = scheduled["cancellation_token"] else { return XCTFail("no cancellation token") }
        try await call("POST", "/auth/v1/auth/deletion/cancel", tenant, #"{"token":"\#(cancelToken)"}"#, expect: 200)
        try await call("DELETE", "/auth/v1/auth/me", user, expect: 202)
        // Thirty days pass: the deletion and its job fall due.
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.stackDatabase)) { db in
            try await db.query("""
                UPDATE auth.deletions SET scheduled_for = now() - interval '1 second' WHERE user_id = \(UUID(uuidString: userID)!) AND status = 'scheduled'
                """, logger: TestEnvironment.logger)
            try await db.query("UPDATE auth.jobs SET run_at = now() WHERE kind = 'execute_deletion' AND status = 'pending'", logger: TestEnvironment.logger)
        }
        let internalHeaders = [("Authorization", "Bearer local-internal-auth"), ("X-Service-Name", "auth")]
        let appID = demo["APP_ID"]!.lowercased()
        try await eventually("every service to forget the user", seconds: 60) {
            for port in [3002, 3003, 3004] {
                let r = try await http.send(HTTPRequest(url: "http://127.0.0.1:\(port)/internal/users/\(userID)/export?app_id=\(appID)", headers: internalHeaders))
                guard let doc = try? r.decode(UserDataExport.self) else { return false }
                for (_, section) in doc.sections { if case .array(let rows) = section, !rows.isEmpty { return false } }
            }
            return true
        }
        let gone = try await http.send(HTTPRequest(url: gateway + "/auth/v1/auth/me", headers: user))
        XCTAssertTrue((400..<500).contains(gone.status), "auth forgot the user: \(gone.status)")
    }
}

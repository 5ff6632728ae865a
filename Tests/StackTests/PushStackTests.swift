import Foundation
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// #30 in the running stack, through the gateway: a reward that lands after subscription was
/// away reaches the APNs stand-in (HTTP/2 over TLS, verifying the demo app's ES256 key) exactly
/// once, in the language the device registered.
final class PushStackTests: XCTestCase {
    let http = DocumentedHTTPClient()
    let gateway = TestEnvironment.gatewayURL
    deinit { http.shutdown() }

    var standIn: String {
        get throws {
            let env = try String(contentsOfFile: ".data/push/push.env", encoding: .utf8)
            let line = try XCTUnwrap(env.split(separator: "\n").first { $0.hasPrefix("PUSH_STANDIN_URL=") })
            return String(line.dropFirst("PUSH_STANDIN_URL=".count))
        }
    }

    func call(_ method: String, _ path: String, _ headers: [(String, String)], _ json: String? = nil) async throws -> (Int, [String: JSONValue]) {
        let r = try await http.send(
            HTTPRequest(method: method, url: gateway + path, headers: headers, body: json.map { Data($0.utf8) }, timeout: .seconds(30))
        )
        return (r.status, (try? JSONDecoder().decode([String: JSONValue].self, from: r.body)) ?? [:])
    }

    func received(_ token: String) async throws -> [String] {
        let r = try await http.send(HTTPRequest(url: try standIn + "/_standin/received"))
        struct R: Decodable {
            var token: String
            var payload: String
        }
        return try JSONDecoder().decode([R].self, from: r.body).filter { $0.token == token }.map(\.payload)
    }

    func testARewardThatLandsAfterSubscriptionWasAwayIsPushedOnceInTheUsersLanguage() async throws {
        let t = try DemoApp.tenantHeaders()
        let email = "push-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        // Signed up at auth directly, as its own client address (sign-ups are limited per address).
        let signUp = try await http.send(
            HTTPRequest(
                method: "POST",
                url: "http://127.0.0.1:3001/auth/v1/auth/register",
                headers: t + [("X-Forwarded-For", "10.77.\(Int.random(in: 0...250)).\(Int.random(in: 1...250))")],
                body: Data(#"{"provider":"email","credentials":{"email":"\#(email)","password":"Tr1cky-Geography-42!"}}"#.utf8)
            )
        )
        XCTAssertEqual(signUp.status, 201)
        struct Tokens: Decodable {
            struct T: Decodable { var access_token: String }
            var tokens: T
        }
        let user = t + [("Authorization", "Bearer \(try signUp.decode(Tokens.self).tokens.access_token)")]
        let (consent, _) = try await call("PATCH", "/auth/v1/auth/privacy", user, #"{"consent_notifications":true}"#)
        XCTAssertEqual(consent, 200)
        let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let (registered, _) = try await call(
            "PUT",
            "/auth/v1/auth/push-tokens",
            user,
            #"{"device_id":"iphone-1","platform":"ios","token":"\#(token)","environment":"sandbox","locale":"en"}"#
        )
        XCTAssertEqual(registered, 200)

        let (adsConsent, _) = try await call(
            "POST",
            "/ads/v1/ads/consent",
            user,
            #"{"consent_personalized_ads":true,"consent_data_sharing":false,"age_gate_passed":true,"is_under_age":false,"country":"FR"}"#
        )
        XCTAssertEqual(adsConsent, 200)
        let (status, request) = try await call("POST", "/ads/v1/ads/request", user, #"{"ad_type":"rewarded","placement":"earn_credits"}"#)
        XCTAssertEqual(status, 201)
        guard case .string(let id)? = request["ad_request_id"] else { return XCTFail("no ad request id") }
        try await Task.sleep(for: .seconds(20))
        let (shown, _) = try await call("POST", "/ads/v1/ads/\(id)/impression", user, #"{"loaded":true,"shown":true}"#)
        XCTAssertEqual(shown, 200)

        // Subscription stops answering (paused): the reward is pending, and nothing is pushed yet.
        let pid = try XCTUnwrap(
            Int32(String(contentsOfFile: ".data/run/subscription.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
        )
        kill(pid, SIGSTOP)
        let completion: [String: JSONValue]
        do {
            let (done, body) = try await call(
                "POST",
                "/ads/v1/ads/\(id)/complete",
                user,
                #"{"completed":true,"clicked":false,"display_duration_ms":24500}"#
            )
            kill(pid, SIGCONT)
            XCTAssertEqual(done, 200)
            completion = body
        } catch {
            kill(pid, SIGCONT)
            throw error
        }
        XCTAssertEqual(completion["reward_status"], .string("pending"), "\(completion)")
        let before = try await received(token)
        XCTAssertEqual(before.count, 0)

        // It lands: one push, in English, however the outbox delivered the credit.
        let deadline = Date() + 30
        var got: [String] = []
        while Date() < deadline, got.isEmpty {
            try await Task.sleep(for: .milliseconds(250))
            got = try await received(token)
        }
        XCTAssertEqual(got.count, 1)
        XCTAssertTrue(got.first?.contains("+1 credits added to your balance") ?? false, got.first ?? "nothing arrived")
        try await Task.sleep(for: .seconds(3))
        let after = try await received(token)
        XCTAssertEqual(after.count, 1, "exactly once")
        let (_, balance) = try await call("GET", "/subscription/v1/credits/balance", user)
        XCTAssertEqual(balance["balance"], .int(1))
    }

    /// The operator's sends through the gateway: a withdrawn consent sends nothing, a 410 removes
    /// the token and the next send skips it, Android goes through FCM, and one key is one push.
    func testConsentDeadTokensAndAndroidThroughTheGateway() async throws {
        let t = try DemoApp.tenantHeaders()
        let admin = t + [("Authorization", "Bearer local-admin-token"), ("Content-Type", "application/json")]
        func player(platform: String, consent: Bool) async throws -> (id: String, token: String, headers: [(String, String)]) {
            let email = "push-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let r = try await http.send(
                HTTPRequest(
                    method: "POST",
                    url: "http://127.0.0.1:3001/auth/v1/auth/register",
                    headers: t + [("X-Forwarded-For", "10.78.\(Int.random(in: 0...250)).\(Int.random(in: 1...250))")],
                    body: Data(#"{"provider":"email","credentials":{"email":"\#(email)","password":"Tr1cky-Geography-42!"}}"#.utf8)
                )
            )
            XCTAssertEqual(r.status, 201)
            struct Body: Decodable {
                struct T: Decodable { var access_token: String }
                struct U: Decodable { var id: String }
                var tokens: T
                var user: U
            }
            let b = try r.decode(Body.self)
            let user = t + [("Authorization", "Bearer \(b.tokens.access_token)")]
            let (c, _) = try await call("PATCH", "/auth/v1/auth/privacy", user, #"{"consent_notifications":\#(consent)}"#)
            XCTAssertEqual(c, 200)
            let token =
                platform == "ios"
                ? (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
                : "fcm:" + String(repeating: "A", count: 120) + UUID().uuidString.replacingOccurrences(of: "-", with: "")
            let (put, _) = try await call(
                "PUT",
                "/auth/v1/auth/push-tokens",
                user,
                #"{"device_id":"d1","platform":"\#(platform)","token":"\#(token)","locale":"fr"}"#
            )
            XCTAssertEqual(put, 200)
            return (b.user.id, token, user)
        }
        func send(_ user: String, key: String) async throws -> [String: JSONValue] {
            let (status, body) = try await call(
                "POST",
                "/auth/v1/admin/push/send",
                admin,
                #"{"user_id":"\#(user)","title":"Bonjour","body":"Un message","key":"\#(key)"}"#
            )
            XCTAssertEqual(status, 200, "\(body)")
            guard case .array(let results)? = body["results"], case .object(let first)? = results.first else { return [:] }
            return first
        }
        let silent = try await player(platform: "ios", consent: false)
        let outcome = try await send(silent.id, key: "stack-\(UUID())")
        XCTAssertEqual(outcome["outcome"], .string("skipped_consent"))
        let nothing = try await received(silent.token)
        XCTAssertEqual(nothing.count, 0, "a withdrawn consent sends nothing")

        let gone = try await player(platform: "ios", consent: true)
        _ = try await http.send(HTTPRequest(method: "POST", url: try standIn + "/_standin/tokens/\(gone.token)/unregistered"))
        let removed = try await send(gone.id, key: "stack-\(UUID())")
        XCTAssertEqual(removed["outcome"], .string("removed_token"))
        XCTAssertEqual(removed["status_code"], .int(410))
        let (_, devices) = try await call("GET", "/auth/v1/auth/push-tokens", gone.headers)
        XCTAssertEqual(devices["devices"], .array([]), "the dead token is gone")
        let skipped = try await send(gone.id, key: "stack-\(UUID())")
        XCTAssertEqual(skipped["outcome"], .string("no_device"), "and the next send skips it")

        let android = try await player(platform: "android", consent: true)
        let key = "stack-\(UUID())"
        let sent = try await send(android.id, key: key)
        XCTAssertEqual(sent["provider"], .string("fcm"))
        XCTAssertEqual(sent["outcome"], .string("sent"))
        _ = try await send(android.id, key: key)
        let got = try await received(android.token)
        XCTAssertEqual(got.count, 1, "one key, one push")
        XCTAssertTrue(got.first?.contains("Un message") ?? false, got.first ?? "")
    }
}

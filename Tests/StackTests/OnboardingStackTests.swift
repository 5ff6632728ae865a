import Foundation
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// #16: a second app onboarded on the running stack, as its operator would, with no restart:
/// the app and its operator key from the CLI (the platform owner's step), then its emails, store
/// credentials, game-server upstream and ad provider through the gateway's admin routes with
/// that key; its users get its sender, its store and its provider at once. One app's operator
/// key neither reads nor changes the other app at any service.
final class OnboardingStackTests: XCTestCase {
    let http = DocumentedHTTPClient()
    let gateway = TestEnvironment.gatewayURL
    /// Sign-ups go to auth directly, each from its own client address: they are limited per
    /// address, and through the gateway every test shares one.
    static let auth = "http://127.0.0.1:3001"
    deinit { http.shutdown() }

    /// An operator command on the stack's database; its `KEY=value` lines.
    func command(_ binary: String, _ args: [String]) throws -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["DATABASE_NAME"] = TestEnvironment.stackDatabase
        env["LOG_LEVEL"] = "error"
        let r = try runServiceBinary(binary, args, environment: env)
        XCTAssertEqual(r.status, 0, "\(binary) \(args.joined(separator: " ")): \(r.err)")
        var out: [String: String] = [:]
        for line in r.out.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { out[String(kv[0])] = String(kv[1]) }
        }
        return out
    }

    /// Through the gateway, or (`base`) a service directly.
    func call(
        _ method: String,
        _ path: String,
        app: String,
        apiKey: String,
        bearer: String?,
        _ json: String? = nil,
        extra: [(String, String)] = [],
        base: String? = nil
    ) async throws -> (Int, String) {
        var headers = [("X-App-ID", app), ("X-API-Key", apiKey), ("Content-Type", "application/json")] + extra
        if let bearer { headers.append(("Authorization", "Bearer \(bearer)")) }
        let r = try await http.send(HTTPRequest(method: method, url: (base ?? gateway) + path, headers: headers, body: json.map { Data($0.utf8) }))
        return (r.status, String(decoding: r.body, as: UTF8.self))
    }

    func testASecondAppIsOnboardedThroughTheAdminAPIWithoutARestart() async throws {
        let demo = try DemoApp.values()
        let (appA, keyA) = (demo["APP_ID"] ?? "", demo["API_KEY"] ?? "")
        let created = try command("auth-service", ["admin", "apps", "create", "--name", "Capitals Quiz", "--env"])
        let appB = try XCTUnwrap(created["APP_ID"])
        let keyB = try XCTUnwrap(created["API_KEY"])
        let opB = try XCTUnwrap(
            try command("auth-service", ["admin", "operator-keys", "create", "--app-id", appB, "--name", "Capitals ops", "--env"])["OPERATOR_KEY"]
        )
        let opA = try XCTUnwrap(
            try command("auth-service", ["admin", "operator-keys", "create", "--app-id", appA, "--name", "Quiz ops", "--env"])["OPERATOR_KEY"]
        )
        _ = try command("subscription-service", ["admin", "plans", "seed-defaults", "--app-id", appB])

        let root = try String(contentsOfFile: ".data/storekit/root.der.b64", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let bundle = "com.capitals.quiz.\(UUID().uuidString.prefix(6).lowercased())"
        let settings: [(String, String, String)] = [
            (
                "PUT", "/auth/v1/admin/email-settings",
                """
                {"app_name":"Capitals Quiz","mail_from":"Capitals Quiz <hello@capitals.example>","support_email":"help@capitals.example",
                 "link_base_url":"https://capitals.example/app","default_locale":"en"}
                """
            ),
            (
                "PUT", "/subscription/v1/admin/stores/apple",
                """
                {"bundle_id":"\(bundle)","environment":"Sandbox","root_certificates_der_base64":["\(root)"],"allow_local_environments":true,"shared_secret":"capitals"}
                """
            ),
            ("PUT", "/offline/v1/admin/sync-upstream", #"{"routes":{"*":"https://game.capitals.example/sync"}}"#),
            ("PUT", "/ads/v1/admin/providers/capitals_net", #"{"priority":1,"rewarded_unit_id":"capitals/rewarded","test_mode":true}"#),
        ]
        // App A's operator can neither change nor read app B, at any service (B's own tenant headers).
        for (method, path, body) in settings {
            let (refused, text) = try await call(method, path, app: appB, apiKey: keyB, bearer: opA, body)
            XCTAssertEqual(refused, 401, "\(path) with app A's operator key: \(text)")
            let readPath =
                ["/ads": "/ads/v1/analytics/revenue", "/subscription": "/subscription/v1/admin/stores"]
                .first { path.hasPrefix($0.key) }?.value ?? path
            let (read, _) = try await call("GET", readPath, app: appB, apiKey: keyB, bearer: opA)
            XCTAssertEqual(read, 401, "reading \(path) of app B with app A's key")
        }
        for (method, path, body) in settings {
            let (status, text) = try await call(method, path, app: appB, apiKey: keyB, bearer: opB, body)
            XCTAssertEqual(status, 200, "\(path): \(text)")
        }
        // B's key on A's routes: refused as well.
        let (cross, _) = try await call("GET", "/auth/v1/admin/email-settings", app: appA, apiKey: keyA, bearer: opB)
        XCTAssertEqual(cross, 401)

        // B's users, at once: B's sender and language, B's store, B's provider, B's upstream.
        let email = "capitals-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let before = Set((try? FileManager.default.contentsOfDirectory(atPath: ".data/mail")) ?? [])
        let (registered, body) = try await call(
            "POST",
            "/auth/v1/auth/register",
            app: appB,
            apiKey: keyB,
            bearer: nil,
            """
            {"provider":"email","credentials":{"email":"\(email)","password":"Tr1cky-Geography-42"},"device_info":{"device_id":"capitals-1"}}
            """,
            extra: [("X-Forwarded-For", "10.77.\(Int.random(in: 0...250)).\(Int.random(in: 1...250))")],
            base: Self.auth
        )
        XCTAssertEqual(registered, 201, body)
        var mail = ""
        let end = ContinuousClock.now + .seconds(5)
        while mail.isEmpty, ContinuousClock.now < end {
            for file in Set((try? FileManager.default.contentsOfDirectory(atPath: ".data/mail")) ?? []).subtracting(before) {
                let text = (try? String(contentsOfFile: ".data/mail/\(file)", encoding: .utf8)) ?? ""
                if text.contains(email) { mail = text }
            }
            if mail.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        }
        XCTAssertTrue(mail.contains("hello@capitals.example"), "B's sender: \(mail.prefix(400))")
        XCTAssertTrue(mail.contains("https://capitals.example/app/verify-email?token="), "B's links")
        XCTAssertTrue(mail.contains("Verify your email"), "B's default language")
        struct Auth: Decodable {
            struct T: Decodable { var access_token: String }
            var tokens: T
        }
        let token = try JSONDecoder().decode(Auth.self, from: Data(body.utf8)).tokens.access_token

        let tx = try LocalStoreKit().transaction(
            id: "cap-\(UUID().uuidString.prefix(12))",
            original: "cap-\(UUID().uuidString.prefix(12))",
            product: "com.quiz.premium.monthly",
            expires: Date() + 30 * 86400,
            bundle: bundle
        )
        let (bought, boughtBody) = try await call(
            "POST",
            "/subscription/v1/subscriptions/purchase",
            app: appB,
            apiKey: keyB,
            bearer: token,
            #"{"store":"apple","signed_transaction":"\#(tx)"}"#
        )
        XCTAssertEqual(bought, 201, "B's store settings verify B's purchase: \(boughtBody)")

        // Support for B's user: credits granted with a reason, then the customer timeline from the
        // four services (auth assembles it); app A's operator sees none of it.
        struct Me: Decodable {
            struct U: Decodable { var id: UUID }
            var user: U
        }
        let userID = try JSONDecoder().decode(Me.self, from: Data(body.utf8)).user.id
        let (granted, grantedBody) = try await call(
            "POST",
            "/subscription/v1/admin/users/\(userID)/credits",
            app: appB,
            apiKey: keyB,
            bearer: opB,
            #"{"amount":3,"reason":"Welcome gift from support"}"#,
            extra: [("Idempotency-Key", "ticket-\(UUID())")]
        )
        XCTAssertEqual(granted, 201, grantedBody)
        let (timelineStatus, timeline) = try await call("GET", "/auth/v1/admin/users/\(userID)/timeline", app: appB, apiKey: keyB, bearer: opB)
        XCTAssertEqual(timelineStatus, 200, timeline)
        for needle in [#""incomplete":[]"#, "auth.register", "subscription.", "credits.support", "Welcome gift from support"] {
            XCTAssertTrue(timeline.contains(needle), "\(needle) in \(timeline.prefix(600))")
        }
        let (foreign, _) = try await call("GET", "/auth/v1/admin/users/\(userID)/timeline", app: appB, apiKey: keyB, bearer: opA)
        XCTAssertEqual(foreign, 401)
        let (otherTenant, _) = try await call("GET", "/auth/v1/admin/users/\(userID)", app: appA, apiKey: keyA, bearer: opA)
        XCTAssertEqual(otherTenant, 404, "app A's operator does not find app B's user")

        let (shown, upstream) = try await call("GET", "/offline/v1/admin/sync-upstream", app: appB, apiKey: keyB, bearer: opB)
        XCTAssertEqual(shown, 200)
        XCTAssertTrue(upstream.contains("https://game.capitals.example/sync") && upstream.contains(#""is_default":false"#), upstream)
        // App A's upstream is still the deployment's.
        let (shownA, upstreamA) = try await call("GET", "/offline/v1/admin/sync-upstream", app: appA, apiKey: keyA, bearer: opA)
        XCTAssertEqual(shownA, 200)
        XCTAssertTrue(upstreamA.contains(#""is_default":true"#), upstreamA)

        // The ad provider: a premium user gets no ads, so ask with a fresh guest of B.
        let (guest, guestBody) = try await call(
            "POST",
            "/auth/v1/auth/register",
            app: appB,
            apiKey: keyB,
            bearer: nil,
            #"{"provider":"guest","credentials":{"device_id":"capitals-guest-\#(UUID())"}}"#,
            extra: [("X-Forwarded-For", "10.78.\(Int.random(in: 0...250)).\(Int.random(in: 1...250))")],
            base: Self.auth
        )
        XCTAssertEqual(guest, 201, guestBody)
        let guestToken = try JSONDecoder().decode(Auth.self, from: Data(guestBody.utf8)).tokens.access_token
        let (consent, consentBody) = try await call(
            "POST",
            "/ads/v1/ads/consent",
            app: appB,
            apiKey: keyB,
            bearer: guestToken,
            #"{"consent_personalized_ads":true,"age_gate_passed":true,"is_under_age":false,"country":"FR"}"#
        )
        XCTAssertEqual(consent, 200, consentBody)
        let (ad, adBody) = try await call(
            "POST",
            "/ads/v1/ads/request",
            app: appB,
            apiKey: keyB,
            bearer: guestToken,
            #"{"ad_type":"rewarded","placement":"earn_credits"}"#
        )
        XCTAssertEqual(ad, 201, adBody)
        XCTAssertTrue(adBody.contains("capitals/rewarded"), "B's provider unit: \(adBody)")
    }
}

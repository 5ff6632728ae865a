import AuthDomain
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PushStandIn
import ServiceKit
import ServiceLifecycle
import TestSupport
import WireTypes
import XCTest
import _CryptoExtras

@testable import AuthMessaging
@testable import AuthService

/// #30 the decisions of the messenger, without a database: each alternate flow is a row.
final class PushRulesTests: XCTestCase {
    func testDecisionTable() {
        let o = PushOptions()
        var lax = PushOptions()
        lax.requireOptIn = false
        lax.silentWithoutConsent = true
        let rows: [(String, PushKind, [String: String], Bool?, PushOptions, Int, PushLocale?, PushDecision)] = [
            (
                "consented, French", .creditAdded, ["amount": "5"], true, o, 0, .fr,
                .alert(.init(title: "Crédits ajoutés", body: "+5 crédits ajoutés à votre solde"))
            ),
            (
                "consented, English", .creditAdded, ["amount": "5"], true, o, 0, .en,
                .alert(.init(title: "Credits added", body: "+5 credits added to your balance"))
            ),
            (
                "no device locale: the app's default", .creditAdded, ["amount": "2"], true, o, 0, nil,
                .alert(.init(title: "Crédits ajoutés", body: "+2 crédits ajoutés à votre solde"))
            ),
            ("withdrawn", .creditAdded, [:], false, o, 0, .fr, .skip(outcome: "skipped_consent")),
            ("never answered, opt-in required", .creditAdded, [:], nil, o, 0, .fr, .skip(outcome: "skipped_consent")),
            (
                "never answered, opt-in not required", .contentUpdate, ["changes": "4", "category": "Europe"], nil, lax, 0, .en,
                .alert(.init(title: "New content", body: "4 updates in Europe"))
            ),
            ("daily cap reached", .creditAdded, [:], true, o, 5, .fr, .skip(outcome: "skipped_limit")),
            (
                "operator messages are not capped", .operatorMessage, ["title": "Hi", "body": "There"], true, o, 9, .fr,
                .alert(.init(title: "Hi", body: "There"))
            ),
            ("fewer than 3 changes: silent sync", .contentUpdate, ["changes": "2"], true, o, 0, .fr, .silent),
            ("silent without consent refused by default", .contentUpdate, ["changes": "1"], false, o, 0, .fr, .skip(outcome: "skipped_consent")),
            ("silent without consent when the app allows it", .contentUpdate, ["changes": "1"], false, lax, 0, .fr, .silent),
        ]
        for (name, kind, data, consent, options, sent, locale, expected) in rows {
            XCTAssertEqual(
                PushDecision.decide(kind: kind, data: data, consent: consent, options: options, sentToday: sent, locale: locale),
                expected,
                name
            )
        }
    }

    func testProviderAnswersTable() {
        let apns: [(Int, String?, PushResult.Action)] = [
            (200, nil, .delivered), (410, "Unregistered", .removeToken), (400, "BadDeviceToken", .removeToken),
            (400, "DeviceTokenNotForTopic", .removeToken), (400, "PayloadTooLarge", .failed), (403, "ExpiredProviderToken", .credentialsRefused),
            (403, "InvalidProviderToken", .credentialsRefused), (429, "TooManyRequests", .retry(retryAfter: 3)),
            (503, "ServiceUnavailable", .retry(retryAfter: 3)),
        ]
        for (status, reason, action) in apns {
            XCTAssertEqual(PushResult.apns(status: status, reason: reason, retryAfter: 3).action, action, "APNs \(status) \(reason ?? "")")
        }
        let fcm: [(Int, String?, PushResult.Action)] = [
            (200, nil, .delivered), (404, "UNREGISTERED", .removeToken), (403, "SENDER_ID_MISMATCH", .removeToken),
            (429, "QUOTA_EXCEEDED", .retry(retryAfter: 3)), (503, "UNAVAILABLE", .retry(retryAfter: 3)), (400, "INVALID_ARGUMENT", .failed),
            (401, nil, .credentialsRefused),
        ]
        for (status, code, action) in fcm {
            XCTAssertEqual(PushResult.fcm(status: status, errorCode: code, retryAfter: 3).action, action, "FCM \(status) \(code ?? "")")
        }
    }

    func testRegistrationChecksEachField() throws {
        let ios = String(repeating: "ab", count: 32)
        let android = String(repeating: "fK3x_-:", count: 20)
        let refused: [(PushTokenRegistration, String)] = [
            (.init(deviceID: "d", platform: "windows", token: ios), "platform"),
            (.init(deviceID: "d", platform: "ios", token: "xyz"), "token"),
            (.init(deviceID: "d", platform: "ios", token: ios + "a"), "token"),
            (.init(deviceID: "d", platform: "ios", token: ios, environment: "staging"), "environment"),
            (.init(deviceID: "d", platform: "android", token: "short"), "token"),
            (.init(deviceID: "d", platform: "android", token: android, environment: "sandbox"), "environment"),
            (.init(deviceID: "", platform: "ios", token: ios), "device_id"),
            (.init(deviceID: "d", platform: "ios", token: ios, locale: "de"), "locale"),
        ]
        for (r, field) in refused {
            XCTAssertThrowsError(try r.checked(acceptLanguage: nil), field) { e in XCTAssertEqual((e as? AppError)?.field, field) }
        }
        let ok = try PushTokenRegistration(deviceID: "d", platform: "ios", token: ios.uppercased(), environment: "sandbox").checked(
            acceptLanguage: "en-GB,en;q=0.9"
        )
        XCTAssertEqual(ok, PushDevice(deviceID: "d", platform: .ios, token: ios, environment: .sandbox, locale: .en))
    }

    func testPayloadsFitTheProviders() throws {
        let long = PushDecision.alert(.init(title: "T", body: String(repeating: "é", count: 5000)))
        let apns = PushPayload.apns(long, kind: .operatorMessage, data: [:])
        XCTAssertLessThanOrEqual(apns.count, PushPayload.apnsMaxBytes, "an APNs payload stays under 4 KB")
        let silent = try JSONDecoder().decode(JSONValue.self, from: PushPayload.apns(.silent, kind: .contentUpdate, data: ["changes": "2"]))
        XCTAssertEqual(silent, .object(["aps": .object(["content-available": .int(1)]), "kind": .string("content_update"), "changes": .string("2")]))
        let fcm = try JSONDecoder().decode(
            JSONValue.self,
            from: PushPayload.fcm(.alert(.init(title: "a", body: "b")), kind: .creditAdded, token: "t", data: [:])
        )
        guard case .object(let top) = fcm, case .object(let m) = top["message"], case .object(let android) = m["android"] else {
            return XCTFail("\(fcm)")
        }
        XCTAssertEqual(android["collapse_key"], .string("credits"))
        XCTAssertEqual(m["notification"], .object(["title": .string("a"), "body": .string("b")]))
    }

    func testTemplatesAreChecked() throws {
        var o = PushOptions()
        o.templates = [.en: ["credit_added": PushTemplate(title: "Yay", body: "{amount} for {nobody}")]]
        XCTAssertThrowsError(try o.check()) { XCTAssertEqual(($0 as? AppError)?.field, "templates.en.credit_added") }
        o.templates = [.en: ["credit_added": PushTemplate(title: "Yay", body: "+{amount}")]]
        XCTAssertNoThrow(try o.check())
        o.dailyLimit = 1000
        XCTAssertThrowsError(try o.check()) { XCTAssertEqual(($0 as? AppError)?.field, "daily_limit") }
    }
}

/// #30 through auth's routes, with the local APNs (HTTP/2) and FCM stand-ins verifying what we sign.
final class PushTests: XCTestCase {
    struct Setup: Sendable {
        let h: AuthHarness
        let standIn: PushStandIn
        let messenger: PushMessenger
        let apnsKey: P256.Signing.PrivateKey
        let fcmKey: _RSA.Signing.PrivateKey
        var worker: JobWorker {
            JobWorker(
                queue: JobQueue(client: h.runtime.db, queue: PushMessenger.queue, logger: h.runtime.logger, clock: h.clock),
                handlers: [PushMessenger.sendJob: { [messenger] in try await messenger.run($0) }]
            )
        }
        func admin(_ app: IssuedAPIKey? = nil) -> HTTPFields { EmailSettingsTests.admin(h, app: app ?? h.app) }

        /// A user who consented to notifications, with one iOS device.
        func player(
            locale: String = "fr",
            consent: Bool = true,
            platform: String = "ios"
        ) async throws -> (
            id: UUID, token: String, device: String, access: String
        ) {
            let r = try await h.registerEmail(uniqueEmail("push"))
            if consent {
                let p = try await h.send(.patch, "auth/privacy", #"{"consent_notifications":true}"#, token: r.tokens.accessToken)
                XCTAssertEqual(p.status, .ok, String(buffer: p.body))
            }
            let token =
                platform == "ios"
                ? (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
                : "fcm-" + String(repeating: "x", count: 96) + UUID().uuidString.replacingOccurrences(of: "-", with: "")
            let device = "dev-\(UUID().uuidString.prefix(6))"
            let env = platform == "ios" ? #","environment":"sandbox""# : ""
            let put = try await h.send(
                .put,
                "auth/push-tokens",
                #"{"device_id":"\#(device)","platform":"\#(platform)","token":"\#(token)"\#(env),"locale":"\#(locale)"}"#,
                token: r.tokens.accessToken
            )
            XCTAssertEqual(put.status, .ok, String(buffer: put.body))
            return (r.user.id, token, device, r.tokens.accessToken)
        }

        /// What a service's outbox sends to auth.
        func notify(
            _ user: UUID,
            key: String,
            kind: String = "credit_added",
            data: String = #"{"amount":"5"}"#,
            app: UUID? = nil
        ) async throws -> TestResponse {
            let app = app ?? h.app.appID
            return try await h.client.execute(
                uri: "/internal/users/\(user)/notifications?app_id=\(app)",
                method: .post,
                headers: [.authorization: "Bearer local-internal-subscription", .xServiceName: "subscription", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"app_id":"\#(app)","key":"\#(key)","kind":"\#(kind)","data":\#(data)}"#)
            ) { $0 }
        }

        func received(_ token: String) -> [PushStandIn.Received] { standIn.received.filter { $0.token == token } }
    }

    static func run(_ body: @Sendable (Setup) async throws -> Void) async throws {
        let standIn = PushStandIn()
        let apnsPort = try TestEnvironment.freePort()
        let httpPort = try TestEnvironment.freePort()
        let apnsKey = P256.Signing.PrivateKey()
        let fcmKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        standIn.addAPNsKey(teamID: "TEAM123456", keyID: "KEY1234567", publicKey: apnsKey.publicKey)
        standIn.addFCMAccount(clientEmail: "push@quiz-geo.iam.gserviceaccount.com", publicKey: fcmKey.publicKey)
        let caPath = FileManager.default.temporaryDirectory.appendingPathComponent("apns-ca-\(UUID()).pem").path
        let tls = try PushStandIn.tls(caPath: caPath)
        let group = ServiceGroup(
            configuration: .init(
                services: [try standIn.apnsApplication(port: apnsPort, tls: tls), standIn.httpApplication(port: httpPort)],
                logger: Logger(label: "standin")
            )
        )
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await AuthHarness.run(overrides: [
                "APNS_URL": "https://localhost:\(apnsPort)", "APNS_CA_BUNDLE": caPath, "FCM_URL": "http://127.0.0.1:\(httpPort)",
                "GOOGLE_OAUTH_TOKEN_URL": "http://127.0.0.1:\(httpPort)/token",
            ]) { h in
                let box = SecretBox(key: try AuthService.dataKey(env: h.runtime.config.environment, signingKey: h.signerKey))
                let setup = Setup(
                    h: h,
                    standIn: standIn,
                    messenger: AuthMessaging.messenger(runtime: h.runtime, box: box),
                    apnsKey: apnsKey,
                    fcmKey: fcmKey
                )
                // The operator's keys for the tenant.
                let apns = try await h.client.execute(
                    uri: "/auth/v1/admin/push/apns",
                    method: .put,
                    headers: setup.admin(),
                    body: ByteBuffer(
                        string: """
                            {"team_id":"TEAM123456","key_id":"KEY1234567","topic":"com.example.quiz","environment":"sandbox","private_key":\(Self.quoted(apnsKey.pemRepresentation))}
                            """
                    )
                ) { $0 }
                XCTAssertEqual(apns.status, .ok, String(buffer: apns.body))
                let fcm = try await h.client.execute(
                    uri: "/auth/v1/admin/push/fcm",
                    method: .put,
                    headers: setup.admin(),
                    body: ByteBuffer(
                        string: """
                            {"service_account":{"type":"service_account","project_id":"quiz-geo","client_email":"push@quiz-geo.iam.gserviceaccount.com",
                             "private_key":\(Self.quoted(fcmKey.pemRepresentation))}}
                            """
                    )
                ) { $0 }
                XCTAssertEqual(fcm.status, .ok, String(buffer: fcm.body))
                try await body(setup)
            }
            try await stopLocalServer(group, in: &tasks)
        }
    }

    static func quoted(_ s: String) -> String { String(decoding: try! JSONEncoder().encode(s), as: UTF8.self) }

    func testTokensAreRegisteredMovedListedAndRemoved() async throws {
        try await Self.run { s in
            let a = try await s.player()
            let b = try await s.h.registerEmail(uniqueEmail("other"))
            // Listed without the token itself.
            let listed = try await s.h.send(.get, "auth/push-tokens", token: a.access)
            XCTAssertEqual(listed.status, .ok)
            XCTAssertTrue(String(buffer: listed.body).contains(a.device))
            XCTAssertFalse(String(buffer: listed.body).contains(a.token), "the token is not read back")
            // The same token registered by another user moves to him.
            let moved = try await s.h.send(
                .put,
                "auth/push-tokens",
                #"{"device_id":"phone","platform":"ios","token":"\#(a.token)"}"#,
                token: b.tokens.accessToken
            )
            XCTAssertEqual(moved.status, .ok)
            do {
                let value = try await s.h.scalar("SELECT count(*)::int FROM auth.push_tokens WHERE token = '\(a.token)'")
                XCTAssertEqual(value, 1)
            }
            do {
                let value = try await s.h.scalar("SELECT count(*)::int FROM auth.push_tokens WHERE user_id = '\(a.id)'")
                XCTAssertEqual(value, 0)
            }
            // Bad input names the field and changes nothing.
            for (json, field) in [
                (#"{"device_id":"x","platform":"web","token":"\#(a.token)"}"#, "platform"),
                (#"{"device_id":"x","platform":"ios","token":"nothex"}"#, "token"),
                (#"{"device_id":"x","platform":"ios"}"#, "token"),
                (#"{"device_id":5,"platform":"ios","token":"\#(a.token)"}"#, "device_id"),
            ] {
                let r = try await s.h.send(.put, "auth/push-tokens", json, token: b.tokens.accessToken)
                XCTAssertTrue((400..<500).contains(Int(r.status.code)), json)
                XCTAssertEqual(try r.envelope().field, field, json)
            }
            do {
                let value = try await s.h.scalar("SELECT count(*)::int FROM auth.push_tokens WHERE user_id = '\(b.user.id)'")
                XCTAssertEqual(value, 1)
            }
            // At most 20 devices.
            for i in 1..<20 {
                let t = String(format: "%064x", i)
                let r = try await s.h.send(
                    .put,
                    "auth/push-tokens",
                    #"{"device_id":"d\#(i)","platform":"ios","token":"\#(t)"}"#,
                    token: b.tokens.accessToken
                )
                XCTAssertEqual(r.status, .ok)
            }
            let tooMany = try await s.h.send(
                .put,
                "auth/push-tokens",
                #"{"device_id":"d21","platform":"ios","token":"\#(String(format: "%064x", 99))"}"#,
                token: b.tokens.accessToken
            )
            XCTAssertEqual(tooMany.status, .unprocessableContent)
            XCTAssertEqual(try tooMany.envelope().error, "too_many_devices")
            do {
                let value = try await s.h.scalar("SELECT count(*)::int FROM auth.push_tokens WHERE user_id = '\(b.user.id)'")
                XCTAssertEqual(value, 20)
            }
            // Another tenant's token does not reach these devices.
            let other = try await s.h.send(.delete, "auth/push-tokens/phone", token: a.access, app: s.h.otherApp)
            XCTAssertEqual(other.status, .unauthorized)
            do {
                let value = try await s.h.send(.delete, "auth/push-tokens/nope", token: b.tokens.accessToken).status
                XCTAssertEqual(value, .notFound)
            }
            do {
                let value = try await s.h.send(.delete, "auth/push-tokens/phone", token: b.tokens.accessToken).status
                XCTAssertEqual(value, .ok)
            }
            // Logout of a device removes its token; logout everywhere removes all.
            let c = try await s.player()
            let login = try await s.h.send(.get, "auth/push-tokens", token: c.access)
            XCTAssertEqual(login.status, .ok)
            try await s.h.post("auth/logout", #"{"all":true}"#, token: b.tokens.accessToken) { XCTAssertEqual($0.status, .ok) }
            do {
                let value = try await s.h.scalar("SELECT count(*)::int FROM auth.push_tokens WHERE user_id = '\(b.user.id)'")
                XCTAssertEqual(value, 0)
            }
        }
    }

    func testOperatorKeysAreSealedAndChecked() async throws {
        try await Self.run { s in
            let shown = try await s.h.client.execute(uri: "/auth/v1/admin/push", method: .get, headers: s.admin()) { $0 }
            let text = String(buffer: shown.body)
            XCTAssertEqual(shown.status, .ok)
            XCTAssertTrue(text.contains("sha256:"), text)
            XCTAssertFalse(text.contains("PRIVATE KEY"), "a key is never read back")
            let stored = try await s.h.scalar(
                "SELECT count(*)::int FROM auth.push_credentials WHERE position('PRIVATE KEY'::bytea in sealed_secret) > 0"
            )
            XCTAssertEqual(stored, 0, "sealed at rest")
            // A bad key is refused by field, and the stored one stays.
            let bad = try await s.h.client.execute(
                uri: "/auth/v1/admin/push/apns",
                method: .put,
                headers: s.admin(),
                body: ByteBuffer(
                    string: """
                        {"team_id":"TEAM123456","key_id":"KEY1234567","topic":"com.example.quiz","private_key":"-----BEGIN PRIVATE KEY-----\\nxx"}
                        """
                )
            ) { $0 }
            XCTAssertEqual(bad.status, .unprocessableContent)
            XCTAssertEqual(try bad.envelope().field, "private_key")
            do {
                let value = try await s.h.scalar(
                    "SELECT version::int FROM auth.push_credentials WHERE provider = 'apns' AND app_id = '\(s.h.app.appID)'"
                )
                XCTAssertEqual(value, 1)
            }
            // The other app sees none of it.
            let other = try await s.h.client.execute(uri: "/auth/v1/admin/push", method: .get, headers: s.admin(s.h.otherApp)) { $0 }
            XCTAssertFalse(String(buffer: other.body).contains("TEAM123456"))
            // The operator's test answers each device's result.
            let p = try await s.player()
            let test = try await s.h.client.execute(
                uri: "/auth/v1/admin/push/test",
                method: .post,
                headers: s.admin(),
                body: ByteBuffer(string: #"{"user_id":"\#(p.id)"}"#)
            ) { $0 }
            XCTAssertEqual(test.status, .ok, String(buffer: test.body))
            XCTAssertTrue(String(buffer: test.body).contains(#""outcome":"sent""#), String(buffer: test.body))
            XCTAssertEqual(s.received(p.token).count, 1)
        }
    }

    /// #47 the console's recent sends: the app's own, newest first, paged without a gap or a
    /// repeat; another app's operator sees none of them; a bad cursor or limit is a 422.
    func testRecentSendsArePagedNewestFirstAndKeptToTheirApp() async throws {
        try await Self.run { s in
            var players: [UUID] = []
            for _ in 0..<3 {
                let p = try await s.player()
                players.append(p.id)
                let test = try await s.h.client.execute(
                    uri: "/auth/v1/admin/push/test",
                    method: .post,
                    headers: s.admin(),
                    body: ByteBuffer(string: #"{"user_id":"\#(p.id)"}"#)
                ) { $0 }
                XCTAssertEqual(test.status, .ok, String(buffer: test.body))
            }
            struct Page: Decodable {
                struct Send: Decodable {
                    var id: Int64
                    var userID: UUID
                    var outcome: String
                    var kind: String
                    enum CodingKeys: String, CodingKey {
                        case id
                        case userID = "user_id"
                        case outcome, kind
                    }
                }
                var sends: [Send]
                var nextBefore: String?
                enum CodingKeys: String, CodingKey {
                    case sends
                    case nextBefore = "next_before"
                }
            }
            func page(_ query: String, app: IssuedAPIKey? = nil) async throws -> TestResponse {
                try await s.h.client.execute(uri: "/auth/v1/admin/push/sends?\(query)", method: .get, headers: s.admin(app)) { $0 }
            }
            let first = try await page("limit=2").json(Page.self)
            XCTAssertEqual(first.sends.map(\.userID), [players[2], players[1]], "newest first")
            XCTAssertEqual(first.sends.map(\.outcome), ["sent", "sent"])
            let cursor = try XCTUnwrap(first.nextBefore)
            let second = try await page("limit=2&before=\(cursor)").json(Page.self)
            XCTAssertEqual(second.sends.first?.userID, players[0], "the next page starts where the first ended")
            XCTAssertTrue(Set(first.sends.map(\.id)).isDisjoint(with: second.sends.map(\.id)), "no send twice")
            let other = try await page("limit=100", app: s.h.otherApp).json(Page.self)
            XCTAssertTrue(other.sends.allSatisfy { !players.contains($0.userID) }, "another app's operator sees none of them")
            for bad in ["limit=0", "limit=101", "limit=ten", "before=abc", "before=0", "before=-4"] {
                let r = try await page(bad)
                XCTAssertEqual(r.status, .unprocessableContent, bad)
                XCTAssertNotNil(try? r.envelope().field, bad)
            }
        }
    }

    func testACreditPushArrivesOnceInTheUsersLanguage() async throws {
        try await Self.run { s in
            let fr = try await s.player(locale: "fr")
            let en = try await s.player(locale: "en")
            for user in [fr.id, en.id] {
                // Delivered twice by the outbox: one notification.
                let first = try await s.notify(user, key: "credit:\(user)-1")
                XCTAssertEqual(first.status, .accepted, String(buffer: first.body))
                let again = try await s.notify(user, key: "credit:\(user)-1")
                XCTAssertEqual(again.status, .ok)
            }
            try await s.worker.runOnce()
            try await s.worker.runOnce()
            let french = s.received(fr.token)
            let english = s.received(en.token)
            XCTAssertEqual(french.count, 1)
            XCTAssertEqual(english.count, 1)
            XCTAssertTrue(french.first?.payload.contains("+5 crédits ajoutés") ?? false, french.first?.payload ?? "")
            XCTAssertTrue(english.first?.payload.contains("+5 credits added") ?? false, english.first?.payload ?? "")
            XCTAssertEqual(french.first?.headers["apns-collapse-id"], "credits")
            XCTAssertEqual(french.first?.headers["apns-push-type"], "alert")
            XCTAssertEqual(french.first?.headers["apns-topic"], "com.example.quiz")
            // Recorded, counted in /metrics.
            do {
                let value = try await s.h.scalar("SELECT count(*)::int FROM auth.push_deliveries WHERE user_id = '\(fr.id)' AND outcome = 'sent'")
                XCTAssertEqual(value, 1)
            }
            // The messenger shares the service's registry: /metrics counts the sends by provider and outcome.
            let metrics = try await s.h.client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
            let sent = metrics.split(separator: "\n").first {
                $0.hasPrefix("push_sends_total") && $0.contains(#"provider="apns""#) && $0.contains(#"outcome="sent""#)
            }
            XCTAssertNotNil(sent, String(metrics.prefix(2000)))
            XCTAssertGreaterThanOrEqual(Double(sent?.split(separator: " ").last ?? "") ?? 0, 2)
            // Another app's id on the message reaches no one.
            let cross = try await s.notify(fr.id, key: "credit:cross", app: s.h.otherApp.appID)
            XCTAssertEqual(cross.status, .accepted)
            try await s.worker.runOnce()
            XCTAssertEqual(s.received(fr.token).count, 1, "a user of app A is not reached through app B")
            // The user's data: the export holds the device and the sends; erasure removes them.
            let section = PushStore.exportSection(logger: s.h.runtime.logger)
            let exported = try await s.h.runtime.db.withConnection { try await section.export(fr.id, s.h.app.appID, $0) }
            guard case .object(let parts) = exported, case .array(let devices)? = parts["devices"],
                case .array(let sent)? = parts["sent_last_30_days"]
            else {
                return XCTFail("\(exported)")
            }
            XCTAssertEqual(devices.count, 1)
            XCTAssertEqual(sent.count, 1)
            try await s.h.runtime.db.withTransaction(logger: s.h.runtime.logger) {
                try await AccountStore(logger: s.h.runtime.logger).anonymise(userID: fr.id, now: s.h.clock.now(), on: $0)
            }
            do {
                let value = try await s.h.scalar(
                    "SELECT (SELECT count(*) FROM auth.push_tokens WHERE user_id = '\(fr.id)') + (SELECT count(*) FROM auth.push_deliveries WHERE user_id = '\(fr.id)')::int"
                )
                XCTAssertEqual(value, 0, "erasure removes devices and sends")
            }
            // Bad input: unknown kind, missing key.
            let badKind = try await s.notify(fr.id, key: "x", kind: "spam")
            XCTAssertEqual(badKind.status, .unprocessableContent)
            XCTAssertEqual(try badKind.envelope().field, "kind")
        }
    }

    func testNoConsentNoPushAndTheDailyCap() async throws {
        try await Self.run { s in
            let p = try await s.player()
            try await s.h.send(.patch, "auth/privacy", #"{"consent_notifications":false}"#, token: p.access).status == .ok ? () : XCTFail("privacy")
            _ = try await s.notify(p.id, key: "credit:nc-1")
            try await s.worker.runOnce()
            XCTAssertEqual(s.received(p.token).count, 0, "a withdrawn consent sends nothing")
            do {
                let value = try await s.h.scalar(
                    "SELECT count(*)::int FROM auth.push_deliveries WHERE user_id = '\(p.id)' AND outcome = 'skipped_consent'"
                )
                XCTAssertEqual(value, 1)
            }
            // A silent sync hint is not sent either, unless the app allows it.
            _ = try await s.notify(p.id, key: "content:nc-2", kind: "content_update", data: #"{"changes":"2","category":"Europe"}"#)
            try await s.worker.runOnce()
            XCTAssertEqual(s.received(p.token).count, 0)

            // Daily cap of 2: the third credit push is skipped.
            let settings = try await s.h.client.execute(
                uri: "/auth/v1/admin/push/settings",
                method: .put,
                headers: s.admin(),
                body: ByteBuffer(string: #"{"daily_limit":2}"#)
            ) { $0 }
            XCTAssertEqual(settings.status, .ok, String(buffer: settings.body))
            let q = try await s.player()
            for i in 1...3 {
                _ = try await s.notify(q.id, key: "credit:cap-\(i)")
                try await s.worker.runOnce()
            }
            XCTAssertEqual(s.received(q.token).count, 2)
            do {
                let value = try await s.h.scalar(
                    "SELECT count(*)::int FROM auth.push_deliveries WHERE user_id = '\(q.id)' AND outcome = 'skipped_limit'"
                )
                XCTAssertEqual(value, 1)
            }
            // A content update of 3+ changes is an alert; fewer a silent background push.
            _ = try await s.h.client.execute(
                uri: "/auth/v1/admin/push/settings",
                method: .put,
                headers: s.admin(),
                body: ByteBuffer(string: #"{"daily_limit":5}"#)
            ) { $0 }
            let r = try await s.player(locale: "en")
            _ = try await s.notify(r.id, key: "content:1", kind: "content_update", data: #"{"changes":"2","category":"Europe"}"#)
            _ = try await s.notify(r.id, key: "content:2", kind: "content_update", data: #"{"changes":"7","category":"Europe"}"#)
            try await s.worker.runOnce()
            let got = s.received(r.token)
            XCTAssertEqual(Set(got.compactMap { $0.headers["apns-push-type"] }), ["background", "alert"])
            XCTAssertEqual(got.first { $0.headers["apns-push-type"] == "background" }?.headers["apns-priority"], "5")
            XCTAssertTrue(got.contains { $0.payload.contains("7 updates in Europe") })
        }
    }

    func testDeadTokensAreRemovedAndRetriesSendOnce() async throws {
        try await Self.run { s in
            let p = try await s.player()
            s.standIn.unregister(p.token)
            _ = try await s.notify(p.id, key: "credit:dead-1")
            try await s.worker.runOnce()
            do {
                let value = try await s.h.scalar("SELECT count(*)::int FROM auth.push_tokens WHERE token = '\(p.token)'")
                XCTAssertEqual(value, 0, "410 removes the token")
            }
            _ = try await s.notify(p.id, key: "credit:dead-2")
            try await s.worker.runOnce()
            do {
                let value = try await s.h.scalar("SELECT count(*)::int FROM auth.push_deliveries WHERE user_id = '\(p.id)' AND outcome = 'no_device'")
                XCTAssertEqual(
                    value,
                    1,
                    "the next send skips it"
                )
            }
            // A 503 is retried in a later round, and sent once.
            let q = try await s.player()
            s.standIn.fail(q.token, with: [503])
            _ = try await s.notify(q.id, key: "credit:retry-1")
            try await s.worker.runOnce()
            XCTAssertEqual(s.received(q.token).count, 0)
            do {
                let value = try await s.h.scalar("SELECT count(*)::int FROM auth.jobs WHERE queue = 'messaging' AND status = 'pending'")
                XCTAssertEqual(value, 1, "a second round is queued")
            }
            try await s.h.sql("UPDATE auth.jobs SET run_at = now() WHERE queue = 'messaging' AND status = 'pending'")
            try await s.worker.runOnce()
            try await s.worker.runOnce()
            XCTAssertEqual(s.received(q.token).count, 1)
        }
    }

    func testTheProviderTokenIsRenewedAtMostEveryTwentyMinutes() async throws {
        try await Self.run { s in
            let p = try await s.player()
            let signedBefore = s.messenger.apns.signed.withLock { $0 }
            for i in 1...3 { _ = try await s.notify(p.id, key: "credit:jwt-\(i)") }
            try await s.worker.runOnce()
            XCTAssertEqual(s.messenger.apns.signed.withLock { $0 } - signedBefore, 1, "one provider token for many sends")
            // 30 minutes on: still the same token; 45 minutes on: a new one, which Apple accepts.
            s.h.clock.advance(by: 30 * 60)
            s.standIn.moveClock(by: 30 * 60)
            _ = try await s.notify(p.id, key: "credit:jwt-4")
            try await s.worker.runOnce()
            XCTAssertEqual(s.messenger.apns.signed.withLock { $0 } - signedBefore, 1)
            s.h.clock.advance(by: 15 * 60)
            s.standIn.moveClock(by: 15 * 60)
            _ = try await s.notify(p.id, key: "credit:jwt-5")
            try await s.worker.runOnce()
            XCTAssertEqual(s.messenger.apns.signed.withLock { $0 } - signedBefore, 2)
            XCTAssertEqual(s.standIn.refusedTooManyUpdates, 0, "never renewed within 20 minutes")
            XCTAssertEqual(s.received(p.token).count, 5)
            // A forced renewal (403 ExpiredProviderToken) inside 20 minutes keeps the token.
            let creds = try await s.messenger.credentials.value(for: s.h.app.appID)?.apns
            let token = try await s.messenger.apns.providerToken(app: s.h.app.appID, try XCTUnwrap(creds), forceRenew: true)
            let again = try await s.messenger.apns.providerToken(app: s.h.app.appID, try XCTUnwrap(creds), forceRenew: true)
            XCTAssertEqual(token, again)
            // Another replica (or this one restarted) sends the token in force: no new signature.
            let box = SecretBox(key: try AuthService.dataKey(env: s.h.runtime.config.environment, signingKey: s.h.signerKey))
            let replica = AuthMessaging.messenger(runtime: s.h.runtime, box: box)
            let fromReplica = try await replica.apns.providerToken(app: s.h.app.appID, try XCTUnwrap(creds))
            XCTAssertEqual(fromReplica, token)
            XCTAssertEqual(replica.apns.signed.withLock { $0 }, 0, "the replica signed nothing")
        }
    }

    /// The provider token's compare-and-set, as two replicas meet it: a token another replica
    /// wrote within the window is kept (and answered) rather than overwritten; one older than the
    /// window is replaced. One statement, no transaction of its own.
    func testAProviderTokenWrittenByAnotherReplicaIsKeptNotOverwritten() async throws {
        try await Self.run { s in
            let held = try await s.messenger.credentials.value(for: s.h.app.appID)?.apns
            let creds = try XCTUnwrap(held)
            let store = PushTokenStore(db: s.h.runtime.db, logger: s.h.runtime.logger)
            let t0 = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 86_400).rounded())
            let first = try await store.replace(app: s.h.app.appID, fingerprint: creds.fingerprint, jwt: "A", issuedAt: t0, before: t0 - 2400)
            XCTAssertEqual(first?.jwt, "A", "nothing in force: written")
            // The other replica signed a second later, within the window: it gets A, B is not stored.
            let second = try await store.replace(
                app: s.h.app.appID,
                fingerprint: creds.fingerprint,
                jwt: "B",
                issuedAt: t0 + 1,
                before: t0 - 2400
            )
            XCTAssertEqual(second?.jwt, "A")
            XCTAssertEqual(second?.issuedAt, t0)
            let stored = try await store.current(app: s.h.app.appID, fingerprint: creds.fingerprint)
            XCTAssertEqual(stored?.jwt, "A", "the token in force was not overwritten")
            // 50 minutes on, A is past the window: C replaces it.
            let third = try await store.replace(
                app: s.h.app.appID,
                fingerprint: creds.fingerprint,
                jwt: "C",
                issuedAt: t0 + 3000,
                before: t0 + 600
            )
            XCTAssertEqual(third?.jwt, "C")
            let after = try await store.current(app: s.h.app.appID, fingerprint: creds.fingerprint)
            XCTAssertEqual(after?.jwt, "C")
        }
    }

    func testAndroidThroughFCM() async throws {
        try await Self.run { s in
            let a = try await s.player(locale: "en", platform: "android")
            for i in 1...2 { _ = try await s.notify(a.id, key: "credit:fcm-\(i)") }
            try await s.worker.runOnce()
            let got = s.received(a.token)
            XCTAssertEqual(got.count, 2)
            XCTAssertTrue(got.first?.payload.contains("\"collapse_key\":\"credits\"") ?? false, got.first?.payload ?? "")
            XCTAssertEqual(s.standIn.oauthGrants, 1, "the access token is cached")
            s.standIn.unregister(a.token)
            _ = try await s.notify(a.id, key: "credit:fcm-3")
            try await s.worker.runOnce()
            do {
                let value = try await s.h.scalar("SELECT count(*)::int FROM auth.push_tokens WHERE token = '\(a.token)'")
                XCTAssertEqual(value, 0, "UNREGISTERED removes it")
            }
        }
    }
}

extension ErrorEnvelope {
    var field: String? { if case .string(let f) = extra["field"] { f } else { nil } }
}

extension AppError {
    var field: String? { if case .string(let f) = extra["field"] { f } else { nil } }
}

/// #30 bad input on the messenger's routes: a 4xx in the envelope naming the field, nothing written.
final class PushBadInputTests: XCTestCase {
    func testBadInputIsRefusedAndChangesNothing() async throws {
        try await PushTests.run { s in
            let h = s.h
            func admin(_ method: HTTPRequest.Method, _ path: String, _ body: String, app: IssuedAPIKey? = nil) async throws -> TestResponse {
                try await h.client.execute(uri: "/auth/v1/admin/push/\(path)", method: method, headers: s.admin(app), body: ByteBuffer(string: body))
                { $0 }
            }
            let before = try await h.scalar("SELECT (SELECT count(*) FROM auth.notifications) + (SELECT count(*) FROM auth.push_credentials)::int")
            let cases: [(HTTPRequest.Method, String, String, Int, String?)] = [
                (.put, "fcm", #"{}"#, 400, "service_account"),
                (
                    .put, "fcm", #"{"service_account":{"project_id":"Bad Project","client_email":"a@b.c","private_key":"x"}}"#, 422,
                    "service_account.project_id"
                ),
                (.put, "fcm", #"{"service_account":{"project_id":"p","client_email":"a@b.c","private_key":42}}"#, 400, "service_account.private_key"),
                (.put, "apns", #"{"team_id":"short","key_id":"KEY1234567","topic":"t","private_key":"x"}"#, 422, "team_id"),
                (.put, "settings", #"{"daily_limit":"five"}"#, 400, "daily_limit"),
                (.put, "settings", #"{"templates":{"en":{"spam":{"title":"a","body":"b"}}}}"#, 422, "templates.en.spam"),
                (.put, "settings", #"{"templates":{"de":{}}}"#, 422, "templates"),
                (.post, "test", #"{"user_id":"not-a-uuid"}"#, 400, "user_id"),
                (.post, "test", #"{"user_id":"\#(UUID())"}"#, 404, nil),
                (.post, "send", #"{"user_id":"\#(UUID())","body":"b"}"#, 422, "title"),
                (.delete, "xyz", "", 400, "provider"),
            ]
            for (method, path, body, status, field) in cases {
                let r = try await admin(method, path, body)
                XCTAssertEqual(Int(r.status.code), status, "\(path) \(body): \(String(buffer: r.body))")
                let envelope = try r.envelope()
                XCTAssertEqual(envelope.field, field, "\(path) \(body)")
            }
            // Another app's operator cannot reach this app's user; an oversized body is a 413.
            let p = try await s.player()
            let other = try await admin(.post, "test", #"{"user_id":"\#(p.id)"}"#, app: h.otherApp)
            XCTAssertEqual(other.status, .notFound)
            let big = try await admin(
                .put,
                "settings",
                #"{"templates":{"en":{"test":{"title":"\#(String(repeating: "x", count: 2 << 20))","body":"b"}}}}"#
            )
            XCTAssertEqual(big.status, .contentTooLarge)
            XCTAssertEqual(try big.envelope().error, "payload_too_large")
            XCTAssertEqual(s.received(p.token).count, 0)
            // Internal: the query and the body must name the same app; a path id must be a UUID.
            let mismatch = try await s.notify(p.id, key: "k1", app: h.app.appID).status  // sanity: accepted
            XCTAssertEqual(mismatch, .accepted)
            let internalHeaders: HTTPFields = [
                .authorization: "Bearer local-internal-subscription", .xServiceName: "subscription", .contentType: "application/json",
            ]
            let wrongApp = try await h.client.execute(
                uri: "/internal/users/\(p.id)/notifications?app_id=\(h.otherApp.appID)",
                method: .post,
                headers: internalHeaders,
                body: ByteBuffer(string: #"{"app_id":"\#(h.app.appID)","key":"k2","kind":"credit_added","data":{}}"#)
            ) { $0 }
            XCTAssertEqual(wrongApp.status, .unprocessableContent)
            let badID = try await h.client.execute(
                uri: "/internal/users/nope/notifications?app_id=\(h.app.appID)",
                method: .post,
                headers: internalHeaders,
                body: ByteBuffer(string: #"{"app_id":"\#(h.app.appID)","key":"k3","kind":"credit_added","data":{}}"#)
            ) { $0 }
            XCTAssertEqual(badID.status, .badRequest)
            let noKey = try await h.client.execute(
                uri: "/internal/users/\(p.id)/notifications?app_id=\(h.app.appID)",
                method: .post,
                headers: internalHeaders,
                body: ByteBuffer(string: #"{"app_id":"\#(h.app.appID)","kind":"credit_added","data":{}}"#)
            ) { $0 }
            XCTAssertEqual(noKey.status, .badRequest)
            XCTAssertEqual(try noKey.envelope().field, "key")
            let after = try await h.scalar("SELECT (SELECT count(*) FROM auth.notifications) + (SELECT count(*) FROM auth.push_credentials)::int")
            XCTAssertEqual(after, before + 1, "only the one accepted notification was written")
        }
    }
}

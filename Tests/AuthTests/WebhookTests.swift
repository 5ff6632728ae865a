import AuthDomain
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import ServiceKit
import ServiceLifecycle
import Synchronization
import TestSupport
import WireTypes
import XCTest

@testable import AuthMessaging
@testable import AuthService

/// #33 the webhooks' decisions, without a database: each rule is a row.
final class WebhookRulesTests: XCTestCase {
    /// Standard Webhooks' own test vector (the reference libraries check the same one).
    func testTheSignatureIsStandardWebhooks() {
        let signature = WebhookSignature.sign(
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
            timestamp: 1_614_265_330,
            body: Data(#"{"test": 2432232314}"#.utf8)
        )
        XCTAssertEqual(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        XCTAssertNil(WebhookSignature.sign(secret: "not-a-secret", id: "a", timestamp: 1, body: Data()))
        let secret = WebhookSignature.newSecret()
        XCTAssertTrue(secret.hasPrefix("whsec_"))
        XCTAssertEqual(Data(base64Encoded: String(secret.dropFirst(6)))?.count, 32)
        // During a rotation both secrets sign: two signatures, space-separated.
        let both = WebhookSignature.header(secrets: [secret, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], id: "a", timestamp: 1, body: Data("{}".utf8))
        XCTAssertEqual(both.split(separator: " ").count, 2)
        XCTAssertTrue(both.split(separator: " ").allSatisfy { $0.hasPrefix("v1,") })
    }

    func testEndpointSettingsTable() {
        let urls: [(String, Bool, Bool)] = [  // (url, http allowed, accepted)
            ("https://game.example.com/hooks", false, true), ("http://game.example.com/hooks", false, false),
            ("http://127.0.0.1:9000/hooks", true, true), ("ftp://game.example.com", true, false), ("not a url", true, false),
            ("https://user:pw@game.example.com/", false, false), ("https:///nohost", false, false),
        ]
        for (url, http, accepted) in urls {
            XCTAssertEqual((try? WebhookEndpointRules.checkedURL(url, allowHTTP: http)) != nil, accepted, url)
        }
        XCTAssertEqual(
            try WebhookEndpointRules.checkedEvents(["subscription.refunded", "*", "subscription.refunded"]),
            ["subscription.refunded", "*"]
        )
        for bad in [[], ["subscription.exploded"], ["user.created", "nope"]] {
            XCTAssertThrowsError(try WebhookEndpointRules.checkedEvents(bad), "\(bad)") { e in
                XCTAssertTrue((e as? AppError)?.field?.hasPrefix("events") == true)
            }
        }
        XCTAssertTrue(WebhookEndpointRules.wants(["*"], "credits.spent"))
        XCTAssertFalse(WebhookEndpointRules.wants(["credits.earned"], "credits.spent"))
    }

    /// SSRF: what an outbound URL may resolve to (loopback only in ENVIRONMENT=local).
    func testOnlyPublicAddressesAreReachable() async throws {
        let table: [(String, Bool)] = [
            ("93.184.216.34", true), ("8.8.8.8", true), ("10.1.2.3", false), ("172.16.0.1", false), ("172.32.0.1", true),
            ("192.168.1.1", false), ("127.0.0.1", false), ("169.254.169.254", false), ("100.64.0.1", false), ("0.0.0.0", false),
            ("224.0.0.1", false), ("::1", false), ("fe80::1", false), ("fd00::1", false), ("::ffff:10.0.0.1", false),
            ("2606:4700:4700::1111", true), ("::", false),
        ]
        for (address, reachable) in table { XCTAssertEqual(OutboundAddress.isPublic(address), reachable, address) }
        let loopback: [(String, Bool)] = [
            ("127.0.0.1", true), ("127.8.9.10", true), ("::1", true), ("::ffff:127.0.0.1", true),
            ("10.0.0.1", false), ("169.254.169.254", false), ("fe80::1", false), ("::", false),
        ]
        for (address, isLoopback) in loopback {
            XCTAssertEqual(OutboundAddress.isLoopback(address), isLoopback, address)
            XCTAssertEqual(OutboundAddress.isReachable(address, allowLoopback: true), isLoopback, address)
            XCTAssertFalse(OutboundAddress.isReachable(address, allowLoopback: false), address)
        }
        let strict = WebhookSender(http: CurlHTTPClient(), allowLoopback: false)
        let local = WebhookSender(http: CurlHTTPClient(), allowLoopback: true)
        for url in ["https://127.0.0.1/hook", "https://localhost:8443/hook", "https://[::1]/hook", "https://169.254.169.254/latest/meta-data"] {
            await XCTAssertThrowsErrorAsync(try await strict.pin(url), url)
        }
        // Local: loopback is reached (pinned like any host), never a private or link-local address.
        for url in ["https://10.1.2.3/hook", "http://169.254.169.254/latest/meta-data", "http://[::ffff:192.168.1.1]/x", "http://[fd00::1]/x"] {
            await XCTAssertThrowsErrorAsync(try await local.pin(url), url)
        }
        let pinned = try await strict.pin("https://93.184.216.34:8443/x")
        XCTAssertEqual(pinned, ["93.184.216.34:8443:93.184.216.34"])
        let pinnedLocal = try await local.pin("http://127.0.0.1/x")
        XCTAssertEqual(pinnedLocal, ["127.0.0.1:80:127.0.0.1"])
    }

    /// Standard Webhooks' schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (±10 %), then failed;
    /// a 2xx ends it; 410 disables the endpoint.
    func testRetryTable() {
        let rows: [(Int?, Int, WebhookRetry.Decision)] = [
            (200, 1, .delivered), (204, 7, .delivered), (410, 1, .disableEndpoint), (500, 1, .retry(after: 5)), (nil, 2, .retry(after: 300)),
            (429, 3, .retry(after: 1800)), (404, 4, .retry(after: 7200)), (503, 5, .retry(after: 18_000)), (500, 6, .retry(after: 36_000)),
            (500, 7, .retry(after: 36_000)), (500, 8, .failed), (nil, 8, .failed),
        ]
        for (status, attempt, expected) in rows {
            XCTAssertEqual(
                WebhookRetry.decide(status: status, attempt: attempt, jitter: 0),
                expected,
                "\(status.map(String.init) ?? "no answer") attempt \(attempt)"
            )
        }
        XCTAssertEqual(WebhookRetry.delay(afterAttempt: 1, jitter: 0.5), 5.5, "jitter is at most 10 %")
    }
}

/// A receiver of the app's servers: records each call, checks its signature with the reference
/// algorithm (computed here, independently of the sender), answers what it is told.
final class WebhookReceiver: Sendable {
    struct Call: Sendable {
        var id: String
        var timestamp: String
        var signatures: [String]
        var body: Data
    }
    let calls = Mutex<[Call]>([])
    let answer = Mutex<Int>(200)
    /// Calls to /slow wait this long before answering (a receiver that hangs).
    let slowDelay = Mutex<Duration>(.seconds(5))

    func application(port: Int) -> some ApplicationProtocol {
        let router = Router()
        router.post("hook") { [self] request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            let call = Call(
                id: request.headers[HTTPField.Name("webhook-id")!] ?? "",
                timestamp: request.headers[HTTPField.Name("webhook-timestamp")!] ?? "",
                signatures: (request.headers[HTTPField.Name("webhook-signature")!] ?? "").split(separator: " ").map(String.init),
                body: Data(buffer: body)
            )
            calls.withLock { $0.append(call) }
            return Response(status: .init(code: answer.withLock { $0 }))
        }
        router.post("slow") { [self] request, _ -> Response in
            _ = try await request.body.collect(upTo: 1 << 20)
            try await Task.sleep(for: slowDelay.withLock { $0 })
            return Response(status: .ok)
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: Logger(label: "receiver"))
    }

    /// Standard Webhooks' verification: HMAC-SHA256 of "id.timestamp.body" under the secret's bytes.
    static func verifies(_ call: Call, secret: String) -> Bool {
        let key = SymmetricKey(data: Data(base64Encoded: String(secret.dropFirst("whsec_".count)))!)
        let expected =
            "v1,"
            + Data(HMAC<SHA256>.authenticationCode(for: Data("\(call.id).\(call.timestamp).".utf8) + call.body, using: key)).base64EncodedString()
        return call.signatures.contains(expected)
    }
}

/// #33 through auth's routes and a real receiver on a socket.
final class WebhookTests: XCTestCase {
    struct Setup: Sendable {
        let h: AuthHarness
        let receiver: WebhookReceiver
        let url: String
        let delivery: WebhookDelivery
        func admin(_ app: IssuedAPIKey? = nil) -> HTTPFields { EmailSettingsTests.admin(h, app: app ?? h.app) }
        func call(_ method: HTTPRequest.Method, _ path: String, _ json: String? = nil, app: IssuedAPIKey? = nil) async throws -> TestResponse {
            try await h.client.execute(
                uri: "/auth/v1/admin/webhooks" + path,
                method: method,
                headers: admin(app),
                body: json.map { ByteBuffer(string: $0) }
            ) {
                $0
            }
        }
        func createEndpoint(events: String = #"["*"]"#) async throws -> (id: String, secret: String) {
            let r = try await call(.post, "", #"{"url":"\#(url)","events":\#(events),"description":"game server"}"#)
            XCTAssertEqual(r.status, .created, String(buffer: r.body))
            let o = try r.json([String: JSONValue].self)
            guard case .object(let endpoint)? = o["endpoint"], case .string(let id)? = endpoint["id"], case .string(let secret)? = o["secret"] else {
                throw XCTSkip("no endpoint: \(o)")
            }
            return (id, secret)
        }
        /// Runs the sender until nothing is due (or 5 rounds).
        func drain() async throws { for _ in 0..<5 where try await delivery.runOnce() > 0 {} }
    }

    static func run(_ body: @Sendable (Setup) async throws -> Void) async throws {
        let receiver = WebhookReceiver()
        let port = try TestEnvironment.freePort()
        let group = ServiceGroup(configuration: .init(services: [receiver.application(port: port)], logger: Logger(label: "receiver")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // ENVIRONMENT=local: the receiver is http on loopback, as in the stack.
            try await AuthHarness.run(overrides: ["ENVIRONMENT": "local"]) { h in
                let box = SecretBox(key: try AuthService.dataKey(env: h.runtime.config.environment, signingKey: h.signerKey))
                let store = WebhookStore(db: h.runtime.db, box: box, logger: h.runtime.logger)
                let delivery = WebhookDelivery(
                    db: h.runtime.db,
                    store: store,
                    sender: WebhookSender(http: h.runtime.http, allowLoopback: true),
                    notice: DisabledEndpointMail(
                        mailer: h.mailer,
                        emails: EmailComposer(
                            settings: TenantSettings(
                                topic: "email_settings",
                                bootstrap: [:],
                                feed: h.runtime.changes,
                                load: { [:] }
                            ),
                            defaults: AuthSettings(environment: h.runtime.config.environment),
                            applications: PostgresApplicationRepository(db: h.runtime.db, logger: h.runtime.logger)
                        ),
                        logger: h.runtime.logger
                    ),
                    logger: h.runtime.logger
                )
                // Deliveries left by an earlier run (the unit database is shared) are not this test's.
                try await h.runtime.db.query("UPDATE webhook_deliveries SET status = 'cancelled' WHERE status IN ('pending', 'sending')")
                try await body(Setup(h: h, receiver: receiver, url: "http://127.0.0.1:\(port)/hook", delivery: delivery))
            }
            try await stopLocalServer(group, in: &tasks)
        }
    }

    /// A new account reaches the app's server as `user.created`, signed with the endpoint's
    /// secret, once (a second run of the sender sends nothing again), and the delivery is listed.
    func testANewUserIsDeliveredSignedOnce() async throws {
        try await Self.run { s in
            let (id, secret) = try await s.createEndpoint(events: #"["user.created","user.deleted"]"#)
            let user = try await s.h.registerEmail(uniqueEmail("hook"))
            try await s.drain()
            let calls = s.receiver.calls.withLock { $0 }
            XCTAssertEqual(calls.count, 1)
            guard let call = calls.first else { return }
            XCTAssertTrue(WebhookReceiver.verifies(call, secret: secret), "the signature does not verify")
            let event = try JSONDecoder().decode([String: JSONValue].self, from: call.body)
            XCTAssertEqual(event["type"], .string("user.created"))
            XCTAssertEqual(event["app_id"]?.stringValue?.lowercased(), s.h.app.appID.lowercasedString)
            XCTAssertEqual(event["id"]?.stringValue, call.id, "the body's id is the webhook-id, as sent")
            XCTAssertEqual(event["app_id"]?.stringValue, s.h.app.appID.lowercasedString)
            guard case .object(let data)? = event["data"] else { return XCTFail("no data") }
            XCTAssertEqual(data["user_id"], .string(user.user.id.lowercasedString))
            XCTAssertNil(data["email"], "no e-mail goes out")
            XCTAssertNotNil(event["version"])
            try await s.drain()
            XCTAssertEqual(s.receiver.calls.withLock { $0.count }, 1, "delivered twice")
            let listed = try await s.call(.get, "/\(id)/deliveries")
            XCTAssertEqual(listed.status, .ok)
            let rows = try listed.json([String: [[String: JSONValue]]].self)["deliveries"] ?? []
            XCTAssertEqual(rows.first?["status"], .string("delivered"))
            XCTAssertEqual(rows.first?["answer_code"], .int(200))
            XCTAssertEqual(rows.first?["attempts"], .int(1))
            // #47 the deliveries page: newest first, each page after the last one's id, no repeat.
            for _ in 0..<2 { _ = try await s.h.registerEmail(uniqueEmail("hook")) }
            try await s.drain()
            struct Page: Decodable {
                var deliveries: [[String: JSONValue]]
                var nextBefore: String?
                enum CodingKeys: String, CodingKey {
                    case deliveries
                    case nextBefore = "next_before"
                }
            }
            let first = try await s.call(.get, "/\(id)/deliveries?limit=2").json(Page.self)
            let cursor = try XCTUnwrap(first.nextBefore, "a full page says where the next starts")
            let second = try await s.call(.get, "/\(id)/deliveries?limit=2&before=\(cursor)").json(Page.self)
            let ids = (first.deliveries + second.deliveries).compactMap { $0["id"]?.intValue }
            XCTAssertEqual(ids.count, 3)
            XCTAssertEqual(ids, ids.sorted(by: >), "newest first, no repeat: \(ids)")
            XCTAssertNil(second.nextBefore, "the last page says so")
            XCTAssertEqual(second.deliveries.first?["event_id"], rows.first?["event_id"], "the oldest is the first user's")
            for bad in ["before=x", "before=0", "before=-1"] {
                do {
                    let value = try await s.call(.get, "/\(id)/deliveries?\(bad)").status
                    XCTAssertEqual(value, .unprocessableContent, bad)
                }
            }
        }
    }

    /// A receiver down answers 503 three times; the delivery is tried again on the schedule and
    /// arrives on the 4th attempt, the same event id each time. Then a 410 disables the endpoint.
    func testAReceiverDownGetsItLaterAndA410DisablesTheEndpoint() async throws {
        try await Self.run { s in
            let (id, secret) = try await s.createEndpoint(events: #"["user.created"]"#)
            s.receiver.answer.withLock { $0 = 503 }
            _ = try await s.h.registerEmail(uniqueEmail("hook"))
            for attempt in 1...3 {
                do {
                    let value = try await s.delivery.runOnce()
                    XCTAssertEqual(value, 1, "attempt \(attempt)")
                }
                do {
                    let value = try await s.delivery.runOnce()
                    XCTAssertEqual(value, 0, "tried again before its time")
                }
                // Time passes: the retry falls due (5 s, then 5 min, then 30 min).
                try await s.h.runtime.db.query(
                    "UPDATE webhook_deliveries SET next_attempt_at = now() WHERE endpoint_id = \(UUID(uuidString: id)!) AND status = 'pending'"
                )
            }
            s.receiver.answer.withLock { $0 = 200 }
            try await s.drain()
            let calls = s.receiver.calls.withLock { $0 }
            XCTAssertEqual(calls.count, 4)
            XCTAssertEqual(Set(calls.map(\.id)).count, 1, "one event, one webhook-id")
            XCTAssertTrue(calls.allSatisfy { WebhookReceiver.verifies($0, secret: secret) })
            let rows = try await s.call(.get, "/\(id)/deliveries").json([String: [[String: JSONValue]]].self)["deliveries"] ?? []
            XCTAssertEqual(rows.first?["attempts"], .int(4))
            XCTAssertEqual(rows.first?["status"], .string("delivered"))
            // #45: each attempt, not only the last answer, in order, with its time and latency.
            guard case .array(let history)? = rows.first?["history"] else { return XCTFail("no history: \(rows)") }
            let attempts = history.compactMap { v -> (JSONValue?, JSONValue?, JSONValue?)? in
                guard case .object(let o) = v else { return nil }
                XCTAssertNotNil(o["sent_at"]?.stringValue, "an attempt without its time")
                XCTAssertNotNil(o["latency_ms"], "an answered attempt without its latency")
                return (o["attempt"], o["answer_code"], o["outcome"])
            }
            XCTAssertEqual(attempts.map(\.0), [.int(1), .int(2), .int(3), .int(4)])
            XCTAssertEqual(attempts.map(\.1), [.int(503), .int(503), .int(503), .int(200)])
            XCTAssertEqual(attempts.map(\.2), [.string("retry"), .string("retry"), .string("retry"), .string("delivered")])

            s.receiver.answer.withLock { $0 = 410 }
            _ = try await s.h.registerEmail(uniqueEmail("hook"))
            try await s.drain()
            let shown = try await s.call(.get, "/\(id)").json([String: JSONValue].self)
            XCTAssertEqual(shown["disabled"], .bool(true))
            XCTAssertEqual(shown["disabled_reason"], .string("gone (HTTP 410)"))
            // Nothing more goes to a disabled endpoint.
            s.receiver.answer.withLock { $0 = 200 }
            _ = try await s.h.registerEmail(uniqueEmail("hook"))
            try await s.drain()
            XCTAssertEqual(s.receiver.calls.withLock { $0.count }, 5)
            // Enabled again by the operator, new events flow.
            do {
                let value = try await s.call(.patch, "/\(id)", #"{"disabled":false}"#).status
                XCTAssertEqual(value, .ok)
            }
            _ = try await s.h.registerEmail(uniqueEmail("hook"))
            try await s.drain()
            XCTAssertEqual(s.receiver.calls.withLock { $0.count }, 6)
        }
    }

    /// Rotation: for 24 h the old and the new secret both sign; the operator sees the overlap.
    func testRotationSignsWithBothSecretsDuringTheOverlap() async throws {
        try await Self.run { s in
            let (id, old) = try await s.createEndpoint()
            let rotated = try await s.call(.post, "/\(id)/rotate-secret")
            XCTAssertEqual(rotated.status, .ok, String(buffer: rotated.body))
            guard case .string(let new)? = try rotated.json([String: JSONValue].self)["secret"] else { return XCTFail("no new secret") }
            XCTAssertNotEqual(new, old)
            _ = try await s.h.registerEmail(uniqueEmail("hook"))
            try await s.drain()
            guard let call = s.receiver.calls.withLock({ $0.last }) else { return XCTFail("nothing delivered") }
            XCTAssertEqual(call.signatures.count, 2)
            XCTAssertTrue(WebhookReceiver.verifies(call, secret: new))
            XCTAssertTrue(WebhookReceiver.verifies(call, secret: old))
            // After the overlap only the new one signs.
            try await s.h.runtime.db.query(
                "UPDATE webhook_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = \(UUID(uuidString: id)!)"
            )
            _ = try await s.h.registerEmail(uniqueEmail("hook"))
            try await s.drain()
            guard let after = s.receiver.calls.withLock({ $0.last }) else { return XCTFail("nothing delivered") }
            XCTAssertEqual(after.signatures.count, 1)
            XCTAssertTrue(WebhookReceiver.verifies(after, secret: new))
            XCTAssertFalse(WebhookReceiver.verifies(after, secret: old))
        }
    }

    /// The other services' events come through `POST /internal/events`, once per id; an
    /// endpoint that does not want a type gets nothing of it.
    func testAServicesEventIsDeliveredOncePerID() async throws {
        try await Self.run { s in
            _ = try await s.createEndpoint(events: #"["subscription.refunded"]"#)
            let eventID = UUID()
            let body =
                #"{"type":"subscription.refunded","id":"\#(eventID)","app_id":"\#(s.h.app.appID)","version":7,"data":{"user_id":"u1","subscription_id":"s1"}}"#
            let headers: HTTPFields = [
                .authorization: "Bearer local-internal-subscription", .xServiceName: "subscription", .contentType: "application/json",
            ]
            let first = try await s.h.client.execute(uri: "/internal/events", method: .post, headers: headers, body: ByteBuffer(string: body)) { $0 }
            XCTAssertEqual(first.status, .accepted, String(buffer: first.body))
            let again = try await s.h.client.execute(uri: "/internal/events", method: .post, headers: headers, body: ByteBuffer(string: body)) { $0 }
            XCTAssertEqual(again.status, .ok)
            _ = try await s.h.registerEmail(uniqueEmail("hook"))  // user.created: not wanted
            try await s.drain()
            let calls = s.receiver.calls.withLock { $0 }
            XCTAssertEqual(calls.count, 1)
            XCTAssertEqual(calls.first?.id, eventID.lowercasedString)
            let event = try JSONDecoder().decode([String: JSONValue].self, from: calls.first?.body ?? Data())
            XCTAssertEqual(event["version"], .int(7))
            // Bad input: an unknown type, a missing field.
            let unknown = try await s.h.client.execute(
                uri: "/internal/events",
                method: .post,
                headers: headers,
                body: ByteBuffer(string: body.replacingOccurrences(of: "subscription.refunded", with: "subscription.exploded"))
            ) { $0 }
            XCTAssertEqual(unknown.status, .unprocessableContent)
            XCTAssertEqual(try unknown.envelope().field, "type")
            let missing = try await s.h.client.execute(
                uri: "/internal/events",
                method: .post,
                headers: headers,
                body: ByteBuffer(string: #"{"type":"user.created","app_id":"\#(s.h.app.appID)","version":1,"data":{}}"#)
            ) { $0 }
            XCTAssertEqual(missing.status, .badRequest)
            XCTAssertEqual(try missing.envelope().field, "id")
            let anonymous = try await s.h.client.execute(
                uri: "/internal/events",
                method: .post,
                headers: [.contentType: "application/json"],
                body: ByteBuffer(string: body)
            ) { $0 }
            XCTAssertEqual(anonymous.status, .unauthorized)
            let negative = try await s.h.client.execute(
                uri: "/internal/events",
                method: .post,
                headers: headers,
                body: ByteBuffer(string: body.replacingOccurrences(of: #""version":7"#, with: #""version":-1"#))
            ) { $0 }
            XCTAssertEqual(negative.status, .unprocessableContent)
            XCTAssertEqual(try negative.envelope().field, "version")
            let wrongData = try await s.h.client.execute(
                uri: "/internal/events",
                method: .post,
                headers: headers,
                body: ByteBuffer(string: #"{"type":"user.created","id":"\#(UUID())","app_id":"\#(s.h.app.appID)","version":1,"data":[1]}"#)
            ) { $0 }
            XCTAssertEqual(wrongData.status, .badRequest)
            XCTAssertEqual(try wrongData.envelope().field, "data")
        }
    }

    /// One slow endpoint (each call hangs 5 s) holds its own slots only: another endpoint of the
    /// same app gets all its events while the slow one's are still in flight.
    func testASlowEndpointNeverDelaysAnother() async throws {
        try await Self.run { s in
            let slowURL = s.url.replacingOccurrences(of: "/hook", with: "/slow")
            let slow = try await s.call(.post, "", #"{"url":"\#(slowURL)","events":["*"]}"#)
            XCTAssertEqual(slow.status, .created)
            _ = try await s.createEndpoint(events: #"["user.created"]"#)
            for _ in 0..<20 { _ = try await s.h.registerEmail(uniqueEmail("hook")) }
            let started = ContinuousClock.now
            let running = Task { [delivery = s.delivery] in try await delivery.run() }
            while s.receiver.calls.withLock({ $0.count }) < 20 && ContinuousClock.now - started < .seconds(4) {
                try await Task.sleep(for: .milliseconds(20))
            }
            XCTAssertEqual(s.receiver.calls.withLock { $0.count }, 20, "the fast endpoint waited for the slow one")
            XCTAssertLessThan(ContinuousClock.now - started, .seconds(4), "before the slow endpoint's first answers")
            running.cancel()
            _ = await running.result
        }
    }

    /// An endpoint that has failed every attempt for 5 days is disabled and the app's support
    /// address is told, once.
    func testFiveDaysOfFailuresDisableTheEndpointAndTellTheOperator() async throws {
        try await Self.run { s in
            let (id, _) = try await s.createEndpoint(events: #"["user.created"]"#)
            s.receiver.answer.withLock { $0 = 500 }
            _ = try await s.h.registerEmail(uniqueEmail("hook"))
            let one = try await s.delivery.runOnce()
            XCTAssertEqual(one, 1)
            let notYet = try await s.call(.get, "/\(id)").json([String: JSONValue].self)
            XCTAssertEqual(notYet["disabled"], .bool(false), "one failure disables nothing")
            // Five days of failures pass.
            try await s.h.runtime.db.query(
                "UPDATE webhook_endpoints SET failing_since = now() - interval '5 days 1 minute' WHERE id = \(UUID(uuidString: id)!)"
            )
            try await s.h.runtime.db.query(
                "UPDATE webhook_deliveries SET next_attempt_at = now() WHERE endpoint_id = \(UUID(uuidString: id)!) AND status = 'pending'"
            )
            let mailsBefore = s.h.mailer.sent.withLock { $0.count }
            try await s.drain()
            let shown = try await s.call(.get, "/\(id)").json([String: JSONValue].self)
            XCTAssertEqual(shown["disabled"], .bool(true))
            XCTAssertEqual(shown["disabled_reason"], .string("failing for 5 days"))
            let mails = s.h.mailer.sent.withLock { Array($0.dropFirst(mailsBefore)) }
            XCTAssertEqual(mails.count, 1)
            XCTAssertTrue(mails.first?.text.contains(s.url) == true)
            XCTAssertTrue(mails.first?.subject.contains("webhook endpoint was disabled") == true)
        }
    }

    /// #45: every subset of the four optional fields of `PATCH /admin/webhooks/{id}` changes what
    /// it names and nothing else (a description alone was a 500: its absent `disabled` was bound
    /// as an untyped NULL); another app's operator gets 404 and changes nothing.
    func testEveryPartialEditOfAnEndpointWorks() async throws {
        try await Self.run { s in
            let (id, _) = try await s.createEndpoint(events: #"["user.created"]"#)
            let fields: [(String, String, JSONValue)] = [
                ("url", #""\#(s.url)?v=2""#, .string(s.url + "?v=2")),
                ("events", #"["user.deleted"]"#, .array([.string("user.deleted")])),
                ("description", #""edited""#, .string("edited")),
                ("disabled", "true", .bool(true)),
            ]
            var expected: [String: JSONValue] = [
                "url": .string(s.url), "events": .array([.string("user.created")]), "description": .string("game server"), "disabled": .bool(false),
            ]
            let original = expected
            for mask in 1..<(1 << fields.count) {
                let chosen = fields.indices.filter { mask & (1 << $0) != 0 }.map { fields[$0] }
                let body = "{" + chosen.map { #""\#($0.0)":\#($0.1)"# }.joined(separator: ",") + "}"
                // Another app's operator: unknown, nothing changed.
                let foreign = try await s.call(.patch, "/\(id)", body, app: s.h.otherApp)
                XCTAssertEqual(foreign.status, .notFound, body)
                XCTAssertEqual(try foreign.envelope().error, "not_found", body)
                let r = try await s.call(.patch, "/\(id)", body)
                XCTAssertEqual(r.status, .ok, "\(body): \(String(buffer: r.body))")
                for (name, _, value) in chosen { expected[name] = value }
                let shown = try await s.call(.get, "/\(id)").json([String: JSONValue].self)
                for (name, value) in expected { XCTAssertEqual(shown[name], value, "\(name) after \(body)") }
                XCTAssertEqual(shown["disabled_reason"] ?? .null, expected["disabled"] == .bool(true) ? .string("operator") : .null, body)
                // Back to the start, in one edit of all four.
                let reset = try await s.call(
                    .patch,
                    "/\(id)",
                    #"{"url":"\#(s.url)","events":["user.created"],"description":"game server","disabled":false}"#
                )
                XCTAssertEqual(reset.status, .ok)
                expected = original
            }
        }
    }

    /// The operator's routes: bad input named, at most 20 endpoints, another app's endpoint is
    /// unknown, nothing half-written.
    func testTheOperatorsRoutesRefuseBadInput() async throws {
        try await Self.run { s in
            let refused: [(String, HTTPResponse.Status, String)] = [
                (#"{"url":"ftp://x.example","events":["*"]}"#, .unprocessableContent, "url"),
                (#"{"url":"\#(s.url)","events":["nope"]}"#, .unprocessableContent, "events[0]"),
                (#"{"url":"\#(s.url)","events":[]}"#, .unprocessableContent, "events"),
                (#"{"url":"\#(s.url)"}"#, .badRequest, "events"),
                (#"{"url":42,"events":["*"]}"#, .badRequest, "url"),
                (#"{"url":"\#(s.url)","events":["*"],"description":"\#(String(repeating: "x", count: 501))"}"#, .unprocessableContent, "description"),
            ]
            for (body, status, field) in refused {
                let r = try await s.call(.post, "", body)
                XCTAssertEqual(r.status, status, body)
                XCTAssertEqual(try r.envelope().field, field, body)
            }
            do {
                let value = try await s.call(.get, "").json([String: [JSONValue]].self)["endpoints"]?.count
                XCTAssertEqual(value, 0, "a refused endpoint was written")
            }
            let (id, _) = try await s.createEndpoint()
            // Another app's operator does not see it, cannot change or delete it.
            do {
                let value = try await s.call(.get, "/\(id)", app: s.h.otherApp).status
                XCTAssertEqual(value, .notFound)
            }
            do {
                let value = try await s.call(.patch, "/\(id)", #"{"disabled":true}"#, app: s.h.otherApp).status
                XCTAssertEqual(value, .notFound)
            }
            do {
                let value = try await s.call(.delete, "/\(id)", app: s.h.otherApp).status
                XCTAssertEqual(value, .notFound)
            }
            do {
                let value = try await s.call(.post, "/\(id)/rotate-secret", app: s.h.otherApp).status
                XCTAssertEqual(value, .notFound)
            }
            do {
                let value = try await s.call(.get, "/\(id)/deliveries", app: s.h.otherApp).status
                XCTAssertEqual(value, .notFound)
            }
            do {
                let value = try await s.call(.post, "/\(id)/deliveries/1/replay", app: s.h.otherApp).status
                XCTAssertEqual(value, .notFound)
            }
            // A change of the wrong type, or an oversized body, changes nothing.
            let wrongType = try await s.call(.patch, "/\(id)", #"{"disabled":"yes"}"#)
            XCTAssertEqual(wrongType.status, .badRequest)
            XCTAssertEqual(try wrongType.envelope().field, "disabled")
            let oversized = try await s.call(
                .post,
                "",
                #"{"url":"\#(s.url)","events":["*"],"description":"\#(String(repeating: "x", count: 1 << 20))"}"#
            )
            XCTAssertEqual(oversized.status, .contentTooLarge)
            XCTAssertEqual(try oversized.envelope().error, "payload_too_large")
            do {
                let value = try await s.call(.get, "/\(id)/deliveries?limit=0").status
                XCTAssertEqual(value, .unprocessableContent)
            }
            do {
                let value = try await s.call(.post, "/\(id)/deliveries/x/replay").status
                XCTAssertEqual(value, .unprocessableContent)
            }
            let shown = try await s.call(.get, "/\(id)").json([String: JSONValue].self)
            XCTAssertEqual(shown["disabled"], .bool(false), "the refused changes changed nothing")
            do {
                let value = try await s.call(.get, "").json([String: [JSONValue]].self)["endpoints"]?.count
                XCTAssertEqual(value, 1)
            }
            do {
                let value = try await s.call(.get, "/not-a-uuid").status
                XCTAssertEqual(value, .unprocessableContent)
            }
            do {
                let value = try await s.call(.get, "/\(UUID())/deliveries").status
                XCTAssertEqual(value, .notFound)
            }
            do {
                let value = try await s.call(.post, "/\(id)/deliveries/999999999/replay").status
                XCTAssertEqual(value, .notFound)
            }
            let unauthorized = try await s.h.client.execute(uri: "/auth/v1/admin/webhooks", method: .get, headers: s.h.headers()) { $0 }
            XCTAssertEqual(unauthorized.status, .unauthorized)
            for _ in 1..<(WebhookEndpointRules.maxEndpointsPerApp - 1) { _ = try await s.createEndpoint() }
            // The last place taken by three creations at once: one gets it (the count is taken
            // under the app's lock, in the creation's transaction), the other two are refused.
            let racing = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<3 { group.addTask { try await s.call(.post, "", #"{"url":"\#(s.url)","events":["*"]}"#).status } }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            XCTAssertEqual(racing.filter { $0 == .created }.count, 1, "\(racing)")
            XCTAssertEqual(racing.filter { $0 == .unprocessableContent }.count, 2, "\(racing)")
            var stored = 0
            for try await n in try await s.h.runtime.db.query(
                "SELECT count(*)::int FROM webhook_endpoints WHERE app_id = \(s.h.app.appID)",
                logger: s.h.runtime.logger
            ).decode(Int.self) { stored = n }
            XCTAssertEqual(stored, WebhookEndpointRules.maxEndpointsPerApp, "never more than the limit")
            let over = try await s.call(.post, "", #"{"url":"\#(s.url)","events":["*"]}"#)
            XCTAssertEqual(over.status, .unprocessableContent)
            XCTAssertEqual(try over.envelope().error, "too_many_endpoints")
            do {
                let value = try await s.call(.delete, "/\(id)").status
                XCTAssertEqual(value, .ok)
            }
            do {
                let value = try await s.call(.get, "/\(id)").status
                XCTAssertEqual(value, .notFound)
            }
        }
    }
}

/// `XCTAssertThrowsError` for an async expression (XCTest has none).
private func XCTAssertThrowsErrorAsync<T>(
    _ expression: @autoclosure () async throws -> T,
    _ message: String = "",
    file: StaticString = #filePath,
    line: UInt = #line
) async {
    do {
        _ = try await expression()
        XCTFail("expected an error: \(message)", file: file, line: line)
    } catch {}
}

import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import ServiceLifecycle
import SubscriptionDomain
import Synchronization
import TestSupport
import XCTest
import _CryptoExtras

@testable import SubscriptionService

/// A local Google: the OAuth token endpoint (checks the service account's RS256 JWT) and the
/// Android Publisher API (subscriptionsv2.get, acknowledge).
final class FakeGooglePlay: Sendable {
    let port: Int
    let serviceKey: _RSA.Signing.PrivateKey
    final class State: Sendable {
        let purchases = Mutex([String: String]())  // token -> JSON body
        let acknowledged = Mutex([String]())
        let tokensIssued = Mutex(0)
        let failAcknowledge = Mutex(1)  // the first acknowledge fails, to prove the retry
    }
    let state = State()

    init() throws {
        port = try TestEnvironment.freePort()
        serviceKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
    }
    var base: String { "http://127.0.0.1:\(port)" }

    func config(app: UUID) -> String {
        let pem = serviceKey.pemRepresentation.replacingOccurrences(of: "\n", with: "\\n")
        return
            #"{"\#(app.uuidString)":{"package_name":"com.quiz.android","service_account_email":"play@quiz.iam.gserviceaccount.com","private_key_pem":"\#(pem)"}}"#
    }

    func purchase(token: String, state: String, expiry: Date, ack: String = "ACKNOWLEDGEMENT_STATE_PENDING", product: String = "premium_monthly") {
        let f = ISO8601DateFormatter()
        let body =
            #"{"kind":"androidpublisher#subscriptionPurchaseV2","subscriptionState":"\#(state)","acknowledgementState":"\#(ack)","latestOrderId":"GPA.\#(token)","startTime":"\#(f.string(from: Date() - 60))","lineItems":[{"productId":"\#(product)","expiryTime":"\#(f.string(from: expiry))"}]}"#
        self.state.purchases.withLock { $0[token] = body }
    }

    func jwtIsValid(_ assertion: String) -> Bool {
        let parts = assertion.split(separator: ".")
        guard parts.count == 3, let sig = Base64URL.decode(parts[2]), let claims = Base64URL.decode(parts[1]),
            let c = try? JSONSerialization.jsonObject(with: claims) as? [String: Any]
        else { return false }
        let ok = serviceKey.publicKey.isValidSignature(
            _RSA.Signing.RSASignature(rawRepresentation: sig),
            for: SHA256.hash(data: Data((parts[0] + "." + parts[1]).utf8)),
            padding: .insecurePKCS1v1_5
        )
        return ok && c["iss"] as? String == "play@quiz.iam.gserviceaccount.com"
            && c["scope"] as? String == "https://www.googleapis.com/auth/androidpublisher" && c["aud"] as? String == "\(base)/token"
    }

    func application() -> some ApplicationProtocol {
        let router = Router()
        let state = self.state
        router.post("token") { request, _ -> Response in
            let body = String(buffer: try await request.body.collect(upTo: 1 << 16))
            let assertion = body.components(separatedBy: "assertion=").last ?? ""
            guard body.contains("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"), self.jwtIsValid(assertion) else {
                return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: #"{"error":"invalid_grant"}"#)))
            }
            state.tokensIssued.withLock { $0 += 1 }
            return Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: #"{"access_token":"ya29.test","expires_in":3599,"token_type":"Bearer"}"#))
            )
        }
        router.get("androidpublisher/v3/applications/:pkg/purchases/subscriptionsv2/tokens/:token") { request, context -> Response in
            guard request.headers[.authorization] == "Bearer ya29.test" else { return Response(status: .unauthorized) }
            guard let token = context.parameters.get("token"), let body = state.purchases.withLock({ $0[token] }) else {
                return Response(status: .notFound, body: .init(byteBuffer: ByteBuffer(string: #"{"error":{"code":404}}"#)))
            }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        router.post("androidpublisher/v3/applications/:pkg/purchases/subscriptions/:product/tokens/:tokenAction") { request, context -> Response in
            guard request.headers[.authorization] == "Bearer ya29.test", let t = context.parameters.get("tokenAction"), t.hasSuffix(":acknowledge")
            else {
                return Response(status: .badRequest)
            }
            if state.failAcknowledge.withLock({ n in
                defer { n -= 1 }
                return n > 0
            }) {
                return Response(status: .serviceUnavailable)
            }
            state.acknowledged.withLock { $0.append(String(t.dropLast(":acknowledge".count))) }
            return Response(status: .ok)
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
    }
}

final class GooglePlayTests: XCTestCase {
    static func post(_ h: PurchaseTests.H, _ user: UUID, token: String) async throws -> TestResponse {
        try await h.client.execute(
            uri: "/subscription/v1/subscriptions/purchase",
            method: .post,
            headers: try h.headers(user),
            body: ByteBuffer(string: #"{"store":"google","purchase_token":"\#(token)","product_id":"premium_monthly"}"#)
        ) { $0 }
    }

    func testPurchaseMapsStatesAndAcknowledgesThroughARetriedJob() async throws {
        let google = try FakeGooglePlay()
        try await withThrowingTaskGroup(of: Void.self) { group in
            let server = ServiceGroup(configuration: .init(services: [google.application()], logger: TestEnvironment.logger))
            group.addTask { try await server.run() }
            let urls = ["GOOGLE_PLAY_API_URL": google.base, "GOOGLE_OAUTH_TOKEN_URL": "\(google.base)/token"]
            // Configuration is per app: without it, Google purchases are refused clearly.
            try await PurchaseTests.run(overrides: urls) { h in
                let token = "tok-\(UUID().uuidString.prefix(8))"
                google.purchase(token: token, state: "SUBSCRIPTION_STATE_ACTIVE", expiry: Date() + 30 * 86400)
                let unconfigured = try await Self.post(h, UUID(), token: token)
                XCTAssertEqual(unconfigured.status, .unprocessableContent)
            }
            try await PurchaseTests.run(overrides: urls, perApp: { ["GOOGLE_PLAY_APPS": google.config(app: $0)] }) { h in
                let user = UUID()
                let token = "tok-\(UUID().uuidString.prefix(8))"
                google.purchase(token: token, state: "SUBSCRIPTION_STATE_ACTIVE", expiry: Date() + 30 * 86400)
                let r = try await Self.post(h, user, token: token)
                XCTAssertEqual(r.status, .created, String(buffer: r.body))
                XCTAssertEqual(google.state.tokensIssued.withLock { $0 }, 1)
                let again = try await Self.post(h, user, token: token)
                XCTAssertEqual(again.status, .ok, "the same purchase again: the existing subscription")
                // Canceled at Google: still premium until the expiry, without renewal.
                let canceled = "tok-\(UUID().uuidString.prefix(8))"
                google.purchase(token: canceled, state: "SUBSCRIPTION_STATE_CANCELED", expiry: Date() + 5 * 86400)
                let c = try await Self.post(h, UUID(), token: canceled)
                XCTAssertEqual(c.status, .created)
                XCTAssertTrue(String(buffer: c.body).contains(#""auto_renew":false"#))
                XCTAssertTrue(String(buffer: c.body).contains(#""activated":true"#))
                XCTAssertEqual(google.state.tokensIssued.withLock { $0 }, 1, "the access token is cached")
                // Pending payment, expired, unknown token.
                let pending = "tok-\(UUID().uuidString.prefix(8))"
                google.purchase(token: pending, state: "SUBSCRIPTION_STATE_PENDING", expiry: Date() + 30 * 86400)
                let p = try await Self.post(h, UUID(), token: pending)
                XCTAssertEqual(p.status, .conflict)
                let expired = "tok-\(UUID().uuidString.prefix(8))"
                google.purchase(token: expired, state: "SUBSCRIPTION_STATE_EXPIRED", expiry: Date() - 86400)
                let e = try await Self.post(h, UUID(), token: expired)
                XCTAssertEqual(e.status, .badRequest)
                let unknown = try await Self.post(h, UUID(), token: "nope")
                XCTAssertEqual(unknown.status, .badRequest)
                XCTAssertEqual(try unknown.envelope().error, "invalid_purchase_token")

                // The acknowledgement job, written with the subscription: the first try fails,
                // the retry (after its backoff) succeeds.
                let jobs = try await h.scalar("SELECT count(*)::int FROM subscription.jobs WHERE unique_key = 'ack:\(token)'")
                XCTAssertEqual(jobs, 1)
                let runtime = TestEnvironment.runtime(.subscription, migrations: try SubscriptionService.migrations(), clock: h.clock)
                let configs = TenantSettings(
                    topic: "store_settings",
                    bootstrap: try GooglePlayConfig.parse(google.config(app: h.app)),
                    feed: runtime.changes
                ) { [:] }
                try await withPostgres(runtime.db) { db in
                    let client = GooglePlayClient(http: runtime.http, apiBase: google.base, tokenURL: "\(google.base)/token")
                    let worker = JobWorker(
                        queue: JobQueue(client: db, queue: GoogleAcknowledgeJob.queue, logger: runtime.logger, clock: h.clock),
                        handlers: [GoogleAcknowledgeJob.kind: GoogleAcknowledgeJob.handler(client: client, configs: configs, clock: h.clock)],
                        backoff: Backoff(base: .seconds(30), cap: .seconds(60))
                    )
                    for _ in 0..<3 { try await worker.runOnce() }
                    h.clock.advance(by: 120)
                    for _ in 0..<5 { try await worker.runOnce() }
                }
                XCTAssertTrue(google.state.acknowledged.withLock { $0 }.contains(token))
            }
            try await stopLocalServer(server, in: &group)
        }
    }
}

/// Real-time developer notifications (Pub/Sub push): re-read from Google, once per message.
final class GooglePubSubTests: XCTestCase {
    static func push(
        _ h: PurchaseTests.H,
        messageID: String,
        token: String,
        type: Int,
        pushToken: String = "push-secret"
    ) async throws -> TestResponse {
        let data = Data(
            #"{"version":"1.0","packageName":"com.quiz.android","eventTimeMillis":"1","subscriptionNotification":{"version":"1.0","notificationType":\#(type),"purchaseToken":"\#(token)","subscriptionId":"premium_monthly"}}"#
                .utf8
        ).base64EncodedString()
        return try await h.client.execute(
            uri: "/subscription/v1/webhooks/google?token=\(pushToken)",
            method: .post,
            headers: [.contentType: "application/json"],
            body: ByteBuffer(string: #"{"message":{"data":"\#(data)","messageId":"\#(messageID)"},"subscription":"projects/p/subscriptions/s"}"#)
        ) { $0 }
    }

    func testPushReReadsGoogleAndReplaysChangeNothing() async throws {
        let google = try FakeGooglePlay()
        try await withThrowingTaskGroup(of: Void.self) { group in
            let server = ServiceGroup(configuration: .init(services: [google.application()], logger: TestEnvironment.logger))
            group.addTask { try await server.run() }
            let overrides = [
                "GOOGLE_PLAY_API_URL": google.base, "GOOGLE_OAUTH_TOKEN_URL": "\(google.base)/token", "GOOGLE_PUBSUB_TOKEN": "push-secret",
            ]
            try await PurchaseTests.run(overrides: overrides, perApp: { ["GOOGLE_PLAY_APPS": google.config(app: $0)] }) { h in
                let user = UUID()
                let token = "tok-\(UUID().uuidString.prefix(8))"
                google.purchase(token: token, state: "SUBSCRIPTION_STATE_ACTIVE", expiry: Date() + 30 * 86400)
                let bought = try await GooglePlayTests.post(h, user, token: token)
                XCTAssertEqual(bought.status, .created)
                // Google says the subscription is on hold now; the push only names the token.
                google.purchase(token: token, state: "SUBSCRIPTION_STATE_ON_HOLD", expiry: Date() - 60)
                let messageID = "msg-\(UUID())"
                for i in 0..<10 {
                    let r = try await Self.push(h, messageID: messageID, token: token, type: 5)
                    XCTAssertEqual(r.status, .ok)
                    XCTAssertTrue(String(buffer: r.body).contains(i == 0 ? "applied" : "duplicate"))
                }
                let events = try await h.scalar(
                    "SELECT count(*)::int FROM subscription.subscription_events WHERE user_id = '\(user)' AND event_type = 'google_notification'"
                )
                XCTAssertEqual(events, 1, "ten deliveries, one change")
                let me = try await h.client.execute(uri: "/subscription/v1/subscriptions/me", method: .get, headers: try h.headers(user)) { $0 }
                XCTAssertTrue(String(buffer: me.body).contains(#""is_premium":false"#))
                let told = try await h.scalar(
                    "SELECT count(*)::int FROM subscription.outbox WHERE path LIKE '/internal/users/\(user.uuidString.lowercased())/status%' AND body->>'status' = 'free'"
                )
                XCTAssertEqual(told, 1)
                // A wrong push token, an undecodable message.
                let forged = try await Self.push(h, messageID: "m-\(UUID())", token: token, type: 5, pushToken: "guess")
                XCTAssertEqual(forged.status, .unauthorized)
                let garbage = try await h.client.execute(
                    uri: "/subscription/v1/webhooks/google?token=push-secret",
                    method: .post,
                    headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"message":{"data":"bm90IGpzb24=","messageId":"x"}}"#)
                ) { $0 }
                XCTAssertEqual(garbage.status, .badRequest)
            }
            try await stopLocalServer(server, in: &group)
        }
    }
}

import AdsDomain
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import Synchronization
import TestSupport
import WireTypes
import XCTest

@testable import AdsService

/// A stand-in for the subscription service's internal route credits/earn (
/// idempotent on the reference as the real one is), which the test can make slow or failing,
/// plus AdMob's verifier-keys document signed with a P-256 key the test generates.
final class FakeUpstream: Sendable {
    enum Mode: Sendable {
        case up
        case slow(Duration)
        case failing
    }
    let port: Int
    let mode = Mutex(Mode.up)
    /// Credits per (app, user), and the references already credited.
    let balances = Mutex([String: Int]())
    let references = Mutex([String: CreditEarnRequest]())
    let earnCalls = Mutex(0)
    let admobKey = P256.Signing.PrivateKey()
    let admobKeyID: Int64 = 3_335_741_209
    let keyFetches = Mutex(0)
    /// Keys AdMob published later (a rotation), by key id.
    let rotatedKeys = Mutex([Int64: P256.Signing.PrivateKey]())

    init(port: Int? = nil) throws { self.port = try port ?? TestEnvironment.freePort() }

    var base: String { "http://127.0.0.1:\(port)" }

    func balance(_ app: UUID, _ user: UUID) -> Int { balances.withLock { $0["\(app):\(user)"] ?? 0 } }
    /// Credits granted to one app (the unit database's outbox is shared by every test).
    func totalCredited(app: UUID) -> Int { references.withLock { $0.values.filter { $0.appID == app }.reduce(0) { $0 + $1.amount } } }

    func application() -> some ApplicationProtocol {
        let router = Router()
        router.post("internal/credits/earn") { request, _ -> Response in
            self.earnCalls.withLock { $0 += 1 }
            switch self.mode.withLock({ $0 }) {
            case .failing: return Response(status: .serviceUnavailable)
            case .slow(let d): try await Task.sleep(for: d)
            case .up: break
            }
            guard request.headers[.authorization] == "Bearer local-internal-ads", request.headers[.xServiceName] == "ads" else {
                return Response(status: .unauthorized)
            }
            let body = try JSON.decoder.decode(CreditEarnRequest.self, from: Data(buffer: try await request.body.collect(upTo: 65536)))
            let key = "\(body.appID):\(body.userID)"
            let balance: Int = self.references.withLock { refs in
                let ref = "\(body.appID)|\(body.source)|\(body.referenceID)"
                if refs[ref] == nil {
                    refs[ref] = body
                    return self.balances.withLock {
                        $0[key, default: 0] += body.amount
                        return $0[key]!
                    }
                }
                return self.balances.withLock { $0[key] ?? 0 }
            }
            return Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: #"{"credited":true,"balance":\#(balance)}"#))
            )
        }
        router.get("admob/verifier-keys.json") { _, _ -> Response in
            self.keyFetches.withLock { $0 += 1 }
            let pem = self.admobKey.publicKey.pemRepresentation.replacingOccurrences(of: "\n", with: "\\n")
            let b64 = self.admobKey.publicKey.derRepresentation.base64EncodedString()
            let rotated = self.rotatedKeys.withLock { $0 }.map { id, key in
                #",{"keyId":\#(id),"base64":"\#(key.publicKey.derRepresentation.base64EncodedString())"}"#
            }.joined()
            return Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: .init(
                    byteBuffer: ByteBuffer(
                        string: #"{"keys":[{"keyId":\#(self.admobKeyID),"pem":"\#(pem)","base64":"\#(b64)"}\#(rotated)]}"#
                    )
                )
            )
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
    }

    /// A callback as AdMob sends it: the query up to `&signature=` signed, web-safe base64 DER.
    func ssvQuery(adRequest: UUID, user: UUID, transaction: String, key: P256.Signing.PrivateKey? = nil, keyID: Int64? = nil) throws -> String {
        let message =
            "ad_network=5450213213286189855&ad_unit=1234567890&custom_data=\(adRequest.uuidString.lowercased())"
            + "&reward_amount=1&reward_item=credits&timestamp=1700000000000&transaction_id=\(transaction)&user_id=\(user.uuidString.lowercased())"
        let signature = try (key ?? admobKey).signature(for: Data(message.utf8))
        return message + "&signature=" + Base64URL.encode(signature.derRepresentation) + "&key_id=\(keyID ?? admobKeyID)"
    }
}

struct AdsHarness: Sendable {
    struct AllowAll: AppVerifier { func verify(appID: UUID, apiKey: String) async throws -> Bool { apiKey == "good" } }

    let client: any TestClientProtocol
    let runtime: ServiceRuntime
    let signer: AccessTokenSigner
    let app: UUID
    let clock: MovableClock
    let upstream: FakeUpstream

    func token(_ user: UUID, app: UUID? = nil) throws -> String {
        let now = Int(clock.now().timeIntervalSince1970)
        return try signer.sign(
            AccessTokenClaims(
                userID: user,
                appID: app ?? self.app,
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

    func headers(_ user: UUID, country: String? = nil) throws -> HTTPFields {
        var h: HTTPFields = [
            .xAppID: app.uuidString, .xAPIKey: "good", .authorization: "Bearer \(try token(user))",
            .contentType: "application/json",
        ]
        if let country { h[.xCountryCode] = country }
        return h
    }

    var admin: HTTPFields {
        [.xAppID: app.uuidString, .xAPIKey: "good", .authorization: "Bearer local-admin-token", .contentType: "application/json"]
    }

    func call(
        _ method: HTTPRequest.Method,
        _ path: String,
        user: UUID? = nil,
        json: String? = nil,
        headers: HTTPFields? = nil
    ) async throws -> TestResponse {
        let h = try headers ?? (user.map { try self.headers($0) } ?? admin)
        return try await client.execute(uri: "/ads/v1" + path, method: method, headers: h, body: json.map { ByteBuffer(string: $0) }) { $0 }
    }

    func provider(_ name: String = "admob", priority: Int = 1, verification: String = "client", duration: Int = 30, ecpm: Double = 10) async throws {
        let r = try await call(
            .put,
            "/admin/providers/\(name)",
            json: """
                {"priority":\(priority),"rewarded_unit_id":"ca-app-pub-1/\(name)-rewarded","interstitial_unit_id":"ca-app-pub-1/\(name)-inter",
                 "ad_duration_seconds":\(duration),"verification":"\(verification)","ecpm_estimate_usd":\(ecpm)}
                """
        )
        XCTAssertEqual(r.status, .ok, String(buffer: r.body))
    }

    func consent(_ user: UUID, personalized: Bool = true, underAge: Bool = false, country: String = "FR") async throws {
        let r = try await call(
            .post,
            "/ads/consent",
            user: user,
            json: """
                {"consent_personalized_ads":\(personalized),"consent_data_sharing":\(personalized),"age_gate_passed":true,"is_under_age":\(underAge),"country":"\(country)"}
                """
        )
        XCTAssertEqual(r.status, .ok, String(buffer: r.body))
    }

    /// Subscription tells this replica the user is premium (as its outbox does).
    func makePremium(_ user: UUID, version: Int64 = 1) async throws {
        let r = try await SubscriptionFacts.push(client, app: app, user: user, premium: true, version: version)
        XCTAssertEqual(r.status, .ok, String(buffer: r.body))
    }

    func available(_ user: UUID, _ type: String = "rewarded") async throws -> [String: JSONValue] {
        let r = try await call(.get, "/ads/available?ad_type=\(type)&placement=earn_credits", user: user)
        XCTAssertEqual(r.status, .ok, String(buffer: r.body))
        return try r.json([String: JSONValue].self)
    }

    /// `POST /ads/request`; returns the ad request id, or nil with the response when refused.
    func request(_ user: UUID, _ type: String = "rewarded", placement: String = "earn_credits") async throws -> (UUID?, TestResponse) {
        let r = try await call(
            .post,
            "/ads/request",
            user: user,
            json: #"{"ad_type":"\#(type)","placement":"\#(placement)","provider_preference":"admob"}"#
        )
        guard r.status == .created else { return (nil, r) }
        let id = try r.json([String: JSONValue].self)["ad_request_id"]
        guard case .string(let s)? = id else { return (nil, r) }
        return (UUID(uuidString: s), r)
    }

    /// `POST /ads/{id}/impression` (shown) then `complete`, as the SDK reports them; with
    /// `impression: false` the completion comes alone (an ad never reported on screen).
    func complete(
        _ user: UUID,
        _ id: UUID,
        completed: Bool = true,
        ms: Int = 30500,
        revenue: Double? = nil,
        impression: Bool = true
    ) async throws -> TestResponse {
        if impression {
            let shown = try await call(.post, "/ads/\(id)/impression", user: user, json: #"{"loaded":true,"shown":true,"load_time_ms":800}"#)
            XCTAssertEqual(shown.status, .ok, String(buffer: shown.body))
        }
        let revenuePart = revenue.map { #","revenue_usd":\#($0)"# } ?? ""
        return try await call(
            .post,
            "/ads/\(id)/complete",
            user: user,
            json: #"{"completed":\#(completed),"clicked":false,"display_duration_ms":\#(ms)\#(revenuePart)}"#
        )
    }

    /// One full rewarded view after the previous one's cooldown: request, 31 s of watching,
    /// complete.
    func watch(_ user: UUID, revenue: Double? = nil) async throws -> [String: JSONValue] {
        clock.advance(by: 31)
        let (id, r) = try await request(user)
        guard let id else {
            XCTFail("request refused: \(String(buffer: r.body))")
            return [:]
        }
        clock.advance(by: 31)
        let c = try await complete(user, id, revenue: revenue)
        XCTAssertEqual(c.status, .ok, String(buffer: c.body))
        return try c.json([String: JSONValue].self)
    }

    /// Outbox rows of this test's app still waiting.
    func pendingRewards() async throws -> Int {
        try await count(
            "SELECT count(*)::int FROM ads.outbox WHERE status = 'pending' AND path = '/internal/credits/earn' AND lower(body->>'app_id') = '\(app.uuidString.lowercased())'"
        )
    }

    func count(_ sql: String) async throws -> Int {
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
            for try await n in try await db.query(PostgresQuery(unsafeSQL: sql)).decode(Int.self) { return n }
            return -1
        }
    }

    /// Runs the ads service in-process against the fake upstream (started unless `startUpstream`
    /// is false: then nothing listens on its port, as when subscription is down).
    static func run(startUpstream: Bool = true, overrides: [String: String] = [:], _ body: @Sendable (AdsHarness) async throws -> Void) async throws {
        let upstream = try FakeUpstream()
        let clock = MovableClock(Date(timeIntervalSince1970: 1_800_000_000 + Double(Int.random(in: 0..<1000)) * 86400 + 36000))
        let key = Curve25519.Signing.PrivateKey()
        let signer = AccessTokenSigner(privateKey: key)
        let runtime = TestEnvironment.runtime(
            .ads,
            migrations: try AdsService.migrations(),
            overrides: [
                "SUBSCRIPTION_URL": upstream.base, "ADMOB_VERIFIER_KEYS_URL": upstream.base + "/admob/verifier-keys.json",
                "RUN_WORKERS": "false", "REWARD_DELIVERY_TIMEOUT_MS": "1000",
            ].merging(overrides) { $1 },
            clock: clock
        )
        let app = try AdsService.buildApplication(
            runtime: runtime,
            appVerifier: AllowAll(),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [signer.jwk])), clock: clock)
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            let server = ServiceGroup(configuration: .init(services: startUpstream ? [upstream.application()] : [], logger: runtime.logger))
            if startUpstream {
                group.addTask { try await server.run() }
                try await waitForPort(upstream.port)
            }
            try await app.test(.router) { client in
                await runtime.readiness.waitUntilMigrated()
                try await body(AdsHarness(client: client, runtime: runtime, signer: signer, app: UUID(), clock: clock, upstream: upstream))
            }
            try await stopLocalServer(server, in: &group)
        }
    }

    /// A second replica: its own runtime, pool and change feed, the same database and clock;
    /// `body` gets its client and runtime once both replicas' feeds listen.
    func withSecondReplica(_ body: @Sendable (any TestClientProtocol, ServiceRuntime) async throws -> Void) async throws {
        let runtime2 = TestEnvironment.runtime(
            .ads,
            migrations: try AdsService.migrations(),
            overrides: [
                "SUBSCRIPTION_URL": upstream.base, "RUN_WORKERS": "false",
            ],
            clock: clock
        )
        let replica = try AdsService.buildApplication(
            runtime: runtime2,
            appVerifier: AdsHarness.AllowAll(),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [signer.jwk])), clock: clock)
        )
        try await replica.test(.router) { second in
            await runtime2.readiness.waitUntilMigrated()
            while runtime2.changes.livePeriod == nil || runtime.changes.livePeriod == nil { try await Task.sleep(for: .milliseconds(10)) }
            try await body(second, runtime2)
        }
    }

    static func waitForPort(_ port: Int) async throws {
        for _ in 0..<100 {
            let http = CurlHTTPClient(logger: TestEnvironment.logger)
            defer { http.shutdown() }
            if (try? await http.send(ServiceKit.HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/", timeout: .seconds(1)))) != nil { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTFail("port \(port) never opened")
    }
}

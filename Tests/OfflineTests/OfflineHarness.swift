import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import OfflineDomain
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import Synchronization
import TestSupport
import WireTypes
import XCTest

@testable import OfflineService

/// Local servers for what offline calls: auth's consents, the main
/// app's API that queued actions go to (idempotent on Idempotency-Key, as a real API is), and a
/// Nominatim-compatible geocoder. Each can be made to fail, be slow or answer 409.
final class FakeOfflineUpstreams: Sendable {
    enum SyncMode: Sendable, Equatable {
        case up
        case failFirst(Int)
        case slow(Duration)
        case conflict, reject
    }
    enum GeoMode: Sendable, Equatable {
        case up, failing
        case slow(Duration)
    }
    let port: Int
    let geolocationConsent = Mutex(Set<UUID>())
    let syncMode = Mutex(SyncMode.up)
    let geoMode = Mutex(GeoMode.up)
    /// Applied actions by Idempotency-Key, every delivery attempt (its client_action_id), the
    /// keys seen, and the calls refused for a missing or wrong signature.
    let applied = Mutex([String: String]())
    let attempts = Mutex([String]())
    let keys = Mutex([String]())
    let forged = Mutex(0)
    /// The secret version each app signs with (after rotations), and the URLs called.
    static let secretVersions = Mutex([String: Int]())
    let urls = Mutex([String]())
    /// The deployment's SYNC_SIGNING_KEY (the local default).
    static let signingKey = "local-sync-signing-key"

    /// The game server's check, written from docs/API.md (not with the service's code): the
    /// tenant's secret is hex HMAC-SHA256(key, "sync-signing:" + app id [+ ":" + version after a rotation]); the signature is hex
    /// HMAC-SHA256(secret, "<t>.<raw body>"), `t` within 300 s.
    static func signatureValid(_ header: String, body: Data, app: String, now: Date = Date()) -> Bool {
        let version = secretVersions.withLock { $0[app.lowercased()] ?? 1 }
        let info = "sync-signing:" + app.lowercased() + (version > 1 ? ":\(version)" : "")
        let secret = Data(
            HMAC<SHA256>.authenticationCode(
                for: Data(info.utf8),
                using: SymmetricKey(data: Data(signingKey.utf8))
            )
        ).map { String(format: "%02x", $0) }.joined()
        let parts = Dictionary(
            header.split(separator: ",").compactMap { p -> (String, String)? in
                let kv = p.split(separator: "=", maxSplits: 1)
                return kv.count == 2 ? (String(kv[0]), String(kv[1])) : nil
            },
            uniquingKeysWith: { a, _ in a }
        )
        guard let ts = parts["t"], let t = Double(ts), let v1 = parts["v1"], abs(now.timeIntervalSince1970 - t) <= 300 else { return false }
        var message = Data("\(ts).".utf8)
        message.append(body)
        let expected = Data(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Data(secret.utf8)))).map {
            String(format: "%02x", $0)
        }
        .joined()
        return expected == v1
    }
    let geocodeCalls = Mutex(0)
    let userAgents = Mutex([String]())

    init() throws { port = try TestEnvironment.freePort() }
    var base: String { "http://127.0.0.1:\(port)" }

    func json(_ s: String, _ status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: s)))
    }

    func application() -> some ApplicationProtocol {
        let router = Router()
        router.get("internal/users/:id/consents") { request, context -> Response in
            let user = context.parameters.get("id", as: UUID.self)!
            let app = request.uri.queryParameters.get("app_id")!
            let ok = self.geolocationConsent.withLock { $0.contains(user) }
            return self.json(
                #"{"app_id":"\#(app)","user_id":"\#(user)","geolocation":\#(ok),"personalized_ads":false,"analytics":false,"changed_at":"2026-01-01T00:00:00Z"}"#
            )
        }
        router.post("sync") { request, _ -> Response in
            let key = request.headers[.idempotencyKey] ?? ""
            let raw = String(buffer: try await request.body.collect(upTo: 1 << 20))
            let body = try JSONSerialization.jsonObject(with: Data(raw.utf8)) as? [String: Any] ?? [:]
            guard
                Self.signatureValid(
                    request.headers[HTTPField.Name("X-Signature")!] ?? "",
                    body: Data(raw.utf8),
                    app: body["app_id"] as? String ?? ""
                )
            else {
                self.forged.withLock { $0 += 1 }
                return self.json(#"{"error":"invalid_signature"}"#, .unauthorized)
            }
            self.keys.withLock { $0.append(key) }
            self.urls.withLock { $0.append(request.uri.description) }
            let mode = self.syncMode.withLock { m -> SyncMode in
                if case .failFirst(let n) = m {
                    m = n > 1 ? .failFirst(n - 1) : .up
                    return .failFirst(n)
                }
                return m
            }
            self.attempts.withLock { $0.append(body["client_action_id"] as? String ?? "") }
            switch mode {
            case .failFirst: return Response(status: .serviceUnavailable)
            case .slow(let d): try await Task.sleep(for: d)
            case .reject: return self.json(#"{"error":"question_not_found"}"#, .unprocessableContent)
            case .conflict where body["resolution"] == nil:
                return self.json(#"{"server_version":"7","server_data":{"score":7,"question_5":3,"timestamp":"server"}}"#, .conflict)
            default: break
            }
            let duplicate = self.applied.withLock { a -> Bool in
                if a[key] != nil { return true }
                a[key] = raw
                return false
            }
            return self.json(#"{"duplicate":\#(duplicate)}"#)
        }
        router.get("nominatim/reverse") { request, _ -> Response in
            self.geocodeCalls.withLock { $0 += 1 }
            self.userAgents.withLock { $0.append(request.headers[.userAgent] ?? "") }
            switch self.geoMode.withLock({ $0 }) {
            case .failing: return Response(status: .internalServerError)
            case .slow(let d): try await Task.sleep(for: d)
            case .up: break
            }
            return self.json(#"{"place_id":1,"address":{"city":"Paris","country":"France","country_code":"fr"}}"#)
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
    }
}

struct OfflineHarness: Sendable {
    struct AllowAll: AppVerifier { func verify(appID: UUID, apiKey: String) async throws -> Bool { apiKey == "good" } }

    var client: any TestClientProtocol
    let runtime: ServiceRuntime
    let signer: AccessTokenSigner
    let app: UUID
    let clock: MovableClock
    let upstream: FakeOfflineUpstreams
    let worker: JobWorker
    let downloadDeps: DownloadJob.Deps
    /// The last job id before this test: its drain waits for its own jobs only.
    let firstJob: Int64
    let overrides: [String: String]
    let upstreamTenants: TenantSettings<UpstreamSettings>

    /// A second replica of the service (its own runtime, pool, change feed and caches) on the
    /// same database; `body` gets this harness calling that replica.
    func withSecondReplica(_ body: @Sendable (OfflineHarness) async throws -> Void) async throws {
        let runtime2 = TestEnvironment.runtime(.offline, migrations: try OfflineService.migrations(), overrides: overrides, clock: clock)
        let app2 = try OfflineService.buildApplication(
            runtime: runtime2,
            appVerifier: AllowAll(),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [signer.jwk])), clock: clock)
        )
        try await app2.test(.router) { client in
            await runtime2.readiness.waitUntilMigrated()
            while runtime2.changes.livePeriod == nil || runtime.changes.livePeriod == nil { try await Task.sleep(for: .milliseconds(10)) }
            var other = self
            other.client = client
            try await body(other)
        }
    }

    func token(_ user: UUID, app: UUID? = nil, guest: Bool = false) throws -> String {
        let now = Int(clock.now().timeIntervalSince1970)
        return try signer.sign(
            AccessTokenClaims(
                userID: user,
                appID: app ?? self.app,
                email: nil,
                status: .free,
                isGuest: guest,
                issuer: "auth",
                issuedAt: now,
                expiresAt: now + 3600,
                jti: UUID().uuidString
            )
        )
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
        var h = headers ?? admin
        if let user { h[.authorization] = "Bearer \(try token(user))" }
        return try await client.execute(uri: "/offline/v1" + path, method: method, headers: h, body: json.map { ByteBuffer(string: $0) }) { $0 }
    }

    func obj(_ r: TestResponse) throws -> [String: JSONValue] { try r.json([String: JSONValue].self) }

    /// The service's upkeep (purges, expiry, anonymisation) as the service runs it, on this clock.
    func maintenance() -> OfflineMaintenance {
        OfflineMaintenance(
            db: runtime.db,
            catalog: CatalogStore(logger: runtime.logger),
            sync: SyncStore(logger: runtime.logger),
            locations: LocationStore(logger: runtime.logger),
            clock: clock,
            interval: .seconds(3600),
            logger: runtime.logger
        )
    }

    /// Publishes a category of `n` items; every 10th item is larger than 10 KB (gzip).
    func category(_ id: String, items n: Int, prefix: String? = nil) async throws {
        let c = try await call(.put, "/admin/categories/\(id)", json: #"{"name":"\#(id)","description":"demo"}"#)
        XCTAssertEqual(c.status, .ok, String(buffer: c.body))
        var start = 0
        while start < n {
            let batch = (start..<min(n, start + 500)).map { i -> String in
                let filler = i % 10 == 0 ? String(repeating: "Lorem ipsum geographica ", count: 600) : ""
                return
                    #"{"id":"\#(prefix ?? id)-\#(String(format: "%04d", i))","data":{"question":"Capital #\#(i)?","answer":\#(i % 4),"notes":"\#(filler)"}}"#
            }
            let r = try await call(.post, "/admin/categories/\(id)/items", json: #"{"upsert":[\#(batch.joined(separator: ","))]}"#)
            XCTAssertEqual(r.status, .ok, String(buffer: r.body))
            start += 500
        }
    }

    /// `POST /categories/download` for `user` (made premium first when asked); the job id.
    /// Subscription tells this replica the user is premium (as its outbox does).
    func makePremium(_ user: UUID, version: Int64 = 1) async throws {
        let r = try await SubscriptionFacts.push(client, app: app, user: user, premium: true, version: version)
        XCTAssertEqual(r.status, .ok, String(buffer: r.body))
    }

    func startDownload(_ user: UUID, _ categories: [String], premium: Bool = false) async throws -> UUID {
        if premium { try await makePremium(user) }
        let list = categories.map { "\"\($0)\"" }.joined(separator: ",")
        let r = try await call(.post, "/categories/download", user: user, json: #"{"category_ids":[\#(list)]}"#)
        XCTAssertEqual(r.status, .accepted, String(buffer: r.body))
        return try XCTUnwrap(UUID(uuidString: try obj(r).string("job_id") ?? ""))
    }

    /// Runs queued jobs until none of this test's is left, waiting for the ones scheduled
    /// within 40 s (a sync retry is a job scheduled for later).
    func drainJobs() async throws {
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline {
            if try await worker.runOnce() > 0 { continue }
            let soon = JSON.iso8601(max(clock.now(), Date()).addingTimeInterval(40))
            let waiting = try await count(
                """
                SELECT count(*)::int FROM offline.jobs WHERE queue = 'offline' AND id > \(firstJob) AND status IN ('pending', 'running')
                AND run_at < '\(soon)'::timestamptz
                """
            )
            if waiting == 0 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        XCTFail("jobs still waiting after 90 s")
    }

    func count(_ sql: String) async throws -> Int {
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
            for try await n in try await db.query(PostgresQuery(unsafeSQL: sql)).decode(Int.self) { return n }
            return -1
        }
    }

    static func run(
        syncUpstream: Bool = true,
        geocoder: Bool = true,
        settings extra: [String: String] = [:],
        _ body: @Sendable (OfflineHarness) async throws -> Void
    ) async throws {
        let upstream = try FakeOfflineUpstreams()
        let clock = MovableClock()
        let signer = AccessTokenSigner(privateKey: Curve25519.Signing.PrivateKey())
        var overrides = ["SUBSCRIPTION_URL": upstream.base, "AUTH_URL": upstream.base, "RUN_WORKERS": "false"]
        if syncUpstream { overrides["SYNC_UPSTREAMS"] = #"{"*":"\#(upstream.base)/sync"}"# }
        if geocoder { overrides["GEOCODER_URL"] = upstream.base + "/nominatim" }
        overrides.merge(extra) { _, new in new }
        let runtime = TestEnvironment.runtime(.offline, migrations: try OfflineService.migrations(), overrides: overrides, clock: clock)
        let settings = overrides
        let app = try OfflineService.buildApplication(
            runtime: runtime,
            appVerifier: AllowAll(),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [signer.jwk])), clock: clock)
        )
        let logger = runtime.logger
        // Batches of 100 here: the tests pause and count between batches.
        let deps = DownloadJob.Deps(
            db: runtime.db,
            downloads: DownloadStore(logger: logger),
            copies: CopyStore(logger: logger),
            profiles: ProfileStore(logger: logger),
            clock: clock,
            logger: logger,
            batchSize: 100
        )
        var upstreamClient = SyncUpstream(routes: try SyncUpstream.parse(overrides["SYNC_UPSTREAMS"]), http: runtime.http, timeout: .seconds(2))
        // The worker's own copy of the apps' upstreams, told of changes by the feed only.
        let upstreamTenants = TenantSettings(
            topic: "sync_upstreams",
            bootstrap: [:],
            feed: runtime.changes,
            load: UpstreamStore(db: runtime.db, logger: logger).loadAll
        )
        upstreamClient.tenants = upstreamTenants
        let worker = JobWorker(
            queue: JobQueue(client: runtime.db, queue: DownloadJob.queue, logger: logger, clock: clock),
            handlers: [
                DownloadJob.kind: DownloadJob.handler(deps),
                SyncExecuteJob.kind: SyncExecuteJob.handler(
                    .init(
                        db: runtime.db,
                        sync: SyncStore(logger: logger),
                        profiles: ProfileStore(logger: logger),
                        upstream: upstreamClient,
                        clock: clock,
                        logger: logger
                    )
                ),
            ],
            concurrency: 1
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            let server = ServiceGroup(configuration: .init(services: [upstream.application()], logger: logger))
            group.addTask { try await server.run() }
            for _ in 0..<100 {
                if (try? await runtime.http.send(ServiceKit.HTTPRequest(method: "GET", url: upstream.base + "/", timeout: .seconds(1)))) != nil {
                    break
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            try await app.test(.router) { client in
                await runtime.readiness.waitUntilMigrated()
                // Caches keep answers only once the feed listens.
                while runtime.changes.livePeriod == nil { try await Task.sleep(for: .milliseconds(10)) }
                var firstJob: Int64 = 0
                for try await n in try await runtime.db.query("SELECT COALESCE(max(id), 0)::int8 FROM jobs", logger: logger).decode(Int64.self) {
                    firstJob = n
                }
                try await body(
                    OfflineHarness(
                        client: client,
                        runtime: runtime,
                        signer: signer,
                        app: UUID(),
                        clock: clock,
                        upstream: upstream,
                        worker: worker,
                        downloadDeps: deps,
                        firstJob: firstJob,
                        overrides: settings,
                        upstreamTenants: upstreamTenants
                    )
                )
            }

            try await stopLocalServer(server, in: &group)
        }
    }
}

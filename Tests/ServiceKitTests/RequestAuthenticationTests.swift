import AuthDomain
import AuthService
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import ServiceLifecycle
import Synchronization
import TestSupport
import WireTypes
import XCTest

/// Tenant headers, access tokens and internal credentials as another service (ads) checks
/// them: tokens signed by a live auth service, verified through its JWKS over HTTP.
final class RequestAuthenticationTests: XCTestCase {
    final class CountingSource: JWKSSource {
        let inner: any JWKSSource
        let fetches = Mutex(0)
        init(_ inner: any JWKSSource) { self.inner = inner }
        func fetchKeys() async throws -> JWKSDocument {
            fetches.withLock { $0 += 1 }
            return try await inner.fetchKeys()
        }
    }

    struct EchoBody: Codable {
        var name: String
        var count: Int
    }
    struct EchoResponse: Codable {
        var userID: UUID
        var appID: UUID
        var name: String
        enum CodingKeys: String, CodingKey {
            case userID = "user_id"
            case appID = "app_id"
            case name
        }
    }
    struct Secret: Error { let detail = "password=hunter2 at db.internal:5432" }

    /// Runs a live auth service with a fresh key, two registered apps, and an ads-like
    /// consumer application with test routes on each kind of group.
    static func withStack(_ body: @Sendable (_ client: any TestClientProtocol, _ ctx: Stack) async throws -> Void) async throws {
        let authPort = try TestEnvironment.freePort()
        let key = Curve25519.Signing.PrivateKey()
        let authRuntime = kitRuntime(.auth, overrides: ["AUTH_PORT": String(authPort)])
        let authApp = try AuthService.buildApplication(runtime: authRuntime, signingKey: key)
        try await withThrowingTaskGroup(of: Void.self) { group in
            let serviceGroup = ServiceGroup(configuration: .init(services: [authApp], logger: authRuntime.logger))
            group.addTask { try await serviceGroup.run() }
            defer { Task { await serviceGroup.triggerGracefulShutdown() } }
            await authRuntime.readiness.waitUntilMigrated()
            let repo = PostgresApplicationRepository(db: authRuntime.db, logger: authRuntime.logger)
            let appA = try await repo.create(name: "App A")
            let appB = try await repo.create(name: "App B")

            let consumer = kitRuntime(.ads, overrides: ["AUTH_URL": "http://127.0.0.1:\(authPort)", "OPERATOR_CACHE_SECONDS": "1"])
            let source = CountingSource(RemoteJWKSSource(url: "http://127.0.0.1:\(authPort)/auth/v1/.well-known/jwks.json", http: consumer.http))
            let verifier = AccessTokenVerifier(source: source)
            let app = buildServiceApplication(runtime: consumer, appVerifier: consumer.remoteAppVerifier(), tokenVerifier: verifier) { routes in
                routes.user.post("echo") { request, context in
                    let body = try await request.decodeJSON(as: EchoBody.self, context: context)
                    let (appID, userID) = try context.requireUser()
                    return try context.json(EchoResponse(userID: userID, appID: appID, name: body.name))
                }
                routes.tenant.get("tenant-only") { _, context in try context.json(["app_id": try context.requireApp()]) }
                routes.internal.get("whoami") { _, context in try context.json(["service": context.callingService?.rawValue ?? ""]) }
                routes.open.get("boom") { _, _ -> String in throw Secret() }
                routes.admin.get("operator-echo") { _, context in
                    try context.json(["app_id": try context.requireApp().lowercasedString, "operator": context.operator?.auditName ?? ""])
                }
                routes.admin.post("operator-fails") { _, _ -> String in throw AppError.validation("name", "name is required") }
            }
            // The consumer's pool runs (and its schema is migrated) for its operator audit.
            try await withMigratedRuntime(consumer) { consumer in
                try await app.test(.router) { client in
                    try await body(
                        client,
                        Stack(
                            signer: AccessTokenSigner(privateKey: key),
                            appA: appA,
                            appB: appB,
                            source: source,
                            applications: repo,
                            operators: OperatorKeyStore(db: authRuntime.db, logger: authRuntime.logger),
                            consumerDB: consumer.db
                        )
                    )
                }
            }
            await serviceGroup.triggerGracefulShutdown()
        }
    }

    struct Stack: Sendable {
        let signer: AccessTokenSigner
        let appA: IssuedAPIKey
        let appB: IssuedAPIKey
        let source: CountingSource
        let applications: PostgresApplicationRepository
        let operators: OperatorKeyStore
        let consumerDB: DatabasePool

        func token(app: UUID? = nil, expiresIn: Int = 600, signer other: AccessTokenSigner? = nil) throws -> String {
            let now = Int(Date().timeIntervalSince1970)
            let claims = AccessTokenClaims(
                userID: UUID(),
                appID: app ?? appA.appID,
                email: "p@example.com",
                status: .free,
                isGuest: false,
                issuer: "auth",
                issuedAt: now - 10,
                expiresAt: now + expiresIn,
                jti: UUID().uuidString
            )
            return try (other ?? signer).sign(claims)
        }

        func headers(_ token: String?, app: IssuedAPIKey? = nil) -> HTTPFields {
            var h = HTTPFields.tenant((app ?? appA).appID, (app ?? appA).apiKey)
            h[.contentType] = "application/json"
            if let token { h[.authorization] = "Bearer \(token)" }
            return h
        }
    }

    static let echoBody = ByteBuffer(string: #"{"name":"Ada","count":3}"#)

    func testTokenSignedByAuthIsAcceptedByAnotherService() async throws {
        try await Self.withStack { client, s in
            let token = try s.token()
            try await client.execute(uri: "/ads/v1/echo", method: .post, headers: s.headers(token), body: Self.echoBody) { r in
                XCTAssertEqual(r.status, .ok)
                let echo = try r.json(EchoResponse.self)
                XCTAssertEqual(echo.appID, s.appA.appID)
                XCTAssertEqual(echo.name, "Ada")
            }
            // Verified tokens are cached: a second call does not refetch the key set.
            try await client.execute(uri: "/ads/v1/echo", method: .post, headers: s.headers(token), body: Self.echoBody) { r in
                XCTAssertEqual(r.status, .ok)
            }
            XCTAssertEqual(s.source.fetches.withLock { $0 }, 1)
        }
    }

    func testRefusedTokens() async throws {
        try await Self.withStack { client, s in
            let expired = try s.token(expiresIn: -120)
            let forged = try s.token(signer: ForgedSigner.sameKid(as: s.signer))
            let otherApp = try s.token(app: s.appB.appID)
            let unknownKid = try s.token(signer: AccessTokenSigner(privateKey: .init()))
            let valid = try s.token()
            let parts = valid.split(separator: ".")
            let none = Base64URL.encode(Data(#"{"alg":"none","kid":"\#(s.signer.kid)","typ":"JWT"}"#.utf8)) + "." + parts[1] + "."
            let tampered = parts[0] + "." + Base64URL.encode(Data(#"{"sub":"x"}"#.utf8)) + "." + parts[2]
            for (name, token) in [
                ("expired", expired), ("wrong signature", forged), ("another app", otherApp),
                ("unknown kid", unknownKid), ("alg none", none), ("tampered", String(tampered)), ("garbage", "abc"),
            ] {
                try await client.execute(uri: "/ads/v1/echo", method: .post, headers: s.headers(token), body: Self.echoBody) { r in
                    XCTAssertEqual(r.status, .unauthorized, name)
                    let env = try r.envelope()
                    XCTAssertEqual(env.error, "invalid_token", name)
                    XCTAssertFalse(env.message.isEmpty)
                }
            }
            // The unknown kid caused one refetch, and it stayed unknown; a second unknown kid
            // within the refetch interval does not hammer auth.
            let fetches = s.source.fetches.withLock { $0 }
            XCTAssertEqual(fetches, 2, "initial fetch + one refetch for the unknown kid")
            let another = try s.token(signer: AccessTokenSigner(privateKey: .init()))
            try await client.execute(uri: "/ads/v1/echo", method: .post, headers: s.headers(another), body: Self.echoBody) { r in
                XCTAssertEqual(r.status, .unauthorized)
            }
            XCTAssertEqual(s.source.fetches.withLock { $0 }, 2)
            // No bearer token at all.
            try await client.execute(uri: "/ads/v1/echo", method: .post, headers: s.headers(nil), body: Self.echoBody) { r in
                XCTAssertEqual(r.status, .unauthorized)
                XCTAssertEqual(try r.envelope().error, "unauthorized")
            }
        }
    }

    func testTenantHeaders() async throws {
        try await Self.withStack { client, s in
            try await client.execute(uri: "/ads/v1/tenant-only", method: .get, headers: s.headers(nil)) { r in
                XCTAssertEqual(r.status, .ok)
            }
            try await client.execute(uri: "/ads/v1/tenant-only", method: .get, headers: [:]) { r in
                XCTAssertEqual(r.status, .unauthorized)
                XCTAssertEqual(try r.envelope().error, "missing_api_key")
            }
            try await client.execute(uri: "/ads/v1/tenant-only", method: .get, headers: .tenant(s.appA.appID, s.appB.apiKey)) { r in
                XCTAssertEqual(r.status, .unauthorized)
                XCTAssertEqual(try r.envelope().error, "invalid_api_key")
            }
            try await client.execute(uri: "/ads/v1/tenant-only", method: .get, headers: [.xAppID: "not-a-uuid", .xAPIKey: "x"]) { r in
                XCTAssertEqual(r.status, .unauthorized)
                XCTAssertEqual(try r.envelope().error, "invalid_api_key")
            }
            try await client.execute(uri: "/ads/v1/tenant-only", method: .get, headers: .tenant(UUID(), s.appA.apiKey)) { r in
                XCTAssertEqual(r.status, .unauthorized)
            }
        }
    }

    func testBadInputGetsA4xxEnvelope() async throws {
        try await Self.withStack { client, s in
            let token = try s.token()
            let cases: [(String, ByteBuffer, HTTPFields, HTTPResponse.Status, String)] = [
                ("malformed JSON", ByteBuffer(string: #"{"name": "#), s.headers(token), .badRequest, "invalid_request"),
                ("wrong type", ByteBuffer(string: #"{"name":"Ada","count":"three"}"#), s.headers(token), .badRequest, "invalid_request"),
                ("missing field", ByteBuffer(string: #"{"name":"Ada"}"#), s.headers(token), .badRequest, "invalid_request"),
                ("empty body", ByteBuffer(), s.headers(token), .badRequest, "invalid_request"),
                ("oversized body", ByteBuffer(repeating: UInt8(ascii: "a"), count: 2 << 20), s.headers(token), .contentTooLarge, "payload_too_large"),
            ]
            for (name, body, headers, status, code) in cases {
                try await client.execute(uri: "/ads/v1/echo", method: .post, headers: headers, body: body) { r in
                    XCTAssertEqual(r.status, status, name)
                    XCTAssertEqual(try r.envelope().error, code, name)
                }
            }
            var textHeaders = s.headers(token)
            textHeaders[.contentType] = "text/plain"
            try await client.execute(uri: "/ads/v1/echo", method: .post, headers: textHeaders, body: Self.echoBody) { r in
                XCTAssertEqual(r.status, .unsupportedMediaType)
                XCTAssertEqual(try r.envelope().error, "unsupported_media_type")
            }
            try await client.execute(
                uri: "/ads/v1/echo",
                method: .post,
                headers: s.headers(token),
                body: ByteBuffer(string: #"{"name":"Ada","count":"three"}"#)
            ) { r in
                XCTAssertEqual(try r.envelope().extra["field"], "count")
            }
            try await client.execute(uri: "/ads/v1/nowhere", method: .get, headers: s.headers(token)) { r in
                XCTAssertEqual(r.status, .notFound)
                XCTAssertEqual(try r.envelope().error, "not_found")
            }
            // An unknown error: a bare 500 that tells nothing about internals.
            try await client.execute(uri: "/ads/v1/boom", method: .get) { r in
                XCTAssertEqual(r.status, .internalServerError)
                let env = try r.envelope()
                XCTAssertEqual(env.error, "internal_error")
                XCTAssertFalse(String(buffer: r.body).contains("hunter2"))
                XCTAssertFalse(String(buffer: r.body).contains("Secret"))
            }
        }
    }

    /// #15: every answer is counted by route pattern and status, errors included (a thrown
    /// 401, 422 and 500), and every answer carries the request id, in the header and in the
    /// error envelope; `/metrics` and `/ready` are at the root only (no public prefix).
    func testErrorsAreCountedAndCarryTheRequestID() async throws {
        try await Self.withStack { client, ctx in
            let tenant = HTTPFields.tenant(ctx.appA.appID, ctx.appA.apiKey)
            let cases: [(String, HTTPRequest.Method, HTTPFields, String?, Int)] = [
                ("/ads/v1/echo", .post, tenant, #"{"name":"x","count":1}"#, 401),
                ("/ads/v1/boom", .get, [:], nil, 500),
            ]
            var withToken = tenant
            withToken[.authorization] = "Bearer \(try ctx.token())"
            withToken[.contentType] = "application/json"
            for (path, method, headers, body, status) in cases + [("/ads/v1/echo", .post, withToken, #"{"name":"x","count":"many"}"#, 400)] {
                let id = "req-\(UUID().uuidString.prefix(8))"
                var h = headers
                h[.xRequestID] = id
                try await client.execute(uri: path, method: method, headers: h, body: body.map { ByteBuffer(string: $0) }) { r in
                    XCTAssertEqual(Int(r.status.code), status, path)
                    XCTAssertEqual(r.headers[.xRequestID], id, "the id on an error answer: \(path)")
                    XCTAssertEqual(try r.envelope().extra["request_id"], .string(id), path)
                }
            }
            let metrics = try await client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
            for status in ["401", "400", "500"] {
                XCTAssertTrue(metrics.contains(#"status="\#(status)""#), "a \(status) series: \(metrics.prefix(2000))")
            }
            XCTAssertTrue(metrics.contains(#"route="/ads/v1/echo""#), "by route pattern")
            for path in ["/ads/v1/metrics", "/ads/v1/ready"] {
                let r = try await client.execute(uri: path, method: .get) { $0.status }
                XCTAssertEqual(r, .notFound, "\(path) is not under the public prefix")
            }
        }
    }

    /// #16: a disabled app's requests are told so (403 `app_disabled`) at another service, not
    /// "wrong key"; a wrong key for it is still 401 (the state is told only to its key holders);
    /// the operator's action is in the audit log with its reason.
    func testADisabledAppIsRefusedWith403AndTheActionIsAudited() async throws {
        try await Self.withStack { client, s in
            let disabled = try await s.applications.setActive(appID: s.appB.appID, active: false, reason: "unpaid invoice", operator: "test")
            XCTAssertEqual(disabled?.active, false)
            try await client.execute(uri: "/ads/v1/tenant-only", method: .get, headers: s.headers(nil, app: s.appB)) { r in
                XCTAssertEqual(r.status, .forbidden)
                XCTAssertEqual(try r.envelope().error, "app_disabled")
            }
            try await client.execute(uri: "/ads/v1/tenant-only", method: .get, headers: .tenant(s.appB.appID, s.appA.apiKey)) { r in
                XCTAssertEqual(r.status, .unauthorized)
                XCTAssertEqual(try r.envelope().error, "invalid_api_key")
            }
            // The other app is untouched.
            try await client.execute(uri: "/ads/v1/tenant-only", method: .get, headers: s.headers(nil)) { r in
                XCTAssertEqual(r.status, .ok)
            }
            let audited = try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db -> [String] in
                var out: [String] = []
                for try await (action, reason) in try await db.query(
                    """
                    SELECT action, details->>'reason' FROM auth.audit_logs WHERE app_id = \(s.appB.appID) ORDER BY timestamp
                    """
                ).decode((String, String?).self) { out.append("\(action):\(reason ?? "")") }
                return out
            }
            XCTAssertEqual(audited, ["operator.app.disable:unpaid invoice"])
            let enabled = try await s.applications.setActive(appID: s.appB.appID, active: true, reason: "paid", operator: "test")
            XCTAssertEqual(enabled?.active, true)
            let verdict = try await s.applications.verdict(appID: s.appB.appID, apiKey: s.appB.apiKey)
            XCTAssertEqual(verdict, .valid)
            let unknown = try await s.applications.setActive(appID: UUID(), active: false, reason: "x", operator: "test")
            XCTAssertNil(unknown)
        }
    }

    /// #16: an operator key acts on its own app's admin routes only, at another service (asked
    /// of auth); the platform token on any; a revoked key is refused within
    /// OPERATOR_CACHE_SECONDS; every recognised use (a failed one too) is in that service's
    /// `operator_audit`; the key is stored hashed.
    func testOperatorKeysActOnTheirOwnAppOnlyAndEveryUseIsAudited() async throws {
        try await Self.withStack { client, s in
            guard let issued = try await s.operators.create(appID: s.appA.appID, name: "Ada (support)", operator: "test") else {
                return XCTFail("no key issued")
            }
            let unknownApp = try await s.operators.create(appID: UUID(), name: "nobody", operator: "test")
            XCTAssertNil(unknownApp)
            func admin(_ app: IssuedAPIKey, _ bearer: String?, _ path: String = "operator-echo", method: HTTPRequest.Method = .get) -> HTTPFields {
                var h = HTTPFields.tenant(app.appID, app.apiKey)
                if let bearer { h[.authorization] = "Bearer \(bearer)" }
                return h
            }
            try await client.execute(uri: "/ads/v1/operator-echo", method: .get, headers: admin(s.appA, issued.key)) { r in
                XCTAssertEqual(r.status, .ok)
                let body = try r.json([String: String].self)
                XCTAssertEqual(body["app_id"], s.appA.appID.lowercasedString)
                XCTAssertEqual(body["operator"], "operator_key:\(issued.id.lowercasedString):Ada (support)")
            }
            // App A's key on app B (with B's own tenant headers): refused, and B's audit stays empty.
            try await client.execute(uri: "/ads/v1/operator-echo", method: .get, headers: admin(s.appB, issued.key)) { r in
                XCTAssertEqual(r.status, .unauthorized)
                XCTAssertEqual(try r.envelope().error, "invalid_admin_credential")
            }
            for bearer in [nil, s.appA.apiKey, "opk_forged", "local-admin-token-but-wrong"] as [String?] {
                try await client.execute(uri: "/ads/v1/operator-echo", method: .get, headers: admin(s.appA, bearer)) { r in
                    XCTAssertEqual(r.status, .unauthorized, "\(bearer ?? "no credential")")
                    XCTAssertEqual(try r.envelope().error, "invalid_admin_credential")
                }
            }
            try await client.execute(uri: "/ads/v1/operator-echo", method: .get, headers: admin(s.appB, "local-admin-token")) { r in
                XCTAssertEqual(r.status, .ok)
                XCTAssertEqual(try r.json([String: String].self)["operator"], "platform")
            }
            try await client.execute(uri: "/ads/v1/operator-fails", method: .post, headers: admin(s.appA, issued.key)) { r in
                XCTAssertEqual(r.status, .unprocessableContent)
            }
            let audit = OperatorAuditStore(db: s.consumerDB, logger: TestEnvironment.logger)
            let forA = try await audit.recent(appID: s.appA.appID)
            XCTAssertEqual(
                forA.map { "\($0.method) \($0.path) \($0.status)" },
                ["POST /ads/v1/operator-fails 422", "GET /ads/v1/operator-echo 200"]
            )
            XCTAssertEqual(Set(forA.map(\.operator)), ["operator_key:\(issued.id.lowercasedString):Ada (support)"])
            let forB = try await audit.recent(appID: s.appB.appID)
            XCTAssertEqual(forB.map(\.operator), ["platform"])

            // #47 the same audit as the console reads it: its own app's only, newest first, paged,
            // filtered by operator; bad paging is a 4xx.
            func page(_ query: String) async throws -> (HTTPResponse.Status, [String: JSONValue]) {
                try await client.execute(uri: "/ads/v1/admin/audit\(query)", method: .get, headers: admin(s.appA, issued.key)) { r in
                    (r.status, (try? r.json([String: JSONValue].self)) ?? [:])
                }
            }
            let (ok, first) = try await page("?limit=1")
            XCTAssertEqual(ok, .ok)
            guard case .array(let one)? = first["entries"], case .object(let newest)? = one.first, case .int(let next)? = first["next_before"] else {
                return XCTFail("no page: \(first)")
            }
            XCTAssertEqual(newest["path"], .string("/ads/v1/operator-fails"))
            let (_, second) = try await page("?limit=1&before=\(next)")
            guard case .array(let two)? = second["entries"], case .object(let older)? = two.first else { return XCTFail("no second page: \(second)") }
            XCTAssertEqual(older["path"], .string("/ads/v1/operator-echo"))
            let (_, byKind) = try await page("?operator=operator_key:&limit=200")
            guard case .array(let keyed)? = byKind["entries"] else { return XCTFail("\(byKind)") }
            XCTAssertEqual(keyed.count, 4, "the two uses and the two page reads before this one (each read is audited once answered)")
            let (_, nobody) = try await page("?operator=platform")
            XCTAssertEqual(nobody["entries"], .array([]), "app B's platform use is not app A's")
            for bad in ["?limit=0", "?limit=201", "?limit=x", "?before=-1"] {
                let (status, body) = try await page(bad)
                XCTAssertTrue([.badRequest, .unprocessableContent].contains(status), "\(bad): \(status) \(body)")
            }

            let stored = try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db -> Int in
                for try await n in try await db.query(
                    """
                    SELECT count(*)::int FROM auth.operator_keys WHERE key_hash = \(issued.key) OR key_prefix = \(issued.key)
                    """
                ).decode(Int.self) { return n }
                return -1
            }
            XCTAssertEqual(stored, 0, "the key is kept only as a hash")

            // Revoked: a wrong app cannot revoke it; its own app can, with a reason; then refused.
            let wrongApp = try await s.operators.revoke(appID: s.appB.appID, keyID: issued.id, reason: "x", operator: "test")
            XCTAssertFalse(wrongApp)
            let revoked = try await s.operators.revoke(appID: s.appA.appID, keyID: issued.id, reason: "left the team", operator: "test")
            XCTAssertTrue(revoked)
            let again = try await s.operators.revoke(appID: s.appA.appID, keyID: issued.id, reason: "twice", operator: "test")
            XCTAssertFalse(again)
            try await Task.sleep(for: .milliseconds(1_100))
            try await client.execute(uri: "/ads/v1/operator-echo", method: .get, headers: admin(s.appA, issued.key)) { r in
                XCTAssertEqual(r.status, .unauthorized)
            }
            let listed = try await s.operators.list(appID: s.appA.appID)
            XCTAssertEqual(listed.map(\.name), ["Ada (support)"])
            XCTAssertNotNil(listed.first?.revokedAt)
        }
    }

    func testInternalRoutesNeedTheCallingServicesCredential() async throws {
        try await Self.withStack { client, _ in
            try await client.execute(uri: "/internal/whoami", method: .get) { r in
                XCTAssertEqual(r.status, .unauthorized)
                XCTAssertEqual(try r.envelope().error, "invalid_service_credential")
            }
            try await client.execute(
                uri: "/internal/whoami",
                method: .get,
                headers: [.authorization: "Bearer wrong", .xServiceName: "auth"]
            ) { r in
                XCTAssertEqual(r.status, .unauthorized)
            }
            // The credential of another caller does not pass under a different name.
            try await client.execute(
                uri: "/internal/whoami",
                method: .get,
                headers: [.authorization: "Bearer local-internal-offline", .xServiceName: "auth"]
            ) { r in
                XCTAssertEqual(r.status, .unauthorized)
            }
            // The right secret under another scheme is no credential.
            try await client.execute(
                uri: "/internal/whoami",
                method: .get,
                headers: [.authorization: "Basic local-internal-auth", .xServiceName: "auth"]
            ) { r in
                XCTAssertEqual(r.status, .unauthorized)
            }
            // The scheme is read in any case (RFC 9110 §11.1), as the access-token check reads it.
            for scheme in ["Bearer", "bearer"] {
                try await client.execute(
                    uri: "/internal/whoami",
                    method: .get,
                    headers: [.authorization: "\(scheme) local-internal-auth", .xServiceName: "auth"]
                ) { r in
                    XCTAssertEqual(r.status, .ok)
                    XCTAssertEqual(try r.json([String: String].self)["service"], "auth")
                }
            }
        }
    }
}

/// Signs with a different key while claiming auth's `kid`: the signature must not verify.
enum ForgedSigner {
    static func sameKid(as real: AccessTokenSigner) -> AccessTokenSigner {
        ImpersonatingSigner.make(kid: real.kid)
    }
}

enum ImpersonatingSigner {
    static func make(kid: String) -> AccessTokenSigner {
        AccessTokenSigner(privateKey: .init(), kidOverride: kid)
    }
}

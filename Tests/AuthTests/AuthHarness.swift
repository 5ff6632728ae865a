import AuthDomain
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import JWTKit
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import Synchronization
import TestSupport
import WireTypes
import XCTest
import _CryptoExtras

@testable import AuthService

/// Keeps the emails auth sends, for tests to open.
final class RecordingMailer: Mailer {
    let sent = Mutex([SMTPMessage]())
    /// While set, the mail server refuses every message (a failed SMTP delivery).
    let refusing = Mutex(false)
    struct Refused: Error {}
    func send(_ message: SMTPMessage) async throws {
        if refusing.withLock({ $0 }) { throw Refused() }
        sent.withLock { $0.append(message) }
    }
    var last: SMTPMessage? { sent.withLock { $0.last } }
    /// The `token=` value of the last link sent to `email`.
    func token(to email: String) -> String? {
        let text = sent.withLock { $0.last { $0.to.contains(email) }?.text } ?? ""
        guard let r = text.range(of: "token=") else { return nil }
        return String(text[r.upperBound...].prefix { !$0.isWhitespace })
    }
}

/// A stand-in for Google's key server: serves a JWKS of RSA keys the test generates, and signs
/// ID tokens with them.
final class FakeIdentityProvider: Sendable {
    let key: _RSA.Signing.PrivateKey
    let kid = "test-key-1"
    let keys: JWTKeyCollection
    let port: Int
    final class Counter: Sendable { let value = Mutex(0) }
    let fetches = Counter()

    init() async throws {
        key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PrivateKey(backing: key), digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        port = try TestEnvironment.freePort()
    }

    var jwks: String {
        let (n, e) = try! Insecure.RSA.PublicKey(backing: key.publicKey).getKeyPrimitives()
        return #"{"keys":[{"kty":"RSA","alg":"RS256","use":"sig","kid":"\#(kid)","n":"\#(Base64URL.encode(n))","e":"\#(Base64URL.encode(e))"}]}"#
    }

    var url: String { "http://127.0.0.1:\(port)/oauth2/v3/certs" }

    func application() -> some ApplicationProtocol {
        let router = Router()
        let jwks = self.jwks
        let fetches = self.fetches
        router.get("oauth2/v3/certs") { _, _ -> Response in
            fetches.value.withLock { $0 += 1 }
            return Response(
                status: .ok,
                headers: [.contentType: "application/json", .cacheControl: "public, max-age=21600"],
                body: .init(byteBuffer: ByteBuffer(string: jwks))
            )
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
    }

    struct Claims: JWTPayload {
        var iss: String
        var aud: String
        var sub: String
        var exp: Int
        var iat: Int
        var email: String?
        var email_verified: Bool?
        var name: String?
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    func idToken(
        sub: String,
        aud: String,
        email: String? = nil,
        verified: Bool = true,
        iss: String = "https://accounts.google.com",
        expiresIn: Int = 3600,
        now: Date = Date(),
        kid: String? = nil
    ) async throws -> String {
        let t = Int(now.timeIntervalSince1970)
        return try await keys.sign(
            Claims(
                iss: iss,
                aud: aud,
                sub: sub,
                exp: t + expiresIn,
                iat: t - 5,
                email: email,
                email_verified: verified,
                name: "Ada Lovelace"
            ),
            kid: JWKIdentifier(string: kid ?? self.kid)
        )
    }
}

/// A running auth application (router-tested) with a registered tenant, a movable clock, a
/// recording mailer and a fake Google.
struct AuthHarness: Sendable {
    let client: any TestClientProtocol
    let runtime: ServiceRuntime
    let clock: MovableClock
    let mailer: RecordingMailer
    let app: IssuedAPIKey
    let otherApp: IssuedAPIKey
    let google: FakeIdentityProvider
    let apple: FakeApple
    let googleClientID = "quiz-ios.apps.googleusercontent.com"
    let signer: AccessTokenSigner
    var signerKey: Curve25519.Signing.PrivateKey { signer.privateKey }

    /// `live`: over a real socket on 127.0.0.1 (the client has a peer address), not in-process.
    static func run(overrides extra: [String: String] = [:], live: Bool = false, _ body: @Sendable (AuthHarness) async throws -> Void) async throws {
        let clock = MovableClock(Date())
        let google = try await FakeIdentityProvider()
        let apple = try await FakeApple()
        // Tenants first: Apple's per-app keys are configuration, keyed by app id.
        let (tenant, other) = try await withMigratedRuntime(TestEnvironment.runtime(.auth, migrations: try AuthService.migrations())) { rt in
            let repo = PostgresApplicationRepository(db: rt.db, logger: rt.logger)
            let tenant = try await repo.create(name: "Quiz Geography")
            let other = try await repo.create(name: "Other App")
            _ = try await repo.setProviderSettings(
                appID: tenant.appID,
                googleClientIDs: ["quiz-ios.apps.googleusercontent.com"],
                appleBundleIDs: ["com.example.quiz"]
            )
            return (tenant, other)
        }
        let runtime = TestEnvironment.runtime(
            .auth,
            migrations: try AuthService.migrations(),
            overrides: [
                "GOOGLE_JWKS_URL": google.url, "APPLE_JWKS_URL": "\(apple.base)/auth/keys",
                "APPLE_TOKEN_URL": "\(apple.base)/auth/token", "APPLE_REVOKE_URL": "\(apple.base)/auth/revoke",
                "APPLE_SIGNIN_APPS": apple.config(for: tenant.appID),
            ].merging(extra) { $1 },
            clock: clock
        )
        let mailer = RecordingMailer()
        let key = Curve25519.Signing.PrivateKey()
        let app = try AuthService.buildApplication(runtime: runtime, signingKey: key, providers: .init(mailer: mailer))
        try await withThrowingTaskGroup(of: Void.self) { group in
            let idp = ServiceGroup(configuration: .init(services: [google.application(), apple.application()], logger: runtime.logger))
            group.addTask { try await idp.run() }
            try await app.test(live ? .live : .router) { client in
                await runtime.readiness.waitUntilMigrated()
                try await body(
                    AuthHarness(
                        client: client,
                        runtime: runtime,
                        clock: clock,
                        mailer: mailer,
                        app: tenant,
                        otherApp: other,
                        google: google,
                        apple: apple,
                        signer: AccessTokenSigner(privateKey: key)
                    )
                )
            }
            try await stopLocalServer(idp, in: &group)
        }
    }

    /// Each test call gets its own client address unless told, so the per-IP limit of
    /// sign-in does not couple unrelated checks.
    func headers(ip: String? = nil, token: String? = nil, app: IssuedAPIKey? = nil) -> HTTPFields {
        var h = HTTPFields.tenant((app ?? self.app).appID, (app ?? self.app).apiKey)
        h[.contentType] = "application/json"
        h[.xForwardedFor] = ip ?? "10.\(Int.random(in: 0...255)).\(Int.random(in: 0...255)).\(Int.random(in: 1...254))"
        if let token { h[.authorization] = "Bearer \(token)" }
        return h
    }

    @discardableResult
    func post(
        _ path: String,
        _ json: String,
        ip: String? = nil,
        token: String? = nil,
        app: IssuedAPIKey? = nil,
        _ check: @escaping @Sendable (TestResponse) throws -> Void = { _ in }
    ) async throws -> TestResponse {
        try await client.execute(
            uri: "/auth/v1/\(path)",
            method: .post,
            headers: headers(ip: ip, token: token, app: app),
            body: ByteBuffer(string: json)
        ) { r in
            try check(r)
            return r
        }
    }

    func send(
        _ method: HTTPRequest.Method,
        _ path: String,
        _ json: String? = nil,
        token: String? = nil,
        app: IssuedAPIKey? = nil
    )
        async throws -> TestResponse
    {
        try await client.execute(
            uri: "/auth/v1/\(path)",
            method: method,
            headers: headers(token: token, app: app),
            body: json.map { ByteBuffer(string: $0) }
        ) { $0 }
    }

    func registerEmail(_ email: String, password: String = "Tr1cky-Geography-42", device: String = "device-1") async throws -> AuthResponse {
        let r = try await post(
            "auth/register",
            """
            {"provider":"email","credentials":{"email":"\(email)","password":"\(password)"},"device_info":{"device_id":"\(device)","platform":"ios"}}
            """
        )
        XCTAssertEqual(r.status, .created, String(buffer: r.body))
        return try r.json(AuthResponse.self)
    }

    func loginEmail(
        _ email: String,
        password: String = "Tr1cky-Geography-42",
        device: String = "device-1",
        ip: String? = nil
    ) async throws -> TestResponse {
        try await post(
            "auth/login",
            """
            {"provider":"email","credentials":{"email":"\(email)","password":"\(password)"},"device_info":{"device_id":"\(device)"}}
            """,
            ip: ip
        )
    }

    func sql(_ query: String) async throws {
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
            try await db.query(PostgresQuery(unsafeSQL: query))
        }
    }

    func scalar(_ query: String) async throws -> Int {
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
            for try await n in try await db.query(PostgresQuery(unsafeSQL: query)).decode(Int.self) { return n }
            return -1
        }
    }
}

func uniqueEmail(_ prefix: String = "player") -> String { "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())@example.com" }

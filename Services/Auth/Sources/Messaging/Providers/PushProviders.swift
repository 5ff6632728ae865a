import AsyncHTTPClient
import AuthDomain
import Crypto
import Foundation
import Logging
import NIOCore
import NIOSSL
import ServiceContextModule
import ServiceKit
import Synchronization
import Tracing
import WireTypes
import _CryptoExtras

/// An app's APNs key (`PUT /admin/push/apns`): token-based auth with a .p8 key.
struct APNsCredentials: Sendable {
    var teamID: String
    var keyID: String
    var topic: String
    /// The environment of tokens registered without one.
    var environment: PushEnvironment
    var privateKey: P256.Signing.PrivateKey

    struct Settings: Codable, Sendable {
        var teamID: String
        var keyID: String
        var topic: String
        var environment: String?
        var privateKey: String?
        enum CodingKeys: String, CodingKey {
            case teamID = "team_id"
            case keyID = "key_id"
            case topic, environment
            case privateKey = "private_key"
        }
    }

    /// Checked as a request body is: each bad field named.
    init(_ s: Settings, privateKeyPEM: String) throws {
        for (field, value) in [("team_id", s.teamID), ("key_id", s.keyID)]
        where value.count != 10 || !value.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) {
            throw AppError.validation(field, "\(field) must be Apple's 10-character identifier")
        }
        guard (1...255).contains(s.topic.count), !s.topic.contains(where: \.isWhitespace) else {
            throw AppError.validation("topic", "topic is the app's bundle id")
        }
        guard let env = PushEnvironment(rawValue: s.environment ?? "production") else {
            throw AppError.validation("environment", "environment must be 'sandbox' or 'production'")
        }
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM) else {
            throw AppError.validation("private_key", "private_key must be the .p8 key Apple issued (PEM)")
        }
        self.init(teamID: s.teamID, keyID: s.keyID, topic: s.topic, environment: env, privateKey: key)
    }

    init(teamID: String, keyID: String, topic: String, environment: PushEnvironment, privateKey: P256.Signing.PrivateKey) {
        self.teamID = teamID
        self.keyID = keyID
        self.topic = topic
        self.environment = environment
        self.privateKey = privateKey
    }

    /// What an operator sees instead of the key.
    var fingerprint: String { PushFingerprint.of(privateKey.publicKey.derRepresentation) }
}

/// An app's FCM service account (`PUT /admin/push/fcm`, the JSON Google gives).
struct FCMCredentials: Sendable {
    var projectID: String
    var clientEmail: String
    var privateKey: _RSA.Signing.PrivateKey

    struct ServiceAccount: Codable, Sendable {
        var type: String?
        var projectID: String?
        var clientEmail: String?
        var privateKey: String?
        var privateKeyID: String?
        enum CodingKeys: String, CodingKey {
            case type
            case projectID = "project_id"
            case clientEmail = "client_email"
            case privateKey = "private_key"
            case privateKeyID = "private_key_id"
        }
    }

    init(_ a: ServiceAccount) throws {
        guard a.type == nil || a.type == "service_account" else {
            throw AppError.validation("service_account.type", "the JSON must be a service account key (type service_account)")
        }
        guard let project = a.projectID, (1...100).contains(project.count),
            project.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-") })
        else {
            throw AppError.validation("service_account.project_id", "project_id is the Firebase project's id")
        }
        guard let email = a.clientEmail, email.contains("@"), email.count <= 320 else {
            throw AppError.validation("service_account.client_email", "client_email is the service account's address")
        }
        guard let pem = a.privateKey, let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem) else {
            throw AppError.validation("service_account.private_key", "private_key must be the service account's RSA key (PEM)")
        }
        self.init(projectID: project, clientEmail: email, privateKey: key)
    }

    init(projectID: String, clientEmail: String, privateKey: _RSA.Signing.PrivateKey) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKey = privateKey
    }

    var fingerprint: String { PushFingerprint.of(privateKey.publicKey.derRepresentation) }
}

enum PushFingerprint {
    /// SHA-256 of the public key, as `sha256:` and its first 16 bytes in hex.
    static func of(_ publicKeyDER: Data) -> String {
        "sha256:" + SHA256.hash(data: publicKeyDER).prefix(16).hexEncoded
    }
}

/// One message to one device, as a provider sends it.
struct PushSend: Sendable {
    var token: String
    var environment: PushEnvironment
    var kind: PushKind
    var decision: PushDecision
    var data: [String: String]
    /// Unique per (notification, device): Apple's `apns-id`, our log's key.
    var id: UUID
}

/// Where the replicas keep an app's provider token (auth's schema): every replica, and one just
/// restarted, sends the token in force, so Apple sees one renewal per 20-40 minutes per key
/// however many processes send.
protocol APNsTokenStore: Sendable {
    func current(app: UUID, fingerprint: String) async throws -> (jwt: String, issuedAt: Date)?
    /// Keeps `jwt` unless the token in force was issued at or after `before`; returns the token
    /// in force afterwards (another replica's, when it renewed first).
    func replace(app: UUID, fingerprint: String, jwt: String, issuedAt: Date, before: Date) async throws -> (jwt: String, issuedAt: Date)?
}

/// APNs over HTTP/2 (AsyncHTTPClient over TLS with ALPN, one multiplexed connection per host, as
/// APNSwift does; libcurl 7.88, Debian 12's, fails multiplexed streams answered with headers
/// only, which is how APNs answers a 200: curl#13678) with token auth: an ES256
/// JWT (`kid`, `iss` team, `iat`) reused for at least 20 and at most 40 minutes. Apple refuses a
/// provider token older than an hour and one renewed more often than every 20 minutes (429
/// `TooManyProviderTokenUpdates`), so a 403 on a token younger than 20 minutes is the operator's
/// problem (a wrong key), not a reason to sign again.
final class APNsClient: Sendable {
    let production: String
    let sandbox: String
    let clock: any WallClock
    /// With `APNS_CA_BUNDLE`, a CA to trust instead of the system's (a local stand-in's).
    let tls: TLSConfiguration?
    let store: any APNsTokenStore
    static let renewAfter: TimeInterval = 40 * 60
    static let minimumAge: TimeInterval = 20 * 60
    private let tokens = Mutex([String: (jwt: String, issuedAt: Date)]())
    private let pending = Mutex([String: Task<String, any Error>]())
    /// How many provider tokens this process signed and put in force (the tests hold renewal to its rule).
    let signed = Mutex(0)
    /// #49: AsyncHTTPClient's own spans record `url.full`, which for APNs holds the device
    /// token, so this client (shared by the process, as `HTTPClient.shared` is) makes none;
    /// `send` makes the span itself, without the path.
    static let http: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.tracing.tracer = nil
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// `url`: `APNS_URL` for both environments (a local stand-in), else Apple's two hosts.
    init(url: String?, caBundle: String? = nil, store: any APNsTokenStore, clock: any WallClock) {
        self.tls = caBundle.map { path in
            var t = TLSConfiguration.makeClientConfiguration()
            t.trustRoots = .file(path)
            return t
        }
        self.store = store
        self.production = url ?? "https://api.push.apple.com"
        self.sandbox = url ?? "https://api.sandbox.push.apple.com"
        self.clock = clock
    }

    /// The token in force: this process's copy, else the stored one, else a new one (one
    /// signing at a time per app: a fan-out's first sends wait for it).
    func providerToken(app: UUID, _ c: APNsCredentials, forceRenew: Bool = false) async throws -> String {
        let now = clock.now()
        let key = app.lowercasedString + "|" + c.fingerprint
        if let cached = Self.usable(tokens.withLock({ $0[key] }), now: now, forceRenew: forceRenew) { return cached }
        let task = pending.withLock { p -> Task<String, any Error> in
            if let running = p[key] { return running }
            let t = Task { try await self.renew(app: app, c, key: key, now: now, forceRenew: forceRenew) }
            p[key] = t
            return t
        }
        defer { pending.withLock { _ = $0.removeValue(forKey: key) } }
        return try await task.value
    }

    private func renew(app: UUID, _ c: APNsCredentials, key: String, now: Date, forceRenew: Bool) async throws -> String {
        if let stored = try await store.current(app: app, fingerprint: c.fingerprint),
            let jwt = Self.usable(stored, now: now, forceRenew: forceRenew)
        {
            tokens.withLock { $0[key] = stored }
            return jwt
        }
        let iat = Int(now.timeIntervalSince1970)
        let header = Base64URL.encode(Data(#"{"alg":"ES256","kid":"\#(c.keyID)"}"#.utf8))
        let claims = Base64URL.encode(Data(#"{"iss":"\#(c.teamID)","iat":\#(iat)}"#.utf8))
        let input = header + "." + claims
        let jwt = input + "." + Base64URL.encode(try c.privateKey.signature(for: Data(input.utf8)).rawRepresentation)
        let before = now.addingTimeInterval(-(forceRenew ? Self.minimumAge : Self.renewAfter))
        let inForce = try await store.replace(app: app, fingerprint: c.fingerprint, jwt: jwt, issuedAt: now, before: before) ?? (jwt, now)
        if inForce.jwt == jwt { signed.withLock { $0 += 1 } }
        tokens.withLock { $0[key] = inForce }
        return inForce.jwt
    }

    /// A token younger than 40 minutes; for a forced renewal (Apple said expired), one younger
    /// than 20 minutes is kept all the same.
    static func usable(_ entry: (jwt: String, issuedAt: Date)?, now: Date, forceRenew: Bool) -> String? {
        guard let entry else { return nil }
        let age = now.timeIntervalSince(entry.issuedAt)
        if age < 0 { return nil }  // a clock that went back: sign again rather than send a future iat
        if forceRenew { return age < minimumAge ? entry.jwt : nil }
        return age < renewAfter ? entry.jwt : nil
    }

    func send(_ m: PushSend, app: UUID, credentials c: APNsCredentials) async -> PushResult {
        guard Telemetry.isRecording else { return await deliver(m, app: app, credentials: c) }
        let span = Telemetry.startSpan("POST", ofKind: .client)
        let server = CurlHTTPClient.server(of: m.environment == .sandbox ? sandbox : production)
        span.attributes["http.request.method"] = "POST"
        span.attributes["server.address"] = server.host
        span.attributes["server.port"] = server.port
        span.attributes["url.scheme"] = server.scheme
        span.attributes["apns.id"] = m.id.uuidString.lowercased()
        defer { span.end() }
        let result = await deliver(m, app: app, credentials: c)
        span.attributes["http.response.status_code"] = result.status
        if result.status.map({ $0 >= 400 }) ?? true { span.setStatus(SpanStatus(code: .error)) }
        return result
    }

    private func deliver(_ m: PushSend, app: UUID, credentials c: APNsCredentials) async -> PushResult {
        let payload = PushPayload.apns(m.decision, kind: m.kind, data: m.data)
        let alert: Bool = if case .alert = m.decision { true } else { false }
        let base = m.environment == .sandbox ? sandbox : production
        for attempt in 0..<2 {
            let jwt: String
            do { jwt = try await providerToken(app: app, c, forceRenew: attempt > 0) } catch {
                return PushResult(action: .retry(retryAfter: nil), status: nil, reason: "provider token: \(error)")
            }
            var headers: [(String, String)] = [
                ("authorization", "bearer \(jwt)"), ("apns-topic", c.topic), ("apns-id", m.id.uuidString.lowercased()),
                ("apns-push-type", alert ? "alert" : "background"), ("apns-priority", alert ? "10" : "5"),
                // A day: a device off for longer gets nothing stale.
                ("apns-expiration", String(Int(clock.now().timeIntervalSince1970) + 86_400)),
                ("content-type", "application/json"),
            ]
            if let collapse = m.kind.collapseID { headers.append(("apns-collapse-id", collapse)) }
            var request = HTTPClientRequest(url: "\(base)/3/device/\(m.token)")
            request.method = .POST
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let id = RequestTrace.requestID { request.headers.add(name: "x-request-id", value: id) }
            request.body = .bytes(ByteBuffer(bytes: payload))
            request.tlsConfiguration = tls
            do {
                let response = try await Self.http.execute(request, timeout: .seconds(10))
                let body = try await response.body.collect(upTo: 64 * 1024)
                struct Reason: Decodable { var reason: String? }
                let reason = (try? JSONDecoder().decode(Reason.self, from: Data(buffer: body)))?.reason
                let status = Int(response.status.code)
                let result = PushResult.apns(
                    status: status,
                    reason: reason,
                    retryAfter: response.headers.first(name: "retry-after").flatMap { Int($0) }
                )
                // An expired token (our clock or a lost cache): sign again once, if the rule allows.
                if status == 403, reason == "ExpiredProviderToken", attempt == 0,
                    (try? await providerToken(app: app, c, forceRenew: true)) != jwt
                {
                    continue
                }
                return result
            } catch {
                return PushResult(action: .retry(retryAfter: nil), status: nil, reason: "\(error)")
            }
        }
        return PushResult(action: .credentialsRefused, status: 403, reason: "ExpiredProviderToken")
    }
}

/// FCM HTTP v1 with a service account: an OAuth2 access token from a signed JWT (RS256, scope
/// `firebase.messaging`, the JWT bearer grant), cached until a minute before it expires.
final class FCMClient: Sendable {
    let http: CurlHTTPClient
    let baseURL: String
    let tokenURL: String
    let clock: any WallClock
    private let tokens = Mutex([String: (token: String, expires: Date)]())
    let grants = Mutex(0)

    init(http: CurlHTTPClient, baseURL: String, tokenURL: String, clock: any WallClock) {
        self.http = http
        self.baseURL = baseURL
        self.tokenURL = tokenURL
        self.clock = clock
    }

    /// One grant at a time per service account: concurrent sends wait for it rather than each
    /// asking Google (a fan-out would otherwise start with hundreds of grants).
    func accessToken(_ c: FCMCredentials, renew: Bool = false) async throws -> String {
        let now = clock.now()
        let task = pending.withLock { p -> Task<(String, Date), any Error>? in
            if !renew, let cached = tokens.withLock({ $0[c.clientEmail] }), cached.expires > now.addingTimeInterval(60) { return nil }
            if let running = p[c.clientEmail] { return running }
            let t = Task { try await self.grant(c, now: now) }
            p[c.clientEmail] = t
            return t
        }
        guard let task else { return tokens.withLock { $0[c.clientEmail]!.token } }
        defer { pending.withLock { _ = $0.removeValue(forKey: c.clientEmail) } }
        return try await task.value.0
    }

    private let pending = Mutex([String: Task<(String, Date), any Error>]())

    private func grant(_ c: FCMCredentials, now: Date) async throws -> (String, Date) {
        let t = try await GoogleServiceAccount.grant(
            http: http,
            tokenURL: tokenURL,
            clientEmail: c.clientEmail,
            scope: "https://www.googleapis.com/auth/firebase.messaging",
            privateKey: c.privateKey,
            now: now
        )
        grants.withLock { $0 += 1 }
        tokens.withLock { $0[c.clientEmail] = (t.token, t.expires) }
        return (t.token, t.expires)
    }

    func send(_ m: PushSend, credentials c: FCMCredentials) async -> PushResult {
        let body = PushPayload.fcm(m.decision, kind: m.kind, token: m.token, data: m.data)
        for attempt in 0..<2 {
            let token: String
            do { token = try await accessToken(c, renew: attempt > 0) } catch let e as GoogleServiceAccount.TokenError {
                // Google refused the service account (a deleted key): the operator's to fix.
                return (500...599).contains(e.status)
                    ? PushResult(action: .retry(retryAfter: nil), status: e.status, reason: "token endpoint")
                    : PushResult(action: .credentialsRefused, status: e.status, reason: "service account refused")
            } catch {
                return PushResult(action: .retry(retryAfter: nil), status: nil, reason: "\(error)")
            }
            let request = HTTPRequest(
                method: "POST",
                url: "\(baseURL)/v1/projects/\(c.projectID)/messages:send",
                headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                body: body,
                timeout: .seconds(10),
                connectTimeout: .seconds(5)
            )
            do {
                let response = try await http.send(request)
                // An access token Google no longer takes: one new grant, then the answer stands.
                if response.status == 401, attempt == 0 { continue }
                let result = PushResult.fcm(
                    status: response.status,
                    errorCode: Self.errorCode(response.body),
                    retryAfter: response.header("retry-after").flatMap { Int($0) }
                )
                return result
            } catch {
                return PushResult(action: .retry(retryAfter: nil), status: nil, reason: "\(error)")
            }
        }
        return PushResult(action: .credentialsRefused, status: 401, reason: "UNAUTHENTICATED")
    }

    /// `error.details[].errorCode` of FCM's answer, else its canonical `error.status`.
    static func errorCode(_ body: Data) -> String? {
        struct E: Decodable {
            struct Inner: Decodable {
                var status: String?
                var details: [Detail]?
            }
            struct Detail: Decodable { var errorCode: String? }
            var error: Inner?
        }
        guard let e = try? JSONDecoder().decode(E.self, from: body).error else { return nil }
        return e.details?.compactMap(\.errorCode).first ?? e.status
    }
}

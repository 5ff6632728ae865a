import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL
import SwiftASN1
import Synchronization
import X509
import _CryptoExtras

/// Local stand-ins for Apple's APNs (HTTP/2, h2c with prior knowledge, token auth) and Google's
/// FCM HTTP v1 (with its OAuth2 token endpoint), speaking the real protocols and verifying what
/// we sign with the public keys a test (or `make run`) registers. Tests, `make run` and
/// `make bench` use them; a control API (`/_standin/...` on the HTTP/1.1 port) registers keys,
/// marks tokens dead or failing and reads what arrived.
public final class PushStandIn: Sendable {
    public struct Received: Codable, Sendable {
        public var provider: String
        public var token: String
        public var headers: [String: String]
        public var payload: String
        public var at: Double
    }

    struct APNsKey: Sendable {
        var teamID: String
        var publicKey: P256.Signing.PublicKey
    }
    struct State: Sendable {
        var apnsKeys: [String: APNsKey] = [:]
        var fcmAccounts: [String: _RSA.Signing.PublicKey] = [:]
        var accessTokens: [String: Double] = [:]
        /// Tokens APNs/FCM no longer know (410 / UNREGISTERED).
        var unregistered: Set<String> = []
        var badTokens: Set<String> = []
        /// Answers to give a token before it is accepted (429, 503...).
        var failures: [String: [Int]] = [:]
        var received: [Received] = []
        /// The provider tokens seen per key id, with their `iat`: Apple's rule is one new token
        /// per 20 minutes at most.
        var lastProviderToken: [String: (jwt: String, iat: Int)] = [:]
        /// The tokens in force, verified once (by their text), with their `iat`.
        var verified: [String: Int] = [:]
        var providerTokens = 0
        var oauthGrants = 0
        var refusedTooManyUpdates = 0
        /// Seconds added to the wall clock (a test that moves time moves the stand-in's too).
        var clockOffset: Double = 0
    }
    let state = Mutex(State())
    let logger: Logger
    let quiet: Bool
    /// How many received pushes are kept for `/_standin/received` (the bench sends many).
    let keep: Int

    public init(logger: Logger = Logger(label: "push-standin"), quiet: Bool = true, keep: Int = 10_000) {
        self.logger = logger
        self.quiet = quiet
        self.keep = keep
    }

    var now: Double { Date().timeIntervalSince1970 + state.withLock { $0.clockOffset } }

    // MARK: control (also called directly by in-process tests)

    public func addAPNsKey(teamID: String, keyID: String, publicKey: P256.Signing.PublicKey) {
        state.withLock {
            $0.apnsKeys[keyID] = APNsKey(teamID: teamID, publicKey: publicKey)
            $0.verified = [:]  // a replaced key: every token is verified again
        }
    }
    public func addFCMAccount(clientEmail: String, publicKey: _RSA.Signing.PublicKey) {
        state.withLock { $0.fcmAccounts[clientEmail] = publicKey }
    }
    public func unregister(_ token: String) { state.withLock { _ = $0.unregistered.insert(token) } }
    public func markBad(_ token: String) { state.withLock { _ = $0.badTokens.insert(token) } }
    public func fail(_ token: String, with statuses: [Int]) { state.withLock { $0.failures[token] = statuses } }
    public func moveClock(by seconds: Double) { state.withLock { $0.clockOffset += seconds } }
    public var received: [Received] { state.withLock { $0.received } }
    public var providerTokens: Int { state.withLock { $0.providerTokens } }
    public var oauthGrants: Int { state.withLock { $0.oauthGrants } }
    public var refusedTooManyUpdates: Int { state.withLock { $0.refusedTooManyUpdates } }
    public func reset() {
        state.withLock {
            $0.received = []
            $0.failures = [:]
        }
    }

    // MARK: APNs

    /// A stop does not wait for the client's idle connection to go (10 s by default).
    static var http2: HTTP2ChannelConfiguration { .init(idleTimeout: .seconds(60), gracefulCloseTimeout: .milliseconds(200)) }

    /// A certificate for `localhost` and 127.0.0.1 issued by a throwaway CA, whose PEM is written
    /// to `caPath` (the client's `APNS_CA_BUNDLE`). TLS with ALPN h2, as Apple's hosts speak it:
    /// libcurl 7.88 (Debian 12) breaks an h2c prior-knowledge connection on its first reuse
    /// (curl#10634, fixed in 7.89), so the stand-in is reached as APNs is, over TLS.
    public static func tls(caPath: String) throws -> TLSConfiguration {
        let now = Date()
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("Push stand-in CA") }
        let ca = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(caKey.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 86400 * 365,
            issuer: caName,
            subject: caName,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(caKey)
        )
        let key = P256.Signing.PrivateKey()
        let cert = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 86400 * 365,
            issuer: caName,
            subject: try DistinguishedName { CommonName("localhost") },
            extensions: try Certificate.Extensions {
                SubjectAlternativeNames([.dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))])
                try ExtendedKeyUsage([.serverAuth])
            },
            issuerPrivateKey: .init(caKey)
        )
        try ca.serializeAsPEM().pemString.write(toFile: caPath, atomically: true, encoding: .utf8)
        var config = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(cert.serializeAsPEM().pemString.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(key.pemRepresentation.utf8), format: .pem))
        )
        config.applicationProtocols = ["h2", "http/1.1"]
        return config
    }

    /// The APNs application, `POST /3/device/{token}`: HTTP/2 over TLS when given `tls`, else
    /// HTTP/2 without TLS (prior knowledge).
    public func apnsApplication(port: Int, tls: TLSConfiguration? = nil) throws -> some ApplicationProtocol {
        let router = Router()
        router.post("3/device/:token") { request, context -> Response in
            let token = context.parameters.get("token") ?? ""
            let body = try await request.body.collect(upTo: 1 << 16)
            return self.apns(token: token, headers: request.headers, body: body)
        }
        return Application(
            router: router,
            server: try tls.map { try .http2Upgrade(tlsConfiguration: $0, configuration: Self.http2) } ?? .plaintextHTTP2(configuration: Self.http2),
            configuration: .init(address: .hostname("127.0.0.1", port: port)),
            logger: logger
        )
    }

    func apnsError(_ status: HTTPResponse.Status, _ reason: String, extra: String = "") -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"reason":"\#(reason)"\#(extra)}"#))
        )
    }

    func apns(token: String, headers: HTTPFields, body: ByteBuffer) -> Response {
        guard let auth = headers[.authorization], auth.lowercased().hasPrefix("bearer ") else { return apnsError(.forbidden, "MissingProviderToken") }
        let jwt = String(auth.dropFirst(7))
        switch verifyProviderToken(jwt) {
        case .some(let refusal): return refusal
        case .none: break
        }
        guard let topic = headers[HTTPField.Name("apns-topic")!], !topic.isEmpty else { return apnsError(.badRequest, "MissingTopic") }
        guard let type = headers[HTTPField.Name("apns-push-type")!], ["alert", "background"].contains(type) else {
            return apnsError(.badRequest, "InvalidPushType")
        }
        if type == "background", headers[HTTPField.Name("apns-priority")!] != "5" { return apnsError(.badRequest, "BadPriority") }
        guard body.readableBytes <= 4096 else { return apnsError(.contentTooLarge, "PayloadTooLarge") }
        guard token.count >= 64, token.allSatisfy(\.isHexDigit) else { return apnsError(.badRequest, "BadDeviceToken") }
        enum Verdict {
            case ok
            case failure(Int)
            case unregistered, bad
        }
        let verdict: Verdict = state.withLock { s in
            if s.unregistered.contains(token) { return .unregistered }
            if s.badTokens.contains(token) { return .bad }
            if var f = s.failures[token], !f.isEmpty {
                let status = f.removeFirst()
                s.failures[token] = f
                return .failure(status)
            }
            return .ok
        }
        switch verdict {
        case .unregistered: return apnsError(.gone, "Unregistered", extra: #","timestamp":\#(Int(now * 1000))"#)
        case .bad: return apnsError(.badRequest, "BadDeviceToken")
        case .failure(let status):
            var r = apnsError(.init(code: status), status == 429 ? "TooManyRequests" : "ServiceUnavailable")
            r.headers[.retryAfter] = "1"
            return r
        case .ok: break
        }
        var kept: [String: String] = [:]
        for name in ["apns-topic", "apns-push-type", "apns-priority", "apns-expiration", "apns-collapse-id", "apns-id"] {
            if let v = headers[HTTPField.Name(name)!] { kept[name] = v }
        }
        record(Received(provider: "apns", token: token, headers: kept, payload: String(buffer: body), at: now))
        var response = Response(status: .ok)
        response.headers[HTTPField.Name("apns-id")!] = headers[HTTPField.Name("apns-id")!] ?? UUID().uuidString
        return response
    }

    /// Nil when the provider token is good; otherwise Apple's refusal. A token already verified
    /// (the one in force for its key) is not verified again, only its age: APNs checks a token
    /// once and then holds it, and a stand-in that paid an ECDSA verification and two JSON
    /// decodings per push cost more than the sender it measures (#45: 431 us per push against
    /// auth's 385 us on a slow host).
    func verifyProviderToken(_ jwt: String) -> Response? {
        if let iat = state.withLock({ $0.verified[jwt] }) {
            if iat < Int(now) - 3600 { return apnsError(.forbidden, "ExpiredProviderToken") }
            return nil
        }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        struct Header: Decodable {
            var alg: String
            var kid: String?
        }
        struct Claims: Decodable {
            var iss: String?
            var iat: Int?
        }
        guard parts.count == 3, let h = decode(Header.self, parts[0]), let c = decode(Claims.self, parts[1]),
            let sig = base64URL(parts[2]), h.alg == "ES256", let kid = h.kid
        else { return apnsError(.forbidden, "InvalidProviderToken") }
        guard let key = state.withLock({ $0.apnsKeys[kid] }), c.iss == key.teamID,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: sig),
            key.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
        else {
            return apnsError(.forbidden, "InvalidProviderToken")
        }
        guard let iat = c.iat else { return apnsError(.forbidden, "InvalidProviderToken") }
        let t = Int(now)
        if iat < t - 3600 { return apnsError(.forbidden, "ExpiredProviderToken") }
        return state.withLock { s -> Response? in
            if let last = s.lastProviderToken[kid], last.jwt != jwt {
                // A new token less than 20 minutes after the previous one.
                if iat - last.iat < 1200 {
                    s.refusedTooManyUpdates += 1
                    return apnsError(.tooManyRequests, "TooManyProviderTokenUpdates")
                }
            }
            if s.lastProviderToken[kid]?.jwt != jwt {
                s.lastProviderToken[kid] = (jwt, iat)
                s.providerTokens += 1
            }
            // Only the tokens in force are held: a replaced one is verified again if it comes back.
            s.verified = Dictionary(s.lastProviderToken.values.map { ($0.jwt, $0.iat) }, uniquingKeysWith: { a, _ in a })
            return nil
        }
    }

    // MARK: FCM and Google's token endpoint (HTTP/1.1)

    public func httpApplication(port: Int) -> some ApplicationProtocol {
        let router = Router()
        router.post("token") { request, _ -> Response in
            let body = String(buffer: try await request.body.collect(upTo: 1 << 16))
            return self.token(form: body)
        }
        router.post("v1/projects/:project/messages:send") { request, context -> Response in
            let body = try await request.body.collect(upTo: 1 << 16)
            return self.fcm(project: context.parameters.get("project") ?? "", headers: request.headers, body: body)
        }
        router.post("_standin/apns/keys") { request, _ -> Response in
            struct K: Decodable {
                var team_id: String
                var key_id: String
                var public_key_pem: String
            }
            let k = try JSONDecoder().decode(K.self, from: Data(buffer: try await request.body.collect(upTo: 1 << 16)))
            self.addAPNsKey(teamID: k.team_id, keyID: k.key_id, publicKey: try P256.Signing.PublicKey(pemRepresentation: k.public_key_pem))
            return Response(status: .noContent)
        }
        router.post("_standin/fcm/accounts") { request, _ -> Response in
            struct A: Decodable {
                var client_email: String
                var public_key_pem: String
            }
            let a = try JSONDecoder().decode(A.self, from: Data(buffer: try await request.body.collect(upTo: 1 << 16)))
            self.addFCMAccount(clientEmail: a.client_email, publicKey: try _RSA.Signing.PublicKey(pemRepresentation: a.public_key_pem))
            return Response(status: .noContent)
        }
        router.post("_standin/tokens/:token/:state") { _, context -> Response in
            let token = context.parameters.get("token") ?? ""
            switch context.parameters.get("state") {
            case "unregistered": self.unregister(token)
            case "bad": self.markBad(token)
            case "fail-503": self.fail(token, with: [503])
            case "fail-429": self.fail(token, with: [429])
            default: return Response(status: .badRequest)
            }
            return Response(status: .noContent)
        }
        router.get("_standin/received") { _, _ -> Response in
            let data = try JSONEncoder().encode(self.received)
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
        router.get("_standin/stats") { _, _ -> Response in
            let s = self.state.withLock { s in
                #"{"received":\#(s.received.count),"provider_tokens":\#(s.providerTokens),"oauth_grants":\#(s.oauthGrants),"refused_too_many_updates":\#(s.refusedTooManyUpdates)}"#
            }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: s)))
        }
        router.delete("_standin/received") { _, _ -> Response in
            self.reset()
            return Response(status: .noContent)
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
    }

    func oauthError(_ status: HTTPResponse.Status, _ error: String) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"error":"\#(error)"}"#))
        )
    }

    /// Google's token endpoint: the JWT bearer grant, RS256 over the service account's key.
    func token(form: String) -> Response {
        var fields: [String: String] = [:]
        for pair in form.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            if kv.count == 2 { fields[kv[0]] = kv[1] }
        }
        guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = fields["assertion"] else {
            return oauthError(.badRequest, "unsupported_grant_type")
        }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        struct Header: Decodable { var alg: String }
        struct Claims: Decodable {
            var iss: String
            var scope: String
            var aud: String
            var iat: Int
            var exp: Int
        }
        guard parts.count == 3, let h = decode(Header.self, parts[0]), h.alg == "RS256", let c = decode(Claims.self, parts[1]),
            let sig = base64URL(parts[2]), let key = state.withLock({ $0.fcmAccounts[c.iss] }),
            key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: sig),
                for: SHA256.hash(data: Data((parts[0] + "." + parts[1]).utf8)),
                padding: .insecurePKCS1v1_5
            )
        else { return oauthError(.badRequest, "invalid_grant") }
        guard c.scope.split(separator: " ").contains("https://www.googleapis.com/auth/firebase.messaging"), c.aud.hasSuffix("/token"),
            c.exp > Int(now), c.exp - c.iat <= 3600
        else { return oauthError(.badRequest, "invalid_grant") }
        let token = "ya29.standin-" + UUID().uuidString
        let expires = now + 3600
        state.withLock {
            $0.accessTokens[token] = expires
            $0.oauthGrants += 1
        }
        return Response(
            status: .ok,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"access_token":"\#(token)","expires_in":3599,"token_type":"Bearer"}"#))
        )
    }

    func fcmError(_ code: Int, _ status: String, _ errorCode: String?) -> Response {
        let details = errorCode.map { #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"# } ?? ""
        return Response(
            status: .init(code: code),
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"error":{"code":\#(code),"message":"\#(status)","status":"\#(status)"\#(details)}}"#))
        )
    }

    func fcm(project: String, headers: HTTPFields, body: ByteBuffer) -> Response {
        guard let auth = headers[.authorization], auth.hasPrefix("Bearer "),
            let expires = state.withLock({ $0.accessTokens[String(auth.dropFirst(7))] }), expires > now
        else {
            return fcmError(401, "UNAUTHENTICATED", nil)
        }
        struct Message: Decodable {
            struct M: Decodable { var token: String? }
            var message: M
        }
        guard let m = try? JSONDecoder().decode(Message.self, from: Data(buffer: body)), let token = m.message.token else {
            return fcmError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT")
        }
        enum Verdict {
            case ok
            case failure(Int)
            case unregistered
        }
        let verdict: Verdict = state.withLock { s in
            if s.unregistered.contains(token) { return .unregistered }
            if var f = s.failures[token], !f.isEmpty {
                let st = f.removeFirst()
                s.failures[token] = f
                return .failure(st)
            }
            return .ok
        }
        switch verdict {
        case .unregistered: return fcmError(404, "NOT_FOUND", "UNREGISTERED")
        case .failure(let status):
            var r = fcmError(status, status == 429 ? "RESOURCE_EXHAUSTED" : "UNAVAILABLE", status == 429 ? "QUOTA_EXCEEDED" : "UNAVAILABLE")
            r.headers[.retryAfter] = "1"
            return r
        case .ok: break
        }
        record(Received(provider: "fcm", token: token, headers: ["project": project], payload: String(buffer: body), at: now))
        return Response(
            status: .ok,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"name":"projects/\#(project)/messages/\#(UInt32.random(in: 1...UInt32.max))"}"#))
        )
    }

    // MARK: helpers

    func record(_ r: Received) {
        if !quiet {
            logger.notice("push received", metadata: ["provider": "\(r.provider)", "token": "\(r.token.suffix(8))", "payload": "\(r.payload)"])
        }
        state.withLock { s in
            s.received.append(r)
            if s.received.count > keep { s.received.removeFirst(s.received.count - keep) }
        }
    }

    func base64URL(_ s: String) -> Data? {
        var b = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b.count % 4 != 0 { b += "=" }
        return Data(base64Encoded: b)
    }

    func decode<T: Decodable>(_ type: T.Type, _ part: String) -> T? {
        base64URL(part).flatMap { try? JSONDecoder().decode(T.self, from: $0) }
    }
}

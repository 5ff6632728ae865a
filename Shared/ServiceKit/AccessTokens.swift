import Crypto
import Foundation
import Logging
import Synchronization
import WireTypes

/// Auth's signing key: Ed25519 (JWS `EdDSA`), named by a `kid` derived from the public key.
public struct AccessTokenSigner: Sendable {
    public let privateKey: Curve25519.Signing.PrivateKey
    public let kid: String
    public let issuer: String

    /// `kidOverride` exists for tests that forge a token under the real key's name.
    public init(privateKey: Curve25519.Signing.PrivateKey, issuer: String = "auth", kidOverride: String? = nil) {
        self.privateKey = privateKey
        self.issuer = issuer
        self.kid = kidOverride ?? Self.kid(of: privateKey.publicKey)
    }

    /// A thumbprint prefix of the public key: stable for a key, different for a new one.
    public static func kid(of publicKey: Curve25519.Signing.PublicKey) -> String {
        String(Base64URL.encode(Data(SHA256.hash(data: publicKey.rawRepresentation))).prefix(16))
    }

    /// The JWK of a public key published beside the signing key (the next key before it
    /// signs, the previous one until its last token expires).
    public static func jwk(of publicKey: Curve25519.Signing.PublicKey) -> JWKSDocument.Key {
        JWKSDocument.Key(
            kty: "OKP",
            crv: "Ed25519",
            x: Base64URL.encode(publicKey.rawRepresentation),
            y: nil,
            kid: kid(of: publicKey),
            alg: "EdDSA",
            use: "sig"
        )
    }

    public func sign(_ claims: AccessTokenClaims) throws -> String { try signClaims(claims) }

    /// Any claims as an EdDSA JWS under this key (#47: the console's operator tokens).
    public func signClaims(_ claims: some Encodable) throws -> String {
        let header = #"{"alg":"EdDSA","kid":"\#(kid)","typ":"JWT"}"#
        let payload = try JSON.encoder.encode(claims)
        let input = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(payload)
        let signature = try privateKey.signature(for: Data(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }

    public var jwk: JWKSDocument.Key {
        JWKSDocument.Key(
            kty: "OKP",
            crv: "Ed25519",
            x: Base64URL.encode(privateKey.publicKey.rawRepresentation),
            y: nil,
            kid: kid,
            alg: "EdDSA",
            use: "sig"
        )
    }
}

/// Where a verifier gets auth's public keys: over HTTP in every service but auth itself.
public protocol JWKSSource: Sendable {
    func fetchKeys() async throws -> JWKSDocument
}

/// `GET {auth}/auth/v1/.well-known/jwks.json` through libcurl.
public struct RemoteJWKSSource: JWKSSource {
    public let url: String
    public let http: CurlHTTPClient
    public init(url: String, http: CurlHTTPClient) {
        self.url = url
        self.http = http
    }

    public func fetchKeys() async throws -> JWKSDocument {
        let response = try await http.send(HTTPRequest(url: url, timeout: .seconds(3)), retries: 2)
        guard response.isSuccess else { throw HTTPClientError.transport(code: response.status, message: "JWKS fetch answered \(response.status)") }
        return try response.decode(JWKSDocument.self)
    }
}

/// A key set held in memory (auth verifying its own tokens, tests).
public struct StaticJWKSSource: JWKSSource {
    public let document: JWKSDocument
    public init(_ document: JWKSDocument) { self.document = document }
    public func fetchKeys() async throws -> JWKSDocument { document }
}

/// Verifies auth's access tokens with the public key directly (no actor on the hot path),
/// keeps recently verified tokens until they expire, caches the key set and refetches it when
/// a token names a `kid` it does not know (at most once per `unknownKidRefetchInterval`).
public final class AccessTokenVerifier: Sendable {
    private struct Keys: Sendable {
        var byKid: [String: Curve25519.Signing.PublicKey] = [:]
        var fetchedAt: ContinuousClock.Instant?
        var lastForcedFetch: ContinuousClock.Instant?
    }

    private let source: any JWKSSource
    private let keys = Mutex(Keys())
    /// Keyed by the token's SHA-256 (32 bytes held inline) rather than the token itself
    /// (~300 bytes on the heap): tens of thousands of sessions fit in a few megabytes.
    private let verified = Mutex([TokenDigest: AccessTokenClaims]())

    struct TokenDigest: Hashable {
        var a: UInt64, b: UInt64, c: UInt64, d: UInt64
        init(_ token: String) {
            var words = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
            token.sha256.withUnsafeBytes { raw in
                words = (
                    raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                    raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
                )
            }
            (a, b, c, d) = words
        }
    }
    private let cacheTTL: Duration
    private let unknownKidRefetchInterval: Duration
    private let maxCachedTokens: Int
    /// Tolerance on `iat`/`exp` for clocks a little apart.
    public let leeway: Int = 30

    private let clock: any WallClock
    /// The `iss` values accepted (nil: any, for tests that sign their own tokens).
    private let issuers: Set<String>?

    public init(
        source: any JWKSSource,
        cacheTTL: Duration = .seconds(300),
        unknownKidRefetchInterval: Duration = .seconds(5),
        maxCachedTokens: Int = 50_000,
        issuers: Set<String>? = nil,
        clock: any WallClock = SystemClock()
    ) {
        self.source = source
        self.issuers = issuers
        self.clock = clock
        self.cacheTTL = cacheTTL
        self.unknownKidRefetchInterval = unknownKidRefetchInterval
        self.maxCachedTokens = maxCachedTokens
    }

    /// Verifies `token` for the tenant `appID` at `now`; throws a 401 `AppError` when refused.
    public func verify(_ token: String, appID: UUID, now: Date? = nil) async throws -> AccessTokenClaims {
        let now = now ?? clock.now()
        let nowSeconds = Int(now.timeIntervalSince1970)
        let digest = TokenDigest(token)
        if let hit = verified.withLock({ $0[digest] }) {
            guard hit.exp + leeway > nowSeconds else { throw AppError.invalidToken("Access token expired") }
            guard hit.appID == appID else { throw AppError.invalidToken("Access token was issued for another application") }
            return hit
        }
        let payload = try await verifiedPayload(token)
        guard let claims = try? JSON.decoder.decode(AccessTokenClaims.self, from: payload) else {
            throw AppError.invalidToken("Malformed token claims")
        }
        guard claims.exp + leeway > nowSeconds else { throw AppError.invalidToken("Access token expired") }
        guard claims.iat - leeway <= nowSeconds else { throw AppError.invalidToken("Access token issued in the future") }
        if let issuers { guard issuers.contains(claims.iss) else { throw AppError.invalidToken("Access token from another issuer") } }
        // The audience names the app (tokens from before #32 carry none; app_id still decides).
        if let aud = claims.aud {
            guard aud == claims.appID.lowercasedString else { throw AppError.invalidToken("Access token audience does not match its app") }
        }
        verified.withLock { cache in
            if cache.count >= maxCachedTokens { cache.removeAll(keepingCapacity: true) }
            cache[digest] = claims
        }
        guard claims.appID == appID else { throw AppError.invalidToken("Access token was issued for another application") }
        return claims
    }

    private struct Header: Decodable {
        var alg: String
        var kid: String?
    }

    /// The payload of a JWS signed by one of auth's keys; a 401 `AppError` otherwise. What the
    /// claims mean is the caller's to check (user tokens above, console members' in auth).
    public func verifiedPayload(_ token: String) async throws -> Data {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerData = Base64URL.decode(parts[0]),
            let header = try? JSONDecoder().decode(Header.self, from: headerData),
            let signature = Base64URL.decode(parts[2])
        else {
            throw AppError.invalidToken("Malformed access token")
        }
        // RFC 9864's fully-specified name and the polymorphic one it replaces.
        guard header.alg == "EdDSA" || header.alg == "Ed25519", let kid = header.kid else {
            throw AppError.invalidToken("Unsupported token algorithm")
        }
        guard let key = try await publicKey(kid: kid) else {
            throw AppError.invalidToken("Unknown signing key")
        }
        let input = Data(parts[0].utf8) + Data(".".utf8) + Data(parts[1].utf8)
        guard key.isValidSignature(signature, for: input) else {
            throw AppError.invalidToken("Invalid token signature")
        }
        guard let payload = Base64URL.decode(parts[1]) else { throw AppError.invalidToken("Malformed token claims") }
        return payload
    }

    private func publicKey(kid: String) async throws -> Curve25519.Signing.PublicKey? {
        let now = ContinuousClock.now
        let (known, stale, mayForce) = keys.withLock { k in
            (
                k.byKid[kid],
                k.fetchedAt.map { now - $0 > cacheTTL } ?? true,
                k.lastForcedFetch.map { now - $0 > unknownKidRefetchInterval } ?? true
            )
        }
        if let known, !stale { return known }
        if known == nil && !stale && !mayForce { return nil }
        do {
            let doc = try await source.fetchKeys()
            var parsed: [String: Curve25519.Signing.PublicKey] = [:]
            for k in doc.keys where k.kty == "OKP" && k.crv == "Ed25519" {
                if let x = k.x.flatMap(Base64URL.decode), let pk = try? Curve25519.Signing.PublicKey(rawRepresentation: x) {
                    parsed[k.kid] = pk
                }
            }
            keys.withLock { k in
                k.byKid = parsed
                k.fetchedAt = now
                // Only a refetch caused by an unknown kid counts against the refetch interval.
                if known == nil && !stale { k.lastForcedFetch = now }
            }
            return parsed[kid]
        } catch {
            // Auth unreachable: keep using a key we already had rather than refusing everyone.
            if let known { return known }
            throw AppError(.serviceUnavailable, "service_unavailable", "Cannot verify tokens right now")
        }
    }
}

import AuthDomain
import Foundation
import JWTKit
import Logging
import ServiceKit
import Synchronization

/// The claims of a provider's identity token that sign-in uses.
public struct ProviderIdentity: Sendable, Equatable {
    public var subject: String
    public var email: String?
    public var emailVerified: Bool
    public var name: String?
    public var isPrivateEmail: Bool
    public var nonce: String?
}

/// Fetches a provider's JWKS over HTTP (libcurl), caches it for the `max-age` the provider
/// sends, and refetches early when a token names an unknown `kid` (at most every 10 s).
public final class RemoteKeySet: Sendable {
    private struct State: Sendable {
        var keys: JWTKeyCollection?
        var kids: Set<String> = []
        var expiresAt: ContinuousClock.Instant?
        var lastUnknownKidFetch: ContinuousClock.Instant?
    }

    let url: String
    let http: CurlHTTPClient
    private let state = Mutex(State())

    public init(url: String, http: CurlHTTPClient) {
        self.url = url
        self.http = http
    }

    /// The key collection that knows `kid`, refetching if needed; nil when it stays unknown.
    func keys(for kid: String?) async throws -> JWTKeyCollection? {
        let now = ContinuousClock.now
        let (keys, known, fresh, mayRefetch) = state.withLock { s in
            (
                s.keys, kid.map { s.kids.contains($0) } ?? true, s.expiresAt.map { now < $0 } ?? false,
                s.lastUnknownKidFetch.map { now - $0 > .seconds(10) } ?? true
            )
        }
        if let keys, known, fresh { return keys }
        if let keys, !known, fresh, !mayRefetch {
            _ = keys
            return nil
        }
        let response = try await http.send(HTTPRequest(url: url, timeout: .seconds(5)), retries: 2)
        guard response.isSuccess else { throw HTTPClientError.transport(code: response.status, message: "JWKS \(url) answered \(response.status)") }
        let json = String(decoding: response.body, as: UTF8.self)
        let collection = try await JWTKeyCollection().add(jwksJSON: json)
        struct KidList: Decodable {
            struct K: Decodable { var kid: String? }
            var keys: [K]
        }
        let kids = Set((try JSONDecoder().decode(KidList.self, from: response.body)).keys.compactMap(\.kid))
        let maxAge = Self.maxAge(response.header("Cache-Control")) ?? 3600
        state.withLock { s in
            s.keys = collection
            s.kids = kids
            s.expiresAt = now + .seconds(maxAge)
            if !known && fresh { s.lastUnknownKidFetch = now }
        }
        if let kid, !kids.contains(kid) { return nil }
        return collection
    }

    static func maxAge(_ cacheControl: String?) -> Int? {
        guard let cc = cacheControl else { return nil }
        for part in cc.split(separator: ",") {
            let p = part.trimmingCharacters(in: .whitespaces).lowercased()
            if p.hasPrefix("max-age="), let n = Int(p.dropFirst(8)) { return n }
        }
        return nil
    }
}

/// The payload fields Google and Apple identity tokens share; checks are done by the
/// verifiers below so that each rule of the issue is explicit.
struct IdentityTokenPayload: JWTPayload {
    var iss: String?
    var sub: String?
    var aud: AudienceClaim?
    var exp: Double?
    var iat: Double?
    var email: String?
    var emailVerified: FlexibleBool?
    var isPrivateEmail: FlexibleBool?
    var name: String?
    var nonce: String?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, email
        case emailVerified = "email_verified"
        case isPrivateEmail = "is_private_email"
        case name, nonce
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Apple sends some booleans as strings ("true").
struct FlexibleBool: Codable, Sendable {
    var value: Bool
    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let b = try? c.decode(Bool.self) { value = b } else { value = (try c.decode(String.self)).lowercased() == "true" }
    }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(value)
    }
}

public struct IdentityTokenError: Error, CustomStringConvertible {
    public var description: String
}

/// Common checks: signature by a key of the provider's set (RS256 only), issuer, audience,
/// expiry and issue time with a small skew.
struct IdentityTokenVerifier: Sendable {
    let keySet: RemoteKeySet
    let issuers: Set<String>
    let skew: TimeInterval = 60

    func verify(_ token: String, audiences: [String], now: Date) async throws -> IdentityTokenPayload {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]),
            let header = try? JSONDecoder().decode([String: String].self, from: headerData)
        else {
            throw IdentityTokenError(description: "malformed token")
        }
        guard header["alg"] == "RS256" else { throw IdentityTokenError(description: "algorithm \(header["alg"] ?? "none") refused") }
        guard let keys = try await keySet.keys(for: header["kid"]) else { throw IdentityTokenError(description: "unknown kid") }
        let payload = try await keys.verify(token, as: IdentityTokenPayload.self)
        guard let iss = payload.iss, issuers.contains(iss) else { throw IdentityTokenError(description: "issuer \(payload.iss ?? "-")") }
        guard let aud = payload.aud?.value, !Set(aud).isDisjoint(with: audiences) else { throw IdentityTokenError(description: "audience") }
        guard let exp = payload.exp, exp + skew > now.timeIntervalSince1970 else { throw IdentityTokenError(description: "expired") }
        if let iat = payload.iat, iat - skew > now.timeIntervalSince1970 { throw IdentityTokenError(description: "issued in the future") }
        guard let sub = payload.sub, !sub.isEmpty, sub.count <= 255 else { throw IdentityTokenError(description: "subject") }
        return payload
    }
}

public protocol GoogleSignIn: Sendable {
    func verify(idToken: String, clientIDs: [String], now: Date) async throws -> ProviderIdentity
}

/// Google ID tokens, verified here (never through tokeninfo): RS256 with Google's JWKS,
/// `iss` accounts.google.com (with or without https), `aud` one of the app's client ids.
/// The email is trusted only when `email_verified` is true.
public struct GoogleIdentityVerifier: GoogleSignIn {
    let verifier: IdentityTokenVerifier

    public init(keySet: RemoteKeySet) {
        verifier = IdentityTokenVerifier(keySet: keySet, issuers: ["accounts.google.com", "https://accounts.google.com"])
    }

    public func verify(idToken: String, clientIDs: [String], now: Date) async throws -> ProviderIdentity {
        let p = try await verifier.verify(idToken, audiences: clientIDs, now: now)
        let verified = p.emailVerified?.value ?? false
        return ProviderIdentity(
            subject: p.sub!,
            email: verified ? p.email.flatMap(EmailAddress.normalize) : nil,
            emailVerified: verified,
            name: p.name,
            isPrivateEmail: false,
            nonce: p.nonce
        )
    }
}

import AuthDomain
import Crypto
import Foundation
import Logging
import ServiceKit

/// An app's Sign in with Apple credentials (Apple developer team, key, client id), from
/// `APPLE_SIGNIN_APPS` (JSON keyed by app id).
public struct AppleClientConfig: Sendable {
    public var teamID: String
    public var keyID: String
    public var clientID: String
    public var privateKey: P256.Signing.PrivateKey

    public init(teamID: String, keyID: String, clientID: String, privateKey: P256.Signing.PrivateKey) {
        self.teamID = teamID
        self.keyID = keyID
        self.clientID = clientID
        self.privateKey = privateKey
    }

    /// As an operator gives it (an `APPLE_SIGNIN_APPS` entry, or `apple` in `PUT /admin/sign-in`).
    public struct Settings: Codable, Sendable {
        public var teamID: String
        public var keyID: String
        public var clientID: String
        public var privateKeyPEM: String
        public init(teamID: String, keyID: String, clientID: String, privateKeyPEM: String) {
            self.teamID = teamID
            self.keyID = keyID
            self.clientID = clientID
            self.privateKeyPEM = privateKeyPEM
        }
        enum CodingKeys: String, CodingKey {
            case teamID = "team_id"
            case keyID = "key_id"
            case clientID = "client_id"
            case privateKeyPEM = "private_key_pem"
        }
    }

    static func parse(_ json: String?) throws -> [UUID: AppleClientConfig] {
        guard let json, !json.isEmpty else { return [:] }
        let raw = try JSONDecoder().decode([String: Settings].self, from: Data(json.utf8))
        var out: [UUID: AppleClientConfig] = [:]
        for (app, r) in raw {
            guard let id = UUID(uuidString: app) else { throw ConfigurationError("APPLE_SIGNIN_APPS: \(app) is not an app id") }
            do { out[id] = try AppleClientConfig(r) } catch let e as AppError { throw ConfigurationError("APPLE_SIGNIN_APPS: \(app): \(e.message)") }
        }
        return out
    }

    /// Checked as a request body is: each bad field named.
    public init(_ r: Settings) throws {
        for (field, value) in [("team_id", r.teamID), ("key_id", r.keyID)]
        where !(1...20).contains(value.count) || !value.allSatisfy({ $0.isLetter || $0.isNumber }) {
            throw AppError.validation(field, "\(field) must be Apple's 10-character identifier")
        }
        guard (1...255).contains(r.clientID.count) else { throw AppError.validation("client_id", "client_id is the app's bundle or service id") }
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: r.privateKeyPEM) else {
            throw AppError.validation("private_key_pem", "private_key_pem must be the .p8 key Apple issued (PEM)")
        }
        self.init(teamID: r.teamID, keyID: r.keyID, clientID: r.clientID, privateKey: key)
    }

    /// The client secret Apple's token and revoke endpoints want: an ES256 JWT signed with the
    /// team's key (valid one hour here; Apple allows up to six months).
    func clientSecret(now: Date) throws -> String {
        let header = #"{"alg":"ES256","kid":"\#(keyID)","typ":"JWT"}"#
        let iat = Int(now.timeIntervalSince1970)
        let claims = #"{"aud":"https://appleid.apple.com","exp":\#(iat + 3600),"iat":\#(iat),"iss":"\#(teamID)","sub":"\#(clientID)"}"#
        let input = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(Data(claims.utf8))
        let signature = try privateKey.signature(for: Data(input.utf8))
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }
}

public protocol AppleSignIn: Sendable {
    func verify(identityToken: String, audiences: [String], rawNonce: String?, now: Date) async throws -> ProviderIdentity
    /// Exchanges an authorization code; returns Apple's refresh token.
    func exchange(code: String, config: AppleClientConfig, now: Date) async throws -> String
    func revoke(refreshToken: String, config: AppleClientConfig, now: Date) async throws
}

public struct AppleIdentityError: Error, CustomStringConvertible { public var description: String }

/// Sign in with Apple: identity tokens checked against Apple's JWKS (`iss`
/// https://appleid.apple.com, `aud` one of the app's bundle/services ids, `exp`, and the
/// nonce when the client sends one), codes exchanged and tokens revoked at Apple's endpoints.
public struct AppleIdentityVerifier: AppleSignIn {
    let verifier: IdentityTokenVerifier
    let http: CurlHTTPClient
    let tokenURL: String
    let revokeURL: String

    public init(keySet: RemoteKeySet, http: CurlHTTPClient, tokenURL: String, revokeURL: String) {
        verifier = IdentityTokenVerifier(keySet: keySet, issuers: ["https://appleid.apple.com"])
        self.http = http
        self.tokenURL = tokenURL
        self.revokeURL = revokeURL
    }

    public func verify(identityToken: String, audiences: [String], rawNonce: String?, now: Date) async throws -> ProviderIdentity {
        let p = try await verifier.verify(identityToken, audiences: audiences, now: now)
        guard Self.nonceMatches(tokenNonce: p.nonce, rawNonce: rawNonce) else {
            throw AppleIdentityError(description: rawNonce == nil ? "the token carries a nonce: the raw nonce is required" : "nonce mismatch")
        }
        let verified = p.emailVerified?.value ?? false
        return ProviderIdentity(
            subject: p.sub!,
            email: verified ? p.email.flatMap(EmailAddress.normalize) : nil,
            emailVerified: verified,
            name: nil,
            isPrivateEmail: p.isPrivateEmail?.value ?? false,
            nonce: p.nonce
        )
    }

    /// The token's `nonce` is SHA-256(raw nonce) in hex. A token that carries one was bound to a
    /// sign-in the app started: without the raw nonce it could be a token replayed from another
    /// sign-in, so it is refused. A raw nonce given for a token without one is refused too.
    static func nonceMatches(tokenNonce: String?, rawNonce: String?) -> Bool {
        switch (tokenNonce, rawNonce) {
        case (nil, nil): return true
        case (let t?, let r?): return ConstantTime.equals(t, r.sha256.hexEncoded)
        default: return false
        }
    }

    static func form(_ fields: [(String, String)]) -> Data {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return Data(fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&").utf8)
    }

    public func exchange(code: String, config: AppleClientConfig, now: Date) async throws -> String {
        let body = Self.form([
            ("client_id", config.clientID), ("client_secret", try config.clientSecret(now: now)),
            ("code", code), ("grant_type", "authorization_code"),
        ])
        let response = try await http.send(
            HTTPRequest(
                method: "POST",
                url: tokenURL,
                headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: body,
                timeout: .seconds(10)
            )
        )
        guard response.isSuccess else {
            throw AppleIdentityError(
                description: "token endpoint answered \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))"
            )
        }
        struct TokenResponse: Decodable {
            var refreshToken: String?
            enum CodingKeys: String, CodingKey { case refreshToken = "refresh_token" }
        }
        guard let token = try JSONDecoder().decode(TokenResponse.self, from: response.body).refreshToken else {
            throw AppleIdentityError(description: "no refresh_token in Apple's answer")
        }
        return token
    }

    public func revoke(refreshToken: String, config: AppleClientConfig, now: Date) async throws {
        let body = Self.form([
            ("client_id", config.clientID), ("client_secret", try config.clientSecret(now: now)),
            ("token", refreshToken), ("token_type_hint", "refresh_token"),
        ])
        let response = try await http.send(
            HTTPRequest(
                method: "POST",
                url: revokeURL,
                headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: body,
                timeout: .seconds(10)
            ),
            retries: 2
        )
        guard response.isSuccess else { throw AppleIdentityError(description: "revoke endpoint answered \(response.status)") }
    }
}

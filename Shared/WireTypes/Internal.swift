import Foundation

/// `POST /auth/v1/internal/apps/verify`: another service asks auth whether an
/// (`X-App-ID`, `X-API-Key`) pair is valid.
public struct AppVerificationRequest: Codable, Sendable {
    public var appID: UUID
    public var apiKey: String
    enum CodingKeys: String, CodingKey { case appID = "app_id"; case apiKey = "api_key" }
    public init(appID: UUID, apiKey: String) { self.appID = appID; self.apiKey = apiKey }
}

public struct AppVerificationResponse: Codable, Sendable {
    public var valid: Bool
    public var appID: UUID
    public var name: String?
    enum CodingKeys: String, CodingKey { case valid; case appID = "app_id"; case name }
    public init(valid: Bool, appID: UUID, name: String?) { self.valid = valid; self.appID = appID; self.name = name }
}

/// A JSON Web Key Set as auth publishes it (`/auth/v1/.well-known/jwks.json`).
public struct JWKSDocument: Codable, Sendable {
    public struct Key: Codable, Sendable {
        public var kty: String
        public var crv: String?
        public var x: String?
        public var y: String?
        public var kid: String
        public var alg: String?
        public var use: String?
        public init(kty: String, crv: String?, x: String?, y: String?, kid: String, alg: String?, use: String?) {
            self.kty = kty; self.crv = crv; self.x = x; self.y = y; self.kid = kid; self.alg = alg; self.use = use
        }
    }
    public var keys: [Key]
    public init(keys: [Key]) { self.keys = keys }
}

/// The body of `/health` and `/ready`.
public struct HealthStatus: Codable, Sendable {
    public var status: String
    public var service: String
    public var checks: [String: String]?
    public init(status: String, service: String, checks: [String: String]? = nil) {
        self.status = status; self.service = service; self.checks = checks
    }
}

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

/// Auth → offline and ads (through the outbox) when a user's consents change, and the body of
/// `GET /internal/users/{id}/consents`.
public struct ConsentChange: Codable, Sendable, Equatable {
    public var appID: UUID
    public var userID: UUID
    public var geolocation: Bool
    public var personalizedAds: Bool
    public var analytics: Bool
    public var changedAt: Date

    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case userID = "user_id"
        case geolocation
        case personalizedAds = "personalized_ads"
        case analytics
        case changedAt = "changed_at"
    }

    public init(appID: UUID, userID: UUID, geolocation: Bool, personalizedAds: Bool, analytics: Bool, changedAt: Date) {
        self.appID = appID; self.userID = userID; self.geolocation = geolocation
        self.personalizedAds = personalizedAds; self.analytics = analytics; self.changedAt = changedAt
    }
}

/// `GET /internal/users/{id}`: what other services may know about a user.
public struct UserSummary: Codable, Sendable, Equatable {
    public var id: UUID
    public var appID: UUID
    public var email: String?
    public var emailVerified: Bool
    public var status: UserStatus
    public var isGuest: Bool
    public var createdAt: Date

    enum CodingKeys: String, CodingKey {
        case id
        case appID = "app_id"
        case email
        case emailVerified = "email_verified"
        case status
        case isGuest = "is_guest"
        case createdAt = "created_at"
    }

    public init(id: UUID, appID: UUID, email: String?, emailVerified: Bool, status: UserStatus, isGuest: Bool, createdAt: Date) {
        self.id = id; self.appID = appID; self.email = email; self.emailVerified = emailVerified
        self.status = status; self.isGuest = isGuest; self.createdAt = createdAt
    }
}

/// `PUT /internal/users/{id}/status`, called by subscription when a user becomes premium or free.
public struct UserStatusUpdate: Codable, Sendable, Equatable {
    public var appID: UUID
    public var status: UserStatus
    enum CodingKeys: String, CodingKey { case appID = "app_id"; case status }
    public init(appID: UUID, status: UserStatus) { self.appID = appID; self.status = status }
}

/// `GET /internal/users/{id}/export`: one service's part of a privacy export.
public struct UserDataExport: Codable, Sendable {
    public var service: String
    public var userID: UUID
    public var appID: UUID
    public var sections: [String: JSONValue]
    enum CodingKeys: String, CodingKey { case service; case userID = "user_id"; case appID = "app_id"; case sections }
    public init(service: String, userID: UUID, appID: UUID, sections: [String: JSONValue]) {
        self.service = service; self.userID = userID; self.appID = appID; self.sections = sections
    }
}

/// `DELETE /internal/users/{id}`: what a service deleted or anonymised.
public struct UserDataDeletion: Codable, Sendable {
    public var service: String
    public var userID: UUID
    public var deleted: [String: JSONValue]
    enum CodingKeys: String, CodingKey { case service; case userID = "user_id"; case deleted }
    public init(service: String, userID: UUID, deleted: [String: JSONValue]) {
        self.service = service; self.userID = userID; self.deleted = deleted
    }
}

/// `POST /internal/credits/earn` (ads → subscription): grants credits once per `reference_id`.
public struct CreditEarnRequest: Codable, Sendable, Equatable {
    public var userID: UUID
    public var appID: UUID
    public var amount: Int
    public var source: String
    public var referenceID: String
    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case appID = "app_id"
        case amount, source
        case referenceID = "reference_id"
    }
    public init(userID: UUID, appID: UUID, amount: Int, source: String, referenceID: String) {
        self.userID = userID; self.appID = appID; self.amount = amount; self.source = source; self.referenceID = referenceID
    }
}

/// `GET /internal/users/{id}/entitlement?app_id=` (subscription → ads, offline): whether the
/// user has premium access now, and the features of their plan.
public struct Entitlement: Codable, Sendable, Equatable {
    public var isPremium: Bool
    public var status: String
    public var features: JSONValue
    enum CodingKeys: String, CodingKey { case isPremium = "is_premium"; case status; case features }
    public init(isPremium: Bool, status: String, features: JSONValue) {
        self.isPremium = isPremium; self.status = status; self.features = features
    }
}

import Foundation

/// `POST /auth/v1/internal/apps/verify`: another service asks auth whether an
/// (`X-App-ID`, `X-API-Key`) pair is valid.
public struct AppVerificationRequest: Codable, Sendable {
    public var appID: UUID
    public var apiKey: String
    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case apiKey = "api_key"
    }
    public init(appID: UUID, apiKey: String) {
        self.appID = appID
        self.apiKey = apiKey
    }
}

public struct AppVerificationResponse: Codable, Sendable {
    public var valid: Bool
    public var appID: UUID
    public var name: String?
    /// The key is right but an operator disabled the app (its requests get 403 `app_disabled`).
    public var disabled: Bool?
    enum CodingKeys: String, CodingKey {
        case valid
        case appID = "app_id"
        case name
        case disabled
    }
    public init(valid: Bool, appID: UUID, name: String?, disabled: Bool? = nil) {
        self.valid = valid
        self.appID = appID
        self.name = name
        self.disabled = disabled
    }
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
            self.kty = kty
            self.crv = crv
            self.x = x
            self.y = y
            self.kid = kid
            self.alg = alg
            self.use = use
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
        self.status = status
        self.service = service
        self.checks = checks
    }
}

/// The body of `GET /internal/users/{id}/consents`: auth's consents as they stand.
public struct ConsentChange: Codable, Sendable, Equatable {
    public var appID: UUID
    public var userID: UUID
    public var geolocation: Bool
    public var personalizedAds: Bool
    public var analytics: Bool
    public var changedAt: Date
    /// Each consent's version at auth (0: never changed), so a receiver can store the answer
    /// it asked for and still apply only newer ones.
    public var versions: [String: Int64]?

    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case userID = "user_id"
        case geolocation
        case personalizedAds = "personalized_ads"
        case analytics
        case changedAt = "changed_at"
        case versions
    }

    public init(
        appID: UUID,
        userID: UUID,
        geolocation: Bool,
        personalizedAds: Bool,
        analytics: Bool,
        changedAt: Date,
        versions: [String: Int64]? = nil
    ) {
        self.appID = appID
        self.userID = userID
        self.geolocation = geolocation
        self.personalizedAds = personalizedAds
        self.analytics = analytics
        self.changedAt = changedAt
        self.versions = versions
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
        self.id = id
        self.appID = appID
        self.email = email
        self.emailVerified = emailVerified
        self.status = status
        self.isGuest = isGuest
        self.createdAt = createdAt
    }
}

/// `PUT /internal/users/{id}/status`, called by subscription when a user becomes premium or free.
/// `version` is the user's fact counter at subscription: auth keeps the newest.
public struct UserStatusUpdate: Codable, Sendable, Equatable {
    public var appID: UUID
    public var status: UserStatus
    public var version: Int64
    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case status
        case version
    }
    public init(appID: UUID, status: UserStatus, version: Int64) {
        self.appID = appID
        self.status = status
        self.version = version
    }
}

/// `POST /internal/users/{id}/emails/purchase-confirmation`, from subscription when a purchase
/// creates a subscription (seed 2.1 postconditions). Auth holds the address and the mailer; the
/// subscription id makes a redelivery send nothing twice.
public struct PurchaseConfirmation: Codable, Sendable, Equatable {
    public var appID: UUID
    public var subscriptionID: UUID
    public var planType: String
    public var productID: String
    public var store: String
    public var isTrial: Bool
    public var endDate: Date
    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case subscriptionID = "subscription_id"
        case planType = "plan_type"
        case productID = "product_id"
        case store
        case isTrial = "is_trial"
        case endDate = "end_date"
    }
    public init(appID: UUID, subscriptionID: UUID, planType: String, productID: String, store: String, isTrial: Bool, endDate: Date) {
        self.appID = appID
        self.subscriptionID = subscriptionID
        self.planType = planType
        self.productID = productID
        self.store = store
        self.isTrial = isTrial
        self.endDate = endDate
    }
}

/// `GET /internal/users/{id}/export`: one service's part of a privacy export.
public struct UserDataExport: Codable, Sendable {
    public var service: String
    public var userID: UUID
    public var appID: UUID
    public var sections: [String: JSONValue]
    enum CodingKeys: String, CodingKey {
        case service
        case userID = "user_id"
        case appID = "app_id"
        case sections
    }
    public init(service: String, userID: UUID, appID: UUID, sections: [String: JSONValue]) {
        self.service = service
        self.userID = userID
        self.appID = appID
        self.sections = sections
    }
}

/// `DELETE /internal/users/{id}`: what a service deleted or anonymised.
public struct UserDataDeletion: Codable, Sendable {
    public var service: String
    public var userID: UUID
    public var deleted: [String: JSONValue]
    enum CodingKeys: String, CodingKey {
        case service
        case userID = "user_id"
        case deleted
    }
    public init(service: String, userID: UUID, deleted: [String: JSONValue]) {
        self.service = service
        self.userID = userID
        self.deleted = deleted
    }
}

/// `POST /internal/credits/earn` (ads → subscription): grants credits once per `reference_id`.
public struct CreditEarnRequest: Codable, Sendable, Equatable {
    public var userID: UUID
    public var appID: UUID
    public var amount: Int
    public var source: String
    public var referenceID: String
    /// The player was told the reward is pending (the immediate delivery failed): when it lands,
    /// tell them with a push (UC-ADS-4.1 21c.4, UC-ADS-4.4 23c.5).
    public var notify: Bool?
    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case appID = "app_id"
        case amount, source, notify
        case referenceID = "reference_id"
    }
    public init(userID: UUID, appID: UUID, amount: Int, source: String, referenceID: String, notify: Bool? = nil) {
        self.userID = userID
        self.appID = appID
        self.amount = amount
        self.source = source
        self.referenceID = referenceID
        self.notify = notify
    }
}

/// `POST /internal/users/{id}/notifications?app_id=` at auth (the messenger, #30): a push to one
/// user, once per `key` however many times the sender's outbox delivers it.
public struct NotificationRequest: Codable, Sendable, Equatable {
    public var appID: UUID
    public var key: String
    public var kind: String
    public var data: [String: String]
    /// A broadcast (`POST /internal/notifications`): the users it reaches.
    public var userIDs: [UUID]?
    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case key, kind, data
        case userIDs = "user_ids"
    }
    public init(appID: UUID, key: String, kind: String, data: [String: String], userIDs: [UUID]? = nil) {
        self.appID = appID
        self.key = key
        self.kind = kind
        self.data = data
        self.userIDs = userIDs
    }
}

/// `GET /internal/users/{id}/entitlement?app_id=` (subscription → ads, offline): whether the
/// user has premium access now, and the features of their plan.
public struct Entitlement: Codable, Sendable, Equatable {
    public var isPremium: Bool
    public var status: String
    public var features: JSONValue
    enum CodingKeys: String, CodingKey {
        case isPremium = "is_premium"
        case status
        case features
    }
    public init(isPremium: Bool, status: String, features: JSONValue) {
        self.isPremium = isPremium
        self.status = status
        self.features = features
    }
}

/// Auth → every service (through the outbox) when sessions end: logout of one device
/// (`revoked_session_id`), of every device (a new `session_epoch`: tokens of an older epoch are
/// refused), suspension, and erasure (deletion executed, guest expired; terminal). `version` is
/// the user's fact counter at auth, assigned in the transaction that made the change.
/// A fact about one user that its owner pushes with a version (see docs/DESIGN.md).
public protocol VersionedUserFact: Decodable, Sendable {
    var appID: UUID { get }
    var userID: UUID { get }
    var version: Int64 { get }
}

public struct SessionFact: Codable, Sendable, Equatable, VersionedUserFact {
    public enum State: String, Codable, Sendable { case active, suspended, erased }
    public var appID: UUID
    public var userID: UUID
    public var version: Int64
    public var sessionEpoch: Int
    public var state: State
    public var reason: String?
    public var revokedSessionID: UUID?

    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case userID = "user_id"
        case version
        case sessionEpoch = "session_epoch"
        case state, reason
        case revokedSessionID = "revoked_session_id"
    }

    public init(appID: UUID, userID: UUID, version: Int64, sessionEpoch: Int, state: State, reason: String? = nil, revokedSessionID: UUID? = nil) {
        self.appID = appID
        self.userID = userID
        self.version = version
        self.sessionEpoch = sessionEpoch
        self.state = state
        self.reason = reason
        self.revokedSessionID = revokedSessionID
    }
}

/// Subscription → ads and offline (`PUT /internal/users/{id}/entitlement?app_id=`, through the
/// outbox) whenever a user's access may have changed: purchase, renewal, refund, expiry, grace.
/// `version` is the user's fact counter at subscription (the same that orders the status sent to
/// auth); a receiver keeps only the newest. Premium ends at `valid_until` even if the fact that
/// says so (the expiry sweep's) has not arrived yet.
public struct EntitlementFact: Codable, Sendable, Equatable, VersionedUserFact {
    public var appID: UUID
    public var userID: UUID
    public var isPremium: Bool
    public var validUntil: Date?
    public var version: Int64

    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case userID = "user_id"
        case isPremium = "is_premium"
        case validUntil = "valid_until"
        case version
    }

    public init(appID: UUID, userID: UUID, isPremium: Bool, validUntil: Date?, version: Int64) {
        self.appID = appID
        self.userID = userID
        self.isPremium = isPremium
        self.validUntil = validUntil
        self.version = version
    }
}

/// One consent, as its owner last set it (auth → offline and ads; `PUT
/// /internal/users/{id}/consents/{consent}`). A receiver applies it only when `version` is newer
/// than the one it holds for that consent.
public struct ConsentFact: Codable, Sendable, Equatable, VersionedUserFact {
    public var appID: UUID
    public var userID: UUID
    public var consent: String
    public var value: Bool
    public var version: Int64

    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case userID = "user_id"
        case consent, value, version
    }

    public init(appID: UUID, userID: UUID, consent: String, value: Bool, version: Int64) {
        self.appID = appID
        self.userID = userID
        self.consent = consent
        self.value = value
        self.version = version
    }

    /// The consents other services act on, by the name in the path.
    public static let geolocation = "geolocation"
    public static let personalizedAds = "personalized_ads"
    public static let analytics = "analytics"
}

/// Ads → auth: the user answered the personalised-ads question on the ads screen. `basedOn` is
/// the version of auth's answer ads held when the user answered; auth applies the change only if
/// nothing newer happened at auth since (else its newer answer stands and reaches ads).
public struct ConsentAnswer: Codable, Sendable, Equatable {
    public var appID: UUID
    public var value: Bool
    public var basedOn: Int64
    public var source: String
    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case value
        case basedOn = "based_on"
        case source
    }
    public init(appID: UUID, value: Bool, basedOn: Int64, source: String) {
        self.appID = appID
        self.value = value
        self.basedOn = basedOn
        self.source = source
    }
}

/// What a receiver did with a versioned fact: applied it, or kept what it had (an older or
/// repeated version, or a user already erased). Both are a 200: the sender's job is done.
public struct FactOutcome: Codable, Sendable, Equatable {
    public var applied: Bool
    public var reason: String?
    public init(applied: Bool, reason: String? = nil) {
        self.applied = applied
        self.reason = reason
    }
}

/// An operator key presented on an app's admin routes, checked by auth (`POST
/// /internal/operators/verify`).
public struct OperatorVerificationRequest: Codable, Sendable {
    public var appID: UUID
    /// An operator key (`opk_…`) or a console member's access token (#47).
    public var key: String
    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case key
    }
    public init(appID: UUID, key: String) {
        self.appID = appID
        self.key = key
    }
}

public struct OperatorVerificationResponse: Codable, Sendable {
    public var valid: Bool
    /// The key's id and name (never the key): who acted, in the audit logs.
    public var keyID: UUID?
    public var name: String?
    /// #47 a console member's signed-in session: who, and their role now (not when signed in).
    public var memberID: UUID?
    public var email: String?
    public var role: String?
    enum CodingKeys: String, CodingKey {
        case valid
        case keyID = "key_id"
        case name
        case memberID = "member_id"
        case email, role
    }
    public init(valid: Bool, keyID: UUID?, name: String?, memberID: UUID? = nil, email: String? = nil, role: String? = nil) {
        self.valid = valid
        self.keyID = keyID
        self.name = name
        self.memberID = memberID
        self.email = email
        self.role = role
    }
}

/// One thing that happened to a user, as the service that holds it tells it (#16 customer
/// timeline): a purchase event, a credit, an access decision, a sign-in, an ad view…
public struct TimelineEvent: Codable, Sendable, Equatable {
    public var at: Date
    public var service: String
    public var kind: String
    public var summary: String
    public init(at: Date, service: String, kind: String, summary: String) {
        self.at = at
        self.service = service
        self.kind = kind
        self.summary = summary
    }
}

public struct TimelineAnswer: Codable, Sendable {
    public var events: [TimelineEvent]
    public init(events: [TimelineEvent]) { self.events = events }
}

/// `POST /internal/events` (auth, #33): an event for the app's own servers, written to the
/// owner's outbox in the transaction of the change (so it is sent iff the change committed).
/// `id` makes a redelivery a no-op; `version` is the owner's version of the fact, for ordering.
public struct WebhookEventMessage: Codable, Sendable, Equatable {
    public var type: String
    public var id: UUID
    public var appID: UUID
    public var createdAt: Date
    public var version: Int64
    public var data: [String: JSONValue]
    enum CodingKeys: String, CodingKey {
        case type, id
        case appID = "app_id"
        case createdAt = "created_at"
        case version, data
    }
    public init(type: String, id: UUID = UUID(), appID: UUID, createdAt: Date, version: Int64, data: [String: JSONValue]) {
        self.type = type
        self.id = id
        self.appID = appID
        self.createdAt = createdAt
        self.version = version
        self.data = data
    }
}

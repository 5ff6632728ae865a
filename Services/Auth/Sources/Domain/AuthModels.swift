import Foundation
import ServiceCore
import WireTypes

/// The sign-in paths of UC-AUTH-1.1/1.2.
public enum AuthProvider: String, Codable, Sendable, CaseIterable {
    case google, apple, email, guest
}

/// `device_info` of register/login; stored with the refresh token.
public struct DeviceInfo: Codable, Sendable, Equatable {
    public var deviceID: String?
    public var platform: String?
    public var appVersion: String?
    public var osVersion: String?

    package enum CodingKeys: String, CodingKey {
        case deviceID = "device_id"
        case platform
        case appVersion = "app_version"
        case osVersion = "os_version"
    }

    public init(deviceID: String? = nil, platform: String? = nil, appVersion: String? = nil, osVersion: String? = nil) {
        self.deviceID = deviceID
        self.platform = platform
        self.appVersion = appVersion
        self.osVersion = osVersion
    }
}

/// Apple sends the name (and email) only on the first sign-in.
public struct AppleUserInfo: Codable, Sendable, Equatable {
    public var firstName: String?
    public var lastName: String?
    public var email: String?
    package enum CodingKeys: String, CodingKey {
        case firstName = "first_name"
        case lastName = "last_name"
        case email
    }
}

/// `credentials` of register/login: which fields are required depends on the provider.
public struct Credentials: Codable, Sendable {
    public var googleIDToken: String?
    public var appleIdentityToken: String?
    public var appleAuthorizationCode: String?
    public var userInfo: AppleUserInfo?
    public var nonce: String?
    public var email: String?
    public var password: String?
    public var deviceID: String?
    /// The guest's secret, given once when the guest was created.
    public var guestSecret: String?

    package enum CodingKeys: String, CodingKey {
        case guestSecret = "guest_secret"
        case googleIDToken = "google_id_token"
        case appleIdentityToken = "apple_identity_token"
        case appleAuthorizationCode = "apple_authorization_code"
        case userInfo = "user_info"
        case nonce, email, password
        case deviceID = "device_id"
    }

    package func require(_ value: String?, _ field: String) throws -> String {
        guard let value, !value.isEmpty else {
            throw AppError.badRequest("Missing field 'credentials.\(field)'", field: "credentials.\(field)")
        }
        guard value.utf8.count <= 8192 else {
            throw AppError.validation("credentials.\(field)", "Field 'credentials.\(field)' is too long")
        }
        return value
    }
}

public struct AuthRequest: Codable, Sendable {
    public var provider: AuthProvider
    public var credentials: Credentials
    public var deviceInfo: DeviceInfo?

    package enum CodingKeys: String, CodingKey {
        case provider, credentials
        case deviceInfo = "device_info"
    }
}

public struct TokenPair: Codable, Sendable, Equatable {
    public var accessToken: String
    public var refreshToken: String
    public var expiresIn: Int
    public var tokenType: String

    package enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case expiresIn = "expires_in"
        case tokenType = "token_type"
    }
    package init(
        accessToken: String,
        refreshToken: String,
        expiresIn: Int,
        tokenType: String
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresIn = expiresIn
        self.tokenType = tokenType
    }
}

public struct PrivacySettings: Codable, Sendable, Equatable {
    public var consentAnalytics: Bool
    public var consentThirdParty: Bool
    public var consentGeolocation: Bool
    public var consentPersonalizedAds: Bool
    public var consentNotifications: Bool
    public var consentGameCenter: Bool
    public var updatedAt: Date?

    package enum CodingKeys: String, CodingKey {
        case consentAnalytics = "consent_analytics"
        case consentThirdParty = "consent_third_party"
        case consentGeolocation = "consent_geolocation"
        case consentPersonalizedAds = "consent_personalized_ads"
        case consentNotifications = "consent_notifications"
        case consentGameCenter = "consent_game_center"
        case updatedAt = "updated_at"
    }
    package init(
        consentAnalytics: Bool,
        consentThirdParty: Bool,
        consentGeolocation: Bool,
        consentPersonalizedAds: Bool,
        consentNotifications: Bool,
        consentGameCenter: Bool,
        updatedAt: Date? = nil
    ) {
        self.consentAnalytics = consentAnalytics
        self.consentThirdParty = consentThirdParty
        self.consentGeolocation = consentGeolocation
        self.consentPersonalizedAds = consentPersonalizedAds
        self.consentNotifications = consentNotifications
        self.consentGameCenter = consentGameCenter
        self.updatedAt = updatedAt
    }
}

/// The `user` object of the register/login/me responses.
public struct UserView: Codable, Sendable {
    public var id: UUID
    public var email: String?
    public var emailVerified: Bool
    public var provider: AuthProvider
    public var status: UserStatus
    public var isGuest: Bool
    public var displayName: String?
    public var createdAt: Date
    public var lastLogin: Date?
    public var guestExpiresAt: Date?
    public var privacySettings: PrivacySettings?
    public var linkedProviders: [String]?

    package enum CodingKeys: String, CodingKey {
        case id, email
        case emailVerified = "email_verified"
        case provider, status
        case isGuest = "is_guest"
        case displayName = "display_name"
        case createdAt = "created_at"
        case lastLogin = "last_login"
        case guestExpiresAt = "guest_expires_at"
        case privacySettings = "privacy_settings"
        case linkedProviders = "linked_providers"
    }
}

public struct AuthResponse: Codable, Sendable {
    public var user: UserView
    public var tokens: TokenPair
    /// Only when a guest is created (or claims its secret): the device keeps it; it is never shown again.
    public var guestSecret: String?
    package enum CodingKeys: String, CodingKey {
        case user, tokens
        case guestSecret = "guest_secret"
    }
    public init(user: UserView, tokens: TokenPair, guestSecret: String? = nil) {
        self.user = user
        self.tokens = tokens
        self.guestSecret = guestSecret
    }
}

/// A user row as the domain needs it.
public struct User: Sendable, Equatable {
    public var id: UUID
    public var appID: UUID
    public var email: String?
    public var emailVerified: Bool
    public var passwordHash: String?
    public var googleID: String?
    public var appleID: String?
    public var provider: AuthProvider
    public var displayName: String?
    public var status: UserStatus
    public var suspensionReason: String?
    public var isGuest: Bool
    public var guestExpiresAt: Date?
    public var loginAttempts: Int
    public var lockedUntil: Date?
    public var lastLogin: Date?
    public var deletionScheduledAt: Date?
    public var createdAt: Date
    /// Raised when every session of the user ends; access tokens carry it (`sv`).
    public var sessionEpoch: Int = 0

    package func view(privacy: PrivacySettings? = nil, linked: [String]? = nil) -> UserView {
        UserView(
            id: id,
            email: email,
            emailVerified: emailVerified,
            provider: provider,
            status: status,
            isGuest: isGuest,
            displayName: displayName,
            createdAt: createdAt,
            lastLogin: lastLogin,
            guestExpiresAt: guestExpiresAt,
            privacySettings: privacy,
            linkedProviders: linked
        )
    }

    /// Every way this user can sign in (for `/auth/me` and unlinking).
    package var signInMethods: [String] {
        var m: [String] = []
        if passwordHash != nil { m.append("email") }
        if googleID != nil { m.append("google") }
        if appleID != nil { m.append("apple") }
        if isGuest { m.append("guest") }
        return m
    }
    package init(
        id: UUID,
        appID: UUID,
        email: String? = nil,
        emailVerified: Bool,
        passwordHash: String? = nil,
        googleID: String? = nil,
        appleID: String? = nil,
        provider: AuthProvider,
        displayName: String? = nil,
        status: UserStatus,
        suspensionReason: String? = nil,
        isGuest: Bool,
        guestExpiresAt: Date? = nil,
        loginAttempts: Int,
        lockedUntil: Date? = nil,
        lastLogin: Date? = nil,
        deletionScheduledAt: Date? = nil,
        createdAt: Date,
        sessionEpoch: Int = 0
    ) {
        self.id = id
        self.appID = appID
        self.email = email
        self.emailVerified = emailVerified
        self.passwordHash = passwordHash
        self.googleID = googleID
        self.appleID = appleID
        self.provider = provider
        self.displayName = displayName
        self.status = status
        self.suspensionReason = suspensionReason
        self.isGuest = isGuest
        self.guestExpiresAt = guestExpiresAt
        self.loginAttempts = loginAttempts
        self.lockedUntil = lockedUntil
        self.lastLogin = lastLogin
        self.deletionScheduledAt = deletionScheduledAt
        self.createdAt = createdAt
        self.sessionEpoch = sessionEpoch
    }
}

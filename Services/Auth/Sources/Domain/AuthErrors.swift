import ServiceCore

/// Every error code auth answers beyond ServiceKit's shared ones (`invalid_request`, `validation_error`,
/// `not_found`, `invalid_token`, ...), with the status it is answered with. Handlers throw
/// `AppError(AuthErrorCode.someCode, "message")`; the OpenAPI document's `Error` enum is generated from this
/// list (deploy/local/error_codes.py) and `make lint` checks the two agree. An app switches on the code.
package enum AuthErrorCode: String, ErrorCatalogue {
    /// Too many login attempts
    case accountLocked = "account_locked"
    /// Email is already verified
    case alreadyVerified = "already_verified"
    /// The console request header is missing (X-Console-Request: 1)
    case consoleHeaderRequired = "console_header_required"
    /// Account deletion is already scheduled
    case deletionAlreadyScheduled = "deletion_already_scheduled"
    /// No deletion is scheduled for this user
    case deletionNotScheduled = "deletion_not_scheduled"
    /// The device was removed meanwhile; register it again
    case deviceChanged = "device_changed"
    /// Email already registered
    case emailAlreadyExists = "email_already_exists"
    /// Another Game Center player is linked to this account; unlink it first
    case gameCenterAlreadyLinked = "game_center_already_linked"
    /// Create an account to link Game Center
    case guestNotAllowed = "guest_not_allowed"
    /// This device's guest account is opened with the guest_secret it received at registration
    case guestSecretRequired = "guest_secret_required"
    /// This … identity already belongs to another account
    case identityAlreadyLinked = "identity_already_linked"
    /// Invalid guest credentials
    case invalidCredentials = "invalid_credentials"
    /// This download link is invalid or has expired
    case invalidLink = "invalid_link"
    /// This link is invalid or has expired
    case invalidOrExpiredToken = "invalid_or_expired_token"
    /// This code is invalid or has expired; request a new one
    case invalidOtp = "invalid_otp"
    /// Game Center authentication failed
    case invalidSignature = "invalid_signature"
    /// This live ticket is unknown, used or expired; ask for a new one
    case invalidTicket = "invalid_ticket"
    /// The authenticator code is wrong or was already used
    case invalidTotp = "invalid_totp"
    /// This WebSocket handshake is malformed (Sec-WebSocket-Key, Sec-WebSocket-Version 13)
    case invalidWebsocketHandshake = "invalid_websocket_handshake"
    /// The team would be left without an owner
    case lastOwner = "last_owner"
    /// This is the only way to sign in to this account; link another one first
    case lastSignInMethod = "last_sign_in_method"
    /// The mail server did not accept the message; try again
    case mailUnavailable = "mail_unavailable"
    /// This email is already a member of the team
    case memberExists = "member_exists"
    /// This account has no email address
    case noEmail = "no_email"
    /// Auth deletes its data through the account deletion flow
    case notAllowed = "not_allowed"
    /// No Game Center player is linked
    case notLinked = "not_linked"
    /// Try again
    case notificationConflict = "notification_conflict"
    /// Too many wrong codes; request a new one
    case otpInvalidated = "otp_invalidated"
    /// Passwords are at most … bytes (UTF-8)
    case passwordTooLong = "password_too_long"
    /// This Game Center account is already linked to another user
    case playerIdAlreadyLinked = "player_id_already_linked"
    /// A Google account is already linked
    case providerAlreadyLinked = "provider_already_linked"
    /// No … sign-in on this account
    case providerNotLinked = "provider_not_linked"
    /// … sign-in is temporarily unavailable
    case providerUnavailable = "provider_unavailable"
    /// This replica is stopping; open the stream again
    case shuttingDown = "shutting_down"
    /// Refresh token was already used; please sign in again
    case tokenReused = "token_reused"
    /// At most … devices per user; remove one first
    case tooManyDevices = "too_many_devices"
    /// An app has at most … webhook endpoints
    case tooManyEndpoints = "too_many_endpoints"
    /// The console member already has an authenticator
    case totpAlreadyEnrolled = "totp_already_enrolled"
    /// A member has no second factor yet: they enrol first
    case totpNotEnrolled = "totp_not_enrolled"
    /// The console needs the authenticator code too
    case totpRequired = "totp_required"
    /// This route is a WebSocket: send the Upgrade
    case upgradeRequired = "upgrade_required"
    /// This account was deleted
    case userErased = "user_erased"
    /// No account found with this Google or Apple ID (`can_register`)
    case userNotFound = "user_not_found"
    /// Password is too weak
    case weakPassword = "weak_password"

    package var status: HTTPStatus {
        switch self {
        case .invalidOrExpiredToken, .invalidWebsocketHandshake, .passwordTooLong: .badRequest
        case .upgradeRequired: .init(code: 426)
        case .alreadyVerified, .deletionAlreadyScheduled, .deletionNotScheduled, .deviceChanged, .emailAlreadyExists, .gameCenterAlreadyLinked,
            .identityAlreadyLinked,
            .lastOwner, .lastSignInMethod, .memberExists, .notificationConflict, .playerIdAlreadyLinked, .providerAlreadyLinked, .totpAlreadyEnrolled,
            .totpNotEnrolled:
            .conflict
        case .consoleHeaderRequired, .guestNotAllowed, .invalidLink, .notAllowed: .forbidden
        case .userErased: .gone
        case .notLinked, .providerNotLinked, .userNotFound: .notFound
        case .mailUnavailable, .providerUnavailable, .shuttingDown: .serviceUnavailable
        case .accountLocked: .tooManyRequests
        case .guestSecretRequired, .invalidCredentials, .invalidOtp, .invalidSignature, .invalidTicket, .invalidTotp, .otpInvalidated, .tokenReused,
            .totpRequired:
            .unauthorized
        case .noEmail, .tooManyDevices, .tooManyEndpoints, .weakPassword: .unprocessableContent
        }
    }
}

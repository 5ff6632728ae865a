import AuthDomain
import AuthMessaging
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-AUTH-1.1, 1.2 and 1.9: an account registered (email, guest, Google, Apple), a sign-in
/// accepted or a wrong password counted, a session ended. Each in one transaction with its audit
/// entry and the session it starts; the checks that cost a network round or a bcrypt happen
/// before, in the route. The flow owns the transactions (#50).
struct SignIn: Sendable {
    let db: DatabasePool
    let logger: Logger
    let users: UserStore
    let refreshTokens: RefreshTokenStore
    let emailTokens: EmailTokenStore
    let issuer: TokenIssuer
    let audit: AuditLog
    let facts: FactPublisher
    let gate: AccountGate
    let signOut: SignOutEverywhere

    /// Seed 14a: the email belongs to an account of this app already. `can_link` says whether
    /// signing in to that account and linking `attempted` would work.
    static func emailTaken(_ existing: User, attempted: AuthProvider) -> AppError {
        let provider = existing.provider.rawValue
        let label = ["google": "Google", "apple": "Apple", "email": "email and password", "guest": "a guest account"][provider] ?? provider
        let canLink = LinkRules.canLink(
            attempted: attempted,
            existingHasPassword: existing.passwordHash != nil,
            existingGoogleID: existing.googleID,
            existingAppleID: existing.appleID
        )
        return AppError(
            AuthErrorCode.emailAlreadyExists,
            "Email already registered with \(label)",
            extra: ["existing_provider": .string(provider), "can_link": .bool(canLink)]
        )
    }

    /// UC-AUTH-1.1 an email account: the user, the verification link's token and a first session.
    func registerEmail(
        appID: UUID,
        email: String,
        passwordHash hash: String,
        verifyToken: String,
        device: DeviceInfo?,
        now: Date,
        origin: AuditLog.Origin
    ) async throws -> (User, TokenPair) {
        try await db.withTransaction(logger: logger) { conn in
            let user = try await users.create(
                .init(
                    appID: appID,
                    email: email,
                    emailVerified: false,
                    passwordHash: hash,
                    provider: .email,
                    now: now
                ),
                on: conn
            )
            try await emailTokens.insert(
                token: verifyToken,
                userID: user.id,
                purpose: .verifyEmail,
                expiresAt: now.addingTimeInterval(TokenLifetimes.emailVerification),
                on: conn
            )
            let tokens = try await startSession(
                user,
                "register",
                provider: "email",
                device: device,
                appID: appID,
                now: now,
                origin: origin,
                on: conn
            )
            return (user, tokens)
        }
    }

    /// Seed 3c / 004: the device's guest, created with its secret, or signed in with it (a guest
    /// made before secrets claims one on its next sign-in).
    func guest(
        appID: UUID,
        deviceID: String,
        guestSecret: String?,
        device: DeviceInfo,
        expires: Date,
        now: Date,
        origin: AuditLog.Origin
    ) async throws -> (User, TokenPair, Bool, String?) {
        try await db.withTransaction(logger: logger) { conn in
            var created = false
            var user: User
            var issuedSecret: String?
            if let existing = try await users.find(.guestDevice(deviceID), appID: appID, on: conn, forUpdate: true) {
                try gate.requireActive(existing, now: now)
                switch GuestSecret.decide(
                    storedHash: try await users.guestSecretHash(existing.id, on: conn),
                    given: guestSecret
                )
                {
                case .signIn: break
                case .claim:
                    let secret = OpaqueToken.generate()
                    if try await users.claimGuestSecret(existing.id, hash: OpaqueToken.hash(secret), on: conn) { issuedSecret = secret }
                case .missing:
                    throw AppError(
                        AuthErrorCode.guestSecretRequired,
                        "This device's guest account is opened with the guest_secret it received at registration",
                        extra: ["field": "credentials.guest_secret"]
                    )
                case .wrong:
                    throw AppError(AuthErrorCode.invalidCredentials, "Invalid guest credentials")
                }
                user = try await users.recordLogin(existing.id, now: now, on: conn) ?? existing
            } else {
                let secret = OpaqueToken.generate()
                user = try await users.create(
                    .init(
                        appID: appID,
                        provider: .guest,
                        guestDeviceID: deviceID,
                        guestExpiresAt: expires,
                        guestSecretHash: OpaqueToken.hash(secret),
                        now: now
                    ),
                    on: conn
                )
                issuedSecret = secret
                created = true
            }
            let tokens = try await startSession(
                user,
                created ? "register" : "login",
                provider: "guest",
                device: device,
                appID: appID,
                now: now,
                origin: origin,
                on: conn
            )
            return (user, tokens, created, issuedSecret)
        }
    }

    /// Google or Apple: an identity with an account signs in (registering it again too, seed
    /// 12a); one without is registered, or refused when signing in (13a).
    func provider(
        _ provider: AuthProvider,
        identity: ProviderIdentity,
        lookup: UserStore.Lookup,
        appID: UUID,
        registering: Bool,
        providerRefreshToken: ByteBuffer?,
        device: DeviceInfo?,
        now: Date,
        origin: AuditLog.Origin
    ) async throws -> (User, TokenPair, Bool) {
        try await db.withTransaction(logger: logger) { conn -> (User, TokenPair, Bool) in
            if let existing = try await users.find(lookup, appID: appID, on: conn, forUpdate: true) {
                try gate.requireActive(existing, now: now)
                let user = try await users.recordLogin(existing.id, now: now, on: conn) ?? existing
                if let providerRefreshToken {
                    try await users.replaceProviderRefreshToken(providerRefreshToken, provider: provider, userID: user.id, on: conn)
                }
                let tokens = try await startSession(
                    user,
                    "login",
                    provider: provider.rawValue,
                    device: device,
                    appID: appID,
                    now: now,
                    origin: origin,
                    on: conn
                )
                return (user, tokens, false)
            }
            guard registering else {
                throw AppError(
                    AuthErrorCode.userNotFound,
                    "No account found with this \(provider == .google ? "Google" : "Apple") ID",
                    extra: ["can_register": true]
                )
            }
            if let email = identity.email, let other = try await users.find(.email(email), appID: appID, on: conn) {
                throw Self.emailTaken(other, attempted: provider)
            }
            let user = try await users.create(
                .init(
                    appID: appID,
                    email: identity.email,
                    emailVerified: identity.emailVerified,
                    googleID: provider == .google ? identity.subject : nil,
                    appleID: provider == .apple ? identity.subject : nil,
                    provider: provider,
                    displayName: identity.name,
                    now: now
                ),
                on: conn
            )
            try await users.recordConnection(
                provider,
                .init(identity),
                sealedRefreshToken: providerRefreshToken,
                userID: user.id,
                on: conn
            )
            let tokens = try await startSession(
                user,
                "register",
                provider: provider.rawValue,
                device: device,
                appID: appID,
                now: now,
                origin: origin,
                on: conn
            )
            return (user, tokens, true)
        }
    }

    /// A wrong password counts towards the lockout (seed 14b), audited.
    func wrongPassword(_ user: User, appID: UUID, now: Date, origin: AuditLog.Origin) async throws -> (attempts: Int, lockedUntil: Date?) {
        try await db.withTransaction(logger: logger) { conn in
            let r = try await users.recordFailedLogin(user.id, now: now, on: conn)
            try await audit.record(
                origin.entry(
                    "login",
                    "failure",
                    app: appID,
                    user: user.id,
                    details: [
                        "provider": "email", "reason": "invalid_credentials",
                        "attempts": .int(r.attempts),
                    ]
                ),
                on: conn
            )
            return r
        }
    }

    func passwordAccepted(_ user: User, appID: UUID, device: DeviceInfo?, now: Date, origin: AuditLog.Origin) async throws -> (User, TokenPair) {
        try await db.withTransaction(logger: logger) { conn in
            let signedIn = try await users.recordLogin(user.id, now: now, on: conn) ?? user
            let tokens = try await startSession(
                signedIn,
                "login",
                provider: "email",
                device: device,
                appID: appID,
                now: now,
                origin: origin,
                on: conn
            )
            return (signedIn, tokens)
        }
    }

    /// UC-AUTH-1.9 this device's session (its refresh token's family, its push token) or every one.
    func logout(appID: UUID, userID: UUID, all: Bool, refreshToken: String?, origin: AuditLog.Origin) async throws -> (Int, SessionFact) {
        try await db.withTransaction(logger: logger) { conn -> (Int, SessionFact) in
            let n: Int
            let fact: SessionFact
            if all {
                (n, fact) = try await signOut.run(app: appID, user: userID, reason: "logout_all", on: conn)
            } else if let token = refreshToken {
                guard let record = try await refreshTokens.lock(token: token, on: conn), record.userID == userID else {
                    throw AppError(.unauthorized, "invalid_token", "Refresh token does not belong to this user")
                }
                n = try await refreshTokens.revokeFamily(record.familyID, reason: "logout", on: conn)
                fact = try await facts.endSessions(app: appID, user: userID, .one(record.familyID), on: conn)
                try await MessagingOutbox.forgetDevice(app: appID, user: userID, device: record.deviceID, on: conn, logger: logger)
            } else {
                throw AppError.badRequest("Give 'refresh_token' (this device) or 'all': true (every device)", field: "refresh_token")
            }
            try await audit.record(
                origin.entry(
                    "logout",
                    "success",
                    app: appID,
                    user: userID,
                    details: ["all": .bool(all), "revoked": .int(n)]
                ),
                on: conn
            )
            return (n, fact)
        }
    }

    /// A session for `user` and the audit entry of the sign-in that opened it (`register` or
    /// `login`), in the caller's transaction.
    private func startSession(
        _ user: User,
        _ action: String,
        provider: String,
        device: DeviceInfo?,
        appID: UUID,
        now: Date,
        origin: AuditLog.Origin,
        on conn: PostgresConnection
    ) async throws -> TokenPair {
        let tokens = try await issuer.startSession(for: user, device: device, now: now, on: conn)
        try await audit.record(origin.entry(action, "success", app: appID, user: user.id, details: ["provider": .string(provider)]), on: conn)
        return tokens
    }
}

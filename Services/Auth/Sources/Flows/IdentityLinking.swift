import AuthDomain
import Foundation
import Logging
import NIOCore
import ServiceKit
import WireTypes

/// UC-AUTH-1.7, attaching another way to sign in to the signed-in user, in one transaction once
/// the provider has vouched for the identity (network and bcrypt happen before, in the route). A
/// guest who links keeps the same user id, and so every piece of data, and becomes a full account.
struct IdentityLinking: Sendable {
    let db: DatabasePool
    let logger: Logger
    let users: UserStore
    let emailTokens: EmailTokenStore
    let issuer: TokenIssuer
    let audit: AuditLog
    let apple: any AppleSignIn
    let appleConfigs: TenantSettings<AppleClientConfig>
    let box: SecretBox
    let gate: AccountGate

    /// The identity to attach, as verified: Google's, Apple's (with the sealed refresh token to
    /// revoke later), or an email with its password hash.
    enum Linking: Sendable {
        case google(ProviderIdentity)
        case apple(ProviderIdentity, ByteBuffer?)
        case email(String, String)
    }

    static func identityTaken(_ provider: String) -> AppError {
        AppError(AuthErrorCode.identityAlreadyLinked, "This \(provider) identity already belongs to another account")
    }

    /// The user as linked, a new session's tokens, and the address to send a verification to.
    /// `audit` builds the success entry (whether the user was a guest).
    func link(
        _ linking: Linking,
        provider: AuthProvider,
        appID: UUID,
        userID: UUID,
        device: DeviceInfo?,
        verifyToken: String,
        now: Date,
        audit: @Sendable (_ wasGuest: Bool) -> AuditLog.Entry
    ) async throws -> (User, TokenPair, String?) {
        try await db.withTransaction(logger: logger) { conn -> (User, TokenPair, String?) in
            guard let user = try await users.find(.id(userID), appID: appID, on: conn, forUpdate: true) else {
                throw AppError(.unauthorized, "invalid_token", "This account no longer exists")
            }
            try gate.requireActive(user, now: now)
            var verifyTo: String?
            let canLink = { (attempted: AuthProvider) in
                LinkRules.canLink(
                    attempted: attempted,
                    existingHasPassword: user.passwordHash != nil,
                    existingGoogleID: user.googleID,
                    existingAppleID: user.appleID
                )
            }
            switch linking {
            case .google(let identity), .apple(let identity, _):
                // One path for both providers: the same identity again changes nothing; another
                // one of this provider is refused (LinkRules); an identity of another account too.
                let oauth: UserStore.OAuthProvider
                let sealed: ByteBuffer?
                if case .apple(_, let s) = linking { (oauth, sealed) = (.apple, s) } else { (oauth, sealed) = (.google, nil) }
                let (current, lookup, attempted, label, linked): (String?, UserStore.Lookup, AuthProvider, String, String) =
                    oauth == .google
                    ? (user.googleID, .google(identity.subject), .google, "Google", "A Google account is already linked")
                    : (user.appleID, .apple(identity.subject), .apple, "Apple", "An Apple ID is already linked")
                if current == identity.subject { break }
                guard canLink(attempted) else { throw AppError(AuthErrorCode.providerAlreadyLinked, linked) }
                if try await users.find(lookup, appID: appID, on: conn) != nil { throw Self.identityTaken(label) }
                // Adopt the provider's verified email when the account has none and nobody else uses it.
                var adoptEmail: String? = nil
                if user.email == nil, let email = identity.email, try await users.find(.email(email), appID: appID, on: conn) == nil {
                    adoptEmail = email
                }
                try await users.attach(oauth, .init(identity), adoptEmail: adoptEmail, sealedRefreshToken: sealed, to: userID, now: now, on: conn)
            case .email(let email, let hash):
                guard canLink(.email) else { throw AppError(AuthErrorCode.providerAlreadyLinked, "A password is already set on this account") }
                if let current = user.email, current != email {
                    throw AppError.validation("credentials.email", "The account's email is \(EmailAddress.mask(current)); link with that address")
                }
                if user.email == nil, try await users.find(.email(email), appID: appID, on: conn) != nil { throw Self.identityTaken("email") }
                try await users.attachPassword(email: email, hash: hash, to: userID, now: now, on: conn)
                if !user.emailVerified {
                    try await emailTokens.insert(
                        token: verifyToken,
                        userID: userID,
                        purpose: .verifyEmail,
                        expiresAt: now.addingTimeInterval(TokenLifetimes.emailVerification),
                        on: conn
                    )
                    verifyTo = email
                }
            }
            // A guest who links becomes a full account: same id, nothing lost.
            if user.isGuest {
                try await users.upgradeGuest(userID, provider: provider, now: now, on: conn)
            }
            guard let updated = try await users.find(.id(userID), appID: appID, on: conn) else { throw AppError.unavailable }
            let tokens = try await issuer.startSession(for: updated, device: device, now: now, on: conn)
            try await self.audit.record(audit(user.isGuest), on: conn)
            return (updated, tokens, verifyTo)
        }
    }

    /// Removes one way to sign in (never the last one). Unlinking Apple ends the app's grant at
    /// Apple too, after the commit and best effort: the link is gone here either way.
    func unlink(_ provider: AuthProvider, appID: UUID, userID: UUID, now: Date, audit: @Sendable () -> AuditLog.Entry) async throws -> User {
        let (user, appleToken): (User, ByteBuffer?) = try await db.withTransaction(logger: logger) { conn in
            guard let user = try await users.find(.id(userID), appID: appID, on: conn, forUpdate: true) else {
                throw AppError(.unauthorized, "invalid_token", "This account no longer exists")
            }
            guard user.signInMethods.contains(provider.rawValue) else {
                throw AppError(AuthErrorCode.providerNotLinked, "No \(provider.rawValue) sign-in on this account")
            }
            guard user.signInMethods.count > 1 else {
                throw AppError(AuthErrorCode.lastSignInMethod, "This is the only way to sign in to this account; link another one first")
            }
            let appleToken = try await users.detach(provider, from: userID, now: now, on: conn)
            try await self.audit.record(audit(), on: conn)
            return (try await users.find(.id(userID), appID: appID, on: conn) ?? user, appleToken)
        }
        // Unlinking Apple ends the app's grant at Apple too (best effort: the link is gone here either way).
        if provider == .apple, let sealed = appleToken, let config = try await appleConfigs.value(for: appID) {
            do { try await apple.revoke(refreshToken: try box.open(sealed), config: config, now: now) } catch {
                logger.warning("Apple token revocation failed on unlink", metadata: ["error": "\(error)"])
            }
        }
        return user
    }
}

extension UserStore.LinkedIdentity {
    init(_ identity: ProviderIdentity) {
        self.init(subject: identity.subject, email: identity.email, name: identity.name, isPrivateEmail: identity.isPrivateEmail)
    }
}

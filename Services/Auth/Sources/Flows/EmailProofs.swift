import AuthDomain
import Foundation
import Logging
import ServiceKit
import WireTypes

/// What an email proves: the verification link (3b.8), the password reset link, and the
/// one-time code that signs in or registers (seed 004). Each step in one transaction with its
/// audit entry; the mail leaves after, from the route. The flow owns the transactions (#50).
struct EmailProofs: Sendable {
    let db: DatabasePool
    let logger: Logger
    let users: UserStore
    let refreshTokens: RefreshTokenStore
    let emailTokens: EmailTokenStore
    let issuer: TokenIssuer
    let audit: AuditLog
    let facts: FactPublisher
    let gate: AccountGate
    let otps: OTPStore

    static let invalidLink = AppError(AuthErrorCode.invalidOrExpiredToken, "This link is invalid or has expired")

    /// 3b.8 the verification link: the address is proved.
    func verifyEmail(token: String, appID: UUID, now: Date, origin: AuditLog.Origin) async throws {
        try await db.withTransaction(logger: logger) { conn in
            guard let userID = try await emailTokens.consume(token: token, purpose: .verifyEmail, now: now, on: conn),
                try await users.find(.id(userID), appID: appID, on: conn) != nil
            else { throw Self.invalidLink }
            try await users.markEmailVerified(userID, on: conn)
            try await audit.record(origin.entry("verify_email", "success", app: appID, user: userID), on: conn)
        }
    }

    /// A new verification link for the signed-in user's address, which it answers.
    func newVerificationLink(token: String, appID: UUID, userID: UUID, now: Date) async throws -> String {
        try await db.withTransaction(logger: logger) { conn in
            guard let user = try await users.find(.id(userID), appID: appID, on: conn), let email = user.email else {
                throw AppError(AuthErrorCode.noEmail, "This account has no email address")
            }
            if user.emailVerified { throw AppError(AuthErrorCode.alreadyVerified, "Email is already verified") }
            try await emailTokens.insert(
                token: token,
                userID: userID,
                purpose: .verifyEmail,
                expiresAt: now.addingTimeInterval(TokenLifetimes.emailVerification),
                on: conn
            )
            return email
        }
    }

    /// A reset link for an address with an account that can have a password; answers whether one was made.
    func resetLink(token: String, email: String, appID: UUID, now: Date, origin: AuditLog.Origin) async throws -> Bool {
        try await db.withTransaction(logger: logger) { conn in
            guard let user = try await users.find(.email(email), appID: appID, on: conn), user.passwordHash != nil || user.emailVerified else {
                return false
            }
            try await emailTokens.insert(
                token: token,
                userID: user.id,
                purpose: .passwordReset,
                expiresAt: now.addingTimeInterval(TokenLifetimes.passwordReset),
                on: conn
            )
            try await audit.record(origin.entry("password_forgot", "success", app: appID, user: user.id), on: conn)
            return true
        }
    }

    /// The link's new password; whoever knew the old one is signed out everywhere.
    func resetPassword(token: String, hash: String, appID: UUID, now: Date, origin: AuditLog.Origin) async throws -> (Int, SessionFact) {
        try await db.withTransaction(logger: logger) { conn -> (Int, SessionFact) in
            guard let userID = try await emailTokens.consume(token: token, purpose: .passwordReset, now: now, on: conn),
                try await users.find(.id(userID), appID: appID, on: conn) != nil
            else { throw Self.invalidLink }
            try await users.setPassword(userID, hash: hash, on: conn)
            // Whoever knew the old password is signed out everywhere, access tokens included.
            let n = try await refreshTokens.revokeAll(userID: userID, reason: "password_reset", on: conn)
            let fact = try await facts.endSessions(app: appID, user: userID, .all, on: conn)
            try await audit.record(
                origin.entry(
                    "password_reset",
                    "success",
                    app: appID,
                    user: userID,
                    details: ["revoked_sessions": .int(n)]
                ),
                on: conn
            )
            return (n, fact)
        }
    }

    /// Seed 004 a one-time code for the address (the previous one ends).
    func issueCode(_ code: String, email: String, appID: UUID, now: Date, origin: AuditLog.Origin) async throws {
        try await db.withTransaction(logger: logger) { conn in
            try await otps.issue(code: code, appID: appID, email: email, now: now, on: conn)
            try await audit.record(origin.entry("otp_send", "success", app: appID, user: nil), on: conn)
        }
    }

    enum CodeOutcome: Sendable {
        case signedIn(User, TokenPair, Bool)
        case refused(AppError)
    }

    /// The code signs in the address's account, or registers it (the code proves the address);
    /// a refusal is answered, not thrown, so the route audits it outside the transaction.
    func verifyCode(_ code: String, email: String, appID: UUID, device: DeviceInfo?, now: Date, origin: AuditLog.Origin) async throws -> CodeOutcome {
        try await db.withTransaction(logger: logger) { conn -> CodeOutcome in
            switch try await otps.verify(code: code, appID: appID, email: email, now: now, on: conn) {
            case .expiredOrMissing:
                return .refused(AppError(AuthErrorCode.invalidOtp, "This code is invalid or has expired; request a new one"))
            case .invalidated:
                return .refused(AppError(AuthErrorCode.otpInvalidated, "Too many wrong codes; request a new one"))
            case .wrong(let remaining):
                return .refused(AppError(AuthErrorCode.invalidOtp, "Incorrect code", extra: ["attempts_remaining": .int(remaining)]))
            case .valid:
                var created = false
                var user: User
                if let existing = try await users.find(.email(email), appID: appID, on: conn, forUpdate: true) {
                    try gate.requireActive(existing, now: now)
                    // The code proves the address.
                    if !existing.emailVerified { try await users.markEmailVerified(existing.id, on: conn) }
                    user = try await users.recordLogin(existing.id, now: now, on: conn) ?? existing
                } else {
                    user = try await users.create(.init(appID: appID, email: email, emailVerified: true, provider: .email, now: now), on: conn)
                    created = true
                }
                let tokens = try await issuer.startSession(for: user, device: device, now: now, on: conn)
                try await audit.record(
                    origin.entry(
                        created ? "register" : "login",
                        "success",
                        app: appID,
                        user: user.id,
                        details: ["provider": "otp"]
                    ),
                    on: conn
                )
                return .signedIn(user, tokens, created)
            }
        }
    }
}

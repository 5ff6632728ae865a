import Foundation
import HTTPTypes
import ServiceCore

/// Lockout of UC-AUTH-1.2 13b/14b: the 5th consecutive wrong password locks the account for
/// 15 minutes; a success resets the counter.
public enum LockoutPolicy {
    public static let maxAttempts = 5
    public static let lockDuration: TimeInterval = 15 * 60

    /// The state after one more failure at `now`.
    public static func afterFailure(attempts: Int, now: Date) -> (attempts: Int, lockedUntil: Date?) {
        let n = attempts + 1
        return (n, n >= maxAttempts ? now.addingTimeInterval(lockDuration) : nil)
    }

    public static func attemptsRemaining(after attempts: Int) -> Int { max(0, maxAttempts - attempts) }

    public static func retryAfter(lockedUntil: Date, now: Date) -> Int {
        max(1, Int(lockedUntil.timeIntervalSince(now).rounded(.up)))
    }

    /// The 429 a locked account (a player's or a console member's) is answered with.
    package static func refusal(lockedUntil until: Date, now: Date) -> AppError {
        let retry = retryAfter(lockedUntil: until, now: now)
        var headers = HTTPFields()
        headers[.retryAfter] = String(retry)
        return AppError(
            AuthErrorCode.accountLocked,
            "Too many login attempts",
            extra: ["locked_until": .string(ISO8601DateFormatter().string(from: until)), "retry_after": .int(retry)],
            headers: headers
        )
    }
}

/// Who may sign in or refresh now (seed 14a, 14b): a suspended account is refused, with the
/// reason and the support contact; a locked one until its lock ends.
package struct AccountGate: Sendable {
    package let supportContact: String

    package init(supportContact: String) { self.supportContact = supportContact }

    package func requireActive(_ user: User, now: Date) throws {
        if user.status == .suspended {
            throw AppError(
                .forbidden,
                "account_suspended",
                "Your account has been suspended",
                extra: [
                    "reason": .string(user.suspensionReason ?? "Terms of service violation"),
                    "contact": .string(supportContact),
                ]
            )
        }
        if let until = user.lockedUntil, until > now {
            throw LockoutPolicy.refusal(lockedUntil: until, now: now)
        }
    }
}

/// Lifetimes of the seed: access token 7 days, refresh token 30 days, guests 30 days without
/// activity, email verification 24 h.
public enum TokenLifetimes {
    public static let accessToken: TimeInterval = 7 * 24 * 3600
    public static let refreshToken: TimeInterval = 30 * 24 * 3600
    public static let guestInactivity: TimeInterval = 30 * 24 * 3600
    public static let emailVerification: TimeInterval = 24 * 3600
    public static let passwordReset: TimeInterval = 3600
    /// A just-rotated refresh token presented again within this window gets the current pair.
    public static let rotationGrace: TimeInterval = 10
}

public enum EmailAddress {
    /// Lower-cased and trimmed, or nil when it is not a plausible address.
    public static func normalize(_ raw: String) -> String? {
        let email = raw.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard email.utf8.count <= 254 else { return nil }
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[0].count <= 64 else { return nil }
        let domain = parts[1]
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, labels.allSatisfy({ !$0.isEmpty && $0.count <= 63 }) else { return nil }
        let localAllowed = Set("abcdefghijklmnopqrstuvwxyz0123456789.!#$%&'*+/=?^_`{|}~-")
        let domainAllowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-")
        guard parts[0].allSatisfy({ localAllowed.contains($0) }),
            !parts[0].hasPrefix("."), !parts[0].hasSuffix("."), !parts[0].contains(".."),
            labels.allSatisfy({ $0.allSatisfy { domainAllowed.contains($0) } && !$0.hasPrefix("-") && !$0.hasSuffix("-") }),
            labels.last!.count >= 2
        else { return nil }
        return email
    }

    /// `j***@example.com`, for telling a user which account holds something without showing it.
    public static func mask(_ email: String) -> String {
        let parts = email.split(separator: "@", maxSplits: 1)
        guard parts.count == 2, let first = parts[0].first else { return "***" }
        return "\(first)***@\(parts[1])"
    }
}

/// UC-AUTH-1.7 / seed 14a: whether the owner of an existing account can attach the sign-in
/// method that was just refused because the email is taken (sign in to that account, then
/// `POST /auth/link`). True exactly when the link would be accepted.
public enum LinkRules {
    public static func canLink(attempted: AuthProvider, existingHasPassword: Bool, existingGoogleID: String?, existingAppleID: String?) -> Bool {
        switch attempted {
        case .email: return !existingHasPassword
        case .google: return existingGoogleID == nil
        case .apple: return existingAppleID == nil
        case .guest: return false
        }
    }
}

/// A guest is its device id plus a secret that only that device holds (returned once at
/// registration, stored hashed): knowing someone's device id opens nothing.
public enum GuestSecret {
    public enum Decision: Equatable, Sendable {
        case signIn
        /// A guest from before secrets existed: this sign-in claims one (returned once).
        case claim
        case missing
        case wrong
    }

    public static func decide(storedHash: String?, given: String?) -> Decision {
        guard let storedHash else { return .claim }
        guard let given, !given.isEmpty else { return .missing }
        return ConstantTime.equals(OpaqueToken.hash(given), storedHash) ? .signIn : .wrong
    }
}

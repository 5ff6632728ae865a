import Foundation
import ServiceCore

/// Seed 3b.5: a password is accepted when its zxcvbn score is at least 3.
public struct PasswordPolicy: Sendable {
    public static let minimumScore = 3
    /// bcrypt reads the first 72 bytes only: a longer password would share its hash with every
    /// password of the same first 72 bytes. Refused (400) rather than silently truncated.
    public static let maximumBytes = 72

    public struct Result: Sendable {
        public var score: Int
        public var acceptable: Bool { score >= PasswordPolicy.minimumScore }
    }

    package let estimator: any PasswordStrengthEstimator

    public init(estimator: any PasswordStrengthEstimator) { self.estimator = estimator }

    public func evaluate(_ password: String, userInputs: [String]) -> Result {
        guard password.count >= 8, password.utf8.count <= 256 else { return Result(score: 0) }
        return Result(score: estimator.score(password, userInputs: userInputs))
    }

    /// A new password: at most 72 bytes (400 `password_too_long`), zxcvbn 3 or more (422
    /// `weak_password`); `field` names it in the error.
    public func require(_ password: String, userInputs: [String], field: String) throws {
        if password.utf8.count > Self.maximumBytes {
            throw AppError(
                AuthErrorCode.passwordTooLong,
                "Passwords are at most \(Self.maximumBytes) bytes (UTF-8)",
                extra: ["field": .string(field), "max_bytes": .int(Self.maximumBytes)]
            )
        }
        let strength = evaluate(password, userInputs: userInputs)
        guard strength.acceptable else {
            throw AppError(
                AuthErrorCode.weakPassword,
                "Password is too weak",
                extra: ["field": .string(field), "score": .int(strength.score), "minimum_score": .int(Self.minimumScore)]
            )
        }
    }
}

/// Scores a password 0...4 the way zxcvbn does.
public protocol PasswordStrengthEstimator: Sendable {
    func score(_ password: String, userInputs: [String]) -> Int
}

import Foundation

/// Seed 3b.5: a password is accepted when its zxcvbn score is at least 3.
public struct PasswordPolicy: Sendable {
    public static let minimumScore = 3

    public struct Result: Sendable {
        public var score: Int
        public var acceptable: Bool { score >= PasswordPolicy.minimumScore }
    }

    let estimator: any PasswordStrengthEstimator

    public init(estimator: any PasswordStrengthEstimator) { self.estimator = estimator }

    public func evaluate(_ password: String, userInputs: [String]) -> Result {
        guard password.count >= 8, password.utf8.count <= 256 else { return Result(score: 0) }
        return Result(score: estimator.score(password, userInputs: userInputs))
    }
}

/// Scores a password 0...4 the way zxcvbn does.
public protocol PasswordStrengthEstimator: Sendable {
    func score(_ password: String, userInputs: [String]) -> Int
}

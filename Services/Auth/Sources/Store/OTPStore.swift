import AuthDomain
import Crypto
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// One-time email codes. A code is 6 digits, so its hash is keyed (HMAC with the data key):
/// a leaked table does not give the codes away by brute force.
public struct OTPStore: Sendable {
    public static let lifetime: TimeInterval = 5 * 60
    public static let maxAttempts = 3
    let logger: Logger
    let key: SymmetricKey

    public init(logger: Logger, key: SymmetricKey) {
        self.logger = logger
        self.key = key
    }

    public static func generateCode() -> String {
        var rng = SystemRandomNumberGenerator()
        return String(format: "%06d", Int.random(in: 0...999_999, using: &rng))
    }

    func hash(_ code: String, email: String) -> String {
        HMAC<SHA256>.authenticationCode(for: Data("\(email):\(code)".utf8), using: key).hexEncoded
    }

    /// Replaces any pending code of this address by a new one.
    public func issue(code: String, appID: UUID, email: String, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE otps SET consumed_at = \(now) WHERE app_id = \(appID) AND email = \(email) AND consumed_at IS NULL
            """,
            logger: logger
        )
        try await conn.run(
            """
            INSERT INTO otps (app_id, email, code_hash, expires_at, created_at)
            VALUES (\(appID), \(email), \(hash(code, email: email)), \(now.addingTimeInterval(Self.lifetime)), \(now))
            """,
            logger: logger
        )
    }

    public enum Verdict: Sendable, Equatable {
        case valid
        case wrong(attemptsRemaining: Int)
        case invalidated
        case expiredOrMissing
    }

    /// Checks a code against the pending one (locked): a match consumes it; the third wrong
    /// code invalidates it.
    public func verify(code: String, appID: UUID, email: String, now: Date, on conn: PostgresConnection) async throws -> Verdict {
        let rows = try await conn.run(
            """
            SELECT id, code_hash, attempts, expires_at FROM otps
            WHERE app_id = \(appID) AND email = \(email) AND consumed_at IS NULL
            ORDER BY created_at DESC LIMIT 1 FOR UPDATE
            """,
            logger: logger
        )
        var found: (UUID, String, Int, Date)?
        for try await r in rows.decode((UUID, String, Int, Date).self) { found = r }
        guard let (id, stored, attempts, expires) = found, expires > now else { return .expiredOrMissing }
        if ConstantTime.equals(stored, hash(code, email: email)) {
            try await conn.run("UPDATE otps SET consumed_at = \(now) WHERE id = \(id)", logger: logger)
            return .valid
        }
        let n = attempts + 1
        if n >= Self.maxAttempts {
            try await conn.run("UPDATE otps SET attempts = \(n), consumed_at = \(now) WHERE id = \(id)", logger: logger)
            return .invalidated
        }
        try await conn.run("UPDATE otps SET attempts = \(n) WHERE id = \(id)", logger: logger)
        return .wrong(attemptsRemaining: Self.maxAttempts - n)
    }
}

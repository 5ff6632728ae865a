import AuthDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// Single-use tokens sent by email, stored hashed.
public struct EmailTokenStore: Sendable {
    public enum Purpose: String, Sendable {
        case verifyEmail = "verify_email"
        case passwordReset = "password_reset"
        case deletionCancel = "deletion_cancel"
    }
    let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    public func insert(token: String, userID: UUID, purpose: Purpose, expiresAt: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO email_tokens (user_id, purpose, token_hash, expires_at)
            VALUES (\(userID), \(purpose.rawValue), \(OpaqueToken.hash(token)), \(expiresAt))
            """,
            logger: logger
        )
    }

    /// Uses the token once: returns its user if it was valid, unused and unexpired.
    public func consume(token: String, purpose: Purpose, now: Date, on conn: PostgresConnection) async throws -> UUID? {
        let rows = try await conn.run(
            """
            UPDATE email_tokens SET used_at = \(now)
            WHERE token_hash = \(OpaqueToken.hash(token)) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > \(now)
            RETURNING user_id
            """,
            logger: logger
        )
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }
}

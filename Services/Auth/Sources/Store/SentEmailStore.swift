import AuthDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// Emails auth sends on another service's behalf, one per (kind, reference).
struct SentEmailStore: Sendable {
    let logger: Logger

    /// Claims the email in the caller's transaction: false when it was already sent. The caller
    /// sends before committing, so a failed send leaves no claim and the sender retries.
    func claim(app: UUID, user: UUID, kind: String, reference: String, now: Date, on conn: PostgresConnection) async throws -> Bool {
        for try await _ in try await conn.run(
            """
            INSERT INTO sent_emails (app_id, user_id, kind, reference, sent_at) VALUES (\(app), \(user), \(kind), \(reference), \(now))
            ON CONFLICT DO NOTHING RETURNING 1
            """,
            logger: logger
        ) { return true }
        return false
    }
}

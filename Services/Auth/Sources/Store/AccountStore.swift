import AuthDomain
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit

/// The SQL of the account's end: the J+30 deletion, the anonymisation, guest expiry.
struct AccountStore: Sendable {
    let logger: Logger

    struct ScheduledDeletion {
        var userID: UUID
        var appID: UUID
        var status: String
        var due: Date
    }

    /// Schedules the user's deletion (UC-AUTH-6): the deletion row and the user's mark, together.
    func scheduleDeletion(userID: UUID, appID: UUID, reason: String?, now: Date, due: Date, on conn: PostgresConnection) async throws -> UUID {
        var deletionID: UUID?
        for try await id in try await conn.run(
            """
            INSERT INTO deletions (user_id, app_id, reason, requested_at, scheduled_for)
            VALUES (\(userID), \(appID), \(reason), \(now), \(due)) RETURNING id
            """,
            logger: logger
        ).decode(UUID.self) { deletionID = id }
        try await conn.run("UPDATE users SET deletion_scheduled_at = \(due), updated_at = \(now) WHERE id = \(userID)", logger: logger)
        guard let deletionID else { throw AppError.unavailable }
        return deletionID
    }

    /// Cancels the user's scheduled deletion and clears the user's mark.
    func cancelDeletion(userID: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE deletions SET status = 'cancelled', cancelled_at = \(now) WHERE user_id = \(userID) AND status = 'scheduled'
            """,
            logger: logger
        )
        try await conn.run("UPDATE users SET deletion_scheduled_at = NULL, updated_at = \(now) WHERE id = \(userID)", logger: logger)
    }

    /// The deletion, locked until the caller's transaction ends.
    func lockDeletion(_ id: UUID, on conn: PostgresConnection) async throws -> ScheduledDeletion? {
        for try await r in try await conn.run(
            """
            SELECT user_id, app_id, status, scheduled_for FROM deletions WHERE id = \(id) FOR UPDATE
            """,
            logger: logger
        ).decode((UUID, UUID, String, Date).self) {
            return ScheduledDeletion(userID: r.0, appID: r.1, status: r.2, due: r.3)
        }
        return nil
    }

    func markExecuted(_ id: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE deletions SET status = 'executed', executed_at = \(now) WHERE id = \(id)", logger: logger)
    }

    /// Keeps the user row (ids stay valid for foreign references and audit) but nothing that
    /// identifies the person; everything else keyed by the user goes, the stored exports (email,
    /// addresses, locations) and therefore their links included.
    func anonymise(userID: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE users SET email = NULL, password_hash = NULL, google_id = NULL, apple_id = NULL, display_name = NULL,
                   guest_device_id = NULL, guest_secret_hash = NULL, email_verified = false, suspension_reason = NULL, anonymized_at = \(now),
                   deletion_scheduled_at = NULL, updated_at = \(now)
            WHERE id = \(userID)
            """,
            logger: logger
        )
        for table in [
            "oauth_connections", "refresh_tokens", "email_tokens", "exports", "game_center_connections", "privacy_settings", "sent_emails",
            "push_tokens", "push_deliveries",
        ] {
            try await conn.run("DELETE FROM \(unescaped: table) WHERE user_id = \(userID)", logger: logger)
        }
        try await conn.run("DELETE FROM notifications WHERE user_ids = ARRAY[\(userID)]::uuid[]", logger: logger)
        try await conn.run("UPDATE audit_logs SET ip_address = NULL, user_agent = NULL WHERE user_id = \(userID)", logger: logger)
    }

    /// Removes up to `batch` guests idle past their expiry (`SKIP LOCKED`: replicas share the work).
    func deleteExpiredGuests(now: Date, batch: Int, on conn: PostgresConnection) async throws -> [(userID: UUID, appID: UUID)] {
        var removed: [(UUID, UUID)] = []
        for try await r in try await conn.run(Self.expiredGuestsQuery(now: now, batch: batch), logger: logger).decode((UUID, UUID).self) {
            removed.append(r)
        }
        return removed
    }

    /// The guest expiry sweep's batch (a periodic query).
    static func expiredGuestsQuery(now: Date, batch: Int) -> PostgresQuery {
        """
        DELETE FROM users WHERE id IN (
            SELECT id FROM users WHERE is_guest AND guest_expires_at < \(now)
            ORDER BY guest_expires_at LIMIT \(batch) FOR UPDATE SKIP LOCKED)
        RETURNING id, app_id
        """
    }

    /// The sealed Apple refresh tokens kept for a user (to revoke them at deletion).
    func sealedAppleTokens(userID: UUID, on conn: PostgresConnection) async throws -> [ByteBuffer] {
        var out: [ByteBuffer] = []
        for try await sealed in try await conn.run(
            """
            SELECT refresh_token_sealed FROM oauth_connections WHERE user_id = \(userID) AND provider = 'apple' AND refresh_token_sealed IS NOT NULL
            """,
            logger: logger
        ).decode(ByteBuffer.self) { out.append(sealed) }
        return out
    }
}

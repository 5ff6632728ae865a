import AuthDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// The user's data as auth holds it, in the sections of a privacy export.
enum AuthUserData {
    static func sections(logger: Logger) -> [UserDataSection] {
        @Sendable func rows(_ query: PostgresQuery, _ conn: PostgresConnection) async throws -> JSONValue {
            try await UserDataSection.jsonRows(query, on: conn, logger: logger)
        }
        let refuse: @Sendable (UUID, UUID, PostgresConnection) async throws -> Int = { _, _, _ in
            throw AppError(AuthErrorCode.notAllowed, "Auth deletes its data through the account deletion flow")
        }
        return [
            UserDataSection(
                name: "profile",
                export: { user, app, conn in
                    try await rows(
                        """
                        SELECT row_to_json(u)::text FROM (SELECT id, email, email_verified, auth_provider, display_name, status, is_guest,
                               created_at, last_login, deletion_scheduled_at FROM users WHERE id = \(user) AND app_id = \(app)) u
                        """,
                        conn
                    )
                },
                delete: refuse
            ),
            UserDataSection(
                name: "privacy_settings",
                export: { user, _, conn in
                    try await rows("SELECT row_to_json(p)::text FROM (SELECT * FROM privacy_settings WHERE user_id = \(user)) p", conn)
                },
                delete: refuse
            ),
            UserDataSection(
                name: "linked_providers",
                export: { user, _, conn in
                    try await rows(
                        """
                        SELECT row_to_json(o)::text FROM (SELECT provider, provider_user_id, profile_data, connected_at
                        FROM oauth_connections WHERE user_id = \(user)) o
                        """,
                        conn
                    )
                },
                delete: refuse
            ),
            UserDataSection(
                name: "sessions",
                export: { user, _, conn in
                    try await rows(
                        """
                        SELECT row_to_json(t)::text FROM (SELECT device_id, device_info, created_at, expires_at, revoked
                        FROM refresh_tokens WHERE user_id = \(user) ORDER BY created_at) t
                        """,
                        conn
                    )
                },
                delete: refuse
            ),
            UserDataSection(
                name: "activity",
                export: { user, app, conn in
                    try await rows(
                        """
                        SELECT row_to_json(a)::text FROM (SELECT action, result, ip_address, user_agent, timestamp
                        FROM audit_logs WHERE user_id = \(user) AND app_id = \(app) ORDER BY timestamp) a
                        """,
                        conn
                    )
                },
                delete: refuse
            ),
            // Seed 6a.4: the Game Center player and its achievements.
            UserDataSection(
                name: "game_center",
                export: { user, app, conn in
                    try await rows(
                        """
                        SELECT row_to_json(g)::text FROM (SELECT player_id, alias, achievements, leaderboard_score, linked_at, last_sync
                        FROM game_center_connections WHERE user_id = \(user) AND app_id = \(app)) g
                        """,
                        conn
                    )
                },
                delete: refuse
            ),
        ]
    }
}

/// `exports`: the export job's reads and writes.
struct ExportStore: Sendable {
    let logger: Logger

    struct Export: Sendable {
        var status: String
        var requestedAt: Date
        var completedAt: Date?
        var expiresAt: Date?
    }

    func create(userID: UUID, appID: UUID, now: Date, on conn: PostgresConnection) async throws -> UUID {
        for try await id in try await conn.run(
            """
            INSERT INTO exports (user_id, app_id, requested_at) VALUES (\(userID), \(appID), \(now)) RETURNING id
            """,
            logger: logger
        ).decode(UUID.self) { return id }
        throw AppError.unavailable
    }

    /// The user's own export (nil for anybody else's).
    func find(_ id: UUID, userID: UUID, appID: UUID, on conn: PostgresConnection) async throws -> Export? {
        for try await r in try await conn.run(
            """
            SELECT status, requested_at, completed_at, expires_at FROM exports WHERE id = \(id) AND user_id = \(userID) AND app_id = \(appID)
            """,
            logger: logger
        ).decode((String, Date, Date?, Date?).self) {
            return Export(status: r.0, requestedAt: r.1, completedAt: r.2, expiresAt: r.3)
        }
        return nil
    }

    /// A built export's document, as JSON text.
    func readyData(_ id: UUID, on conn: PostgresConnection) async throws -> String? {
        for try await d in try await conn.run("SELECT data::text FROM exports WHERE id = \(id) AND status = 'ready'", logger: logger).decode(
            String.self
        ) {
            return d
        }
        return nil
    }

    /// A pending export, with whom it is for (nil: unknown, or already built or failed).
    func pending(_ id: UUID, on conn: PostgresConnection) async throws -> (userID: UUID, appID: UUID, email: String?)? {
        for try await r in try await conn.run(
            """
            SELECT e.user_id, e.app_id, u.email FROM exports e JOIN users u ON u.id = e.user_id WHERE e.id = \(id) AND e.status = 'pending'
            """,
            logger: logger
        ).decode((UUID, UUID, String?).self) { return (r.0, r.1, r.2) }
        return nil
    }

    func markReady(_ id: UUID, data json: String, now: Date, expires: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE exports SET status = 'ready', data = \(json)::jsonb, completed_at = \(now), expires_at = \(expires)
            WHERE id = \(id) AND status = 'pending'
            """,
            logger: logger
        )
    }
}

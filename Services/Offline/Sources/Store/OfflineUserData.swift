import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import WireTypes

/// The user's data held here, for the privacy export and account deletion. Everything tied
/// to the person goes: the copy, the queue, conflicts, the profile, locations and consents.
enum OfflineUserData {
    static func sections(logger: Logger) -> [UserDataSection] {
        let q = UserDataQueries(logger: logger)
        return [
            UserDataSection(
                name: "locations",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(l)::text FROM (SELECT id, ST_Y(location::geometry) AS latitude, ST_X(location::geometry) AS longitude,
                               accuracy, altitude, source, country_code, country, city, created_at
                        FROM user_locations WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at) l
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await q.count("DELETE FROM user_locations WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
            UserDataSection(
                name: "offline_copy",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(c)::text FROM (SELECT category_id, item_count, size_bytes, downloaded_at, last_accessed_at, expires_at
                        FROM offline_categories WHERE app_id = \(app) AND user_id = \(user) ORDER BY category_id) c
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await conn.run("DELETE FROM offline_items WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    try await conn.run("DELETE FROM download_jobs WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    return try await q.count("DELETE FROM offline_categories WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
            UserDataSection(
                name: "sync_queue",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(q)::text FROM (SELECT client_action_id, action_type, entity_type, entity_id, payload, status, created_at
                        FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) ORDER BY created_at) q
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await conn.run("DELETE FROM sync_applied_actions WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    try await conn.run("DELETE FROM sync_jobs WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    return try await q.count("DELETE FROM sync_queue WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
            UserDataSection(
                name: "sync_profile",
                export: { user, app, conn in
                    try await q.rows(
                        """
                        SELECT row_to_json(p)::text FROM (SELECT auto_sync_enabled, sync_on_wifi_only, sync_frequency_hours, conflict_strategy, last_sync_at
                        FROM sync_profiles WHERE app_id = \(app) AND user_id = \(user)) p
                        """,
                        conn
                    )
                },
                delete: { user, app, conn in
                    try await conn.run("DELETE FROM user_consents WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    return try await q.count("DELETE FROM sync_profiles WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
                }
            ),
        ]
    }
}

import AuthDomain
import Foundation
import PostgresNIO
import ServiceKit

/// Game Center links (UC-AUTH-5): one player per user, one user per player in an app.
extension UserStore {
    struct GameCenterLink: Sendable {
        var playerID: String
        var alias: String?
        var achievements: [String]
        var leaderboardScore: Int64
    }

    /// The user (and their email) the player is linked to in the app, if any.
    func gameCenterOwner(of playerID: String, appID: UUID, on conn: PostgresConnection) async throws -> (userID: UUID, email: String?)? {
        let rows = try await conn.run(
            """
            SELECT g.user_id, u.email FROM game_center_connections g JOIN users u ON u.id = g.user_id
            WHERE g.app_id = \(appID) AND g.player_id = \(playerID)
            """,
            logger: logger
        )
        for try await (user, email) in rows.decode((UUID, String?).self) { return (user, email) }
        return nil
    }

    /// The player linked to the user, read under a row lock when the caller will write it.
    func gameCenterLink(of userID: UUID, appID: UUID, forUpdate: Bool, on conn: PostgresConnection) async throws -> GameCenterLink? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        let rows = try await conn.run(
            """
            SELECT player_id, alias, achievements, leaderboard_score FROM game_center_connections
            WHERE user_id = \(userID) AND app_id = \(appID)\(unescaped: lock)
            """,
            logger: logger
        )
        for try await (player, alias, achievements, score) in rows.decode((String, String?, [String], Int64).self) {
            return GameCenterLink(playerID: player, alias: alias, achievements: achievements, leaderboardScore: score)
        }
        return nil
    }

    /// Links the player; linking the same player again only refreshes its alias.
    func linkGameCenter(_ link: GameCenterLink, userID: UUID, appID: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO game_center_connections (user_id, app_id, player_id, alias, achievements, leaderboard_score, linked_at, last_sync)
            VALUES (\(userID), \(appID), \(link.playerID), \(link.alias), \(link.achievements), \(link.leaderboardScore), \(now), \(now))
            ON CONFLICT (user_id) DO UPDATE SET alias = EXCLUDED.alias, last_sync = EXCLUDED.last_sync
            """,
            logger: logger
        )
    }

    func syncGameCenter(userID: UUID, achievements: [String], leaderboardScore: Int64, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE game_center_connections SET achievements = \(achievements), leaderboard_score = \(leaderboardScore),
                   last_sync = \(now) WHERE user_id = \(userID)
            """,
            logger: logger
        )
    }

    /// Whether a link was removed.
    func unlinkGameCenter(userID: UUID, appID: UUID, on conn: PostgresConnection) async throws -> Bool {
        var removed = false
        for try await _ in try await conn.run(
            """
            DELETE FROM game_center_connections WHERE user_id = \(userID) AND app_id = \(appID) RETURNING id
            """,
            logger: logger
        ) { removed = true }
        return removed
    }
}

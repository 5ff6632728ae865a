import AuthDomain
import Foundation
import Logging
import ServiceKit
import WireTypes

/// UC-AUTH-1.3 Game Center, once its signature is verified (in the route): a player linked to one
/// account only, and the achievements and best score merged both ways on each sync. The flow
/// owns the transactions (#50).
struct GameCenterLinking: Sendable {
    let db: DatabasePool
    let logger: Logger
    let users: UserStore
    let audit: AuditLog

    struct Synced: Codable {
        var achievements: Int
        var leaderboardScore: Int64
        enum CodingKeys: String, CodingKey {
            case achievements
            case leaderboardScore = "leaderboard_score"
        }
    }
    struct Report: Codable {
        var achievements: [String]
        var leaderboardScore: Int64?
        enum CodingKeys: String, CodingKey {
            case achievements
            case leaderboardScore = "leaderboard_score"
        }
    }
    struct LinkResponse: Codable {
        var linked: Bool
        var playerID: String
        var alias: String?
        var synced: Synced
        var conflicts: [GameCenterMerge.Conflict]
        var reportToGameCenter: Report
        enum CodingKeys: String, CodingKey {
            case linked
            case playerID = "player_id"
            case alias, synced, conflicts
            case reportToGameCenter = "report_to_game_center"
        }
    }

    func link(
        playerID: String,
        alias: String?,
        achievements: [String],
        leaderboardScore: Int64,
        appID: UUID,
        userID: UUID,
        now: Date,
        origin: AuditLog.Origin
    ) async throws -> LinkResponse {
        try await db.withTransaction(logger: logger) { conn -> LinkResponse in
            if let (other, email) = try await users.gameCenterOwner(of: playerID, appID: appID, on: conn), other != userID {
                throw AppError(
                    AuthErrorCode.playerIdAlreadyLinked,
                    "This Game Center account is already linked to another user",
                    extra: ["linked_user_email": email.map { .string(EmailAddress.mask($0)) } ?? .null, "can_unlink": true]
                )
            }
            if let mine = try await users.gameCenterLink(of: userID, appID: appID, forUpdate: false, on: conn),
                mine.playerID != playerID
            {
                throw AppError(AuthErrorCode.gameCenterAlreadyLinked, "Another Game Center player is linked to this account; unlink it first")
            }
            let merge = GameCenterMerge.merge(
                storedAchievements: [],
                storedScore: 0,
                gameCenterAchievements: achievements,
                gameCenterScore: leaderboardScore
            )
            try await users.linkGameCenter(
                .init(
                    playerID: playerID,
                    alias: alias,
                    achievements: merge.achievements,
                    leaderboardScore: merge.leaderboardScore
                ),
                userID: userID,
                appID: appID,
                now: now,
                on: conn
            )
            try await audit.record(
                origin.entry(
                    "game_center_link",
                    "success",
                    app: appID,
                    user: userID,
                    details: ["player_id": .string(playerID)]
                ),
                on: conn
            )
            return LinkResponse(
                linked: true,
                playerID: playerID,
                alias: alias,
                synced: Synced(achievements: merge.achievements.count, leaderboardScore: merge.leaderboardScore),
                conflicts: [],
                reportToGameCenter: Report(achievements: [], leaderboardScore: nil)
            )
        }
    }

    func sync(achievements: [String], leaderboardScore: Int64, appID: UUID, userID: UUID, now: Date) async throws -> LinkResponse {
        try await db.withTransaction(logger: logger) { conn -> LinkResponse in
            guard let link = try await users.gameCenterLink(of: userID, appID: appID, forUpdate: true, on: conn) else {
                throw AppError(AuthErrorCode.notLinked, "No Game Center player is linked")
            }
            let (player, alias, stored, score) = (link.playerID, link.alias, link.achievements, link.leaderboardScore)
            let merge = GameCenterMerge.merge(
                storedAchievements: stored,
                storedScore: score,
                gameCenterAchievements: achievements,
                gameCenterScore: leaderboardScore
            )
            try await users.syncGameCenter(
                userID: userID,
                achievements: merge.achievements,
                leaderboardScore: merge.leaderboardScore,
                now: now,
                on: conn
            )
            return LinkResponse(
                linked: true,
                playerID: player,
                alias: alias,
                synced: Synced(achievements: merge.achievements.count, leaderboardScore: merge.leaderboardScore),
                conflicts: merge.conflicts,
                reportToGameCenter: Report(achievements: merge.achievementsToReport, leaderboardScore: merge.scoreToReport)
            )
        }
    }
}

import Foundation

/// UC-AUTH-1.3 merge rules: achievements are cumulative (union), the leaderboard keeps the
/// best score (max); a difference is reported as a conflict, resolved by default in Game
/// Center's favour when it holds more, else by reporting the local best to Game Center.
public struct GameCenterMerge: Sendable, Equatable {
    public struct Conflict: Codable, Sendable, Equatable {
        public var type: String
        public var local: Int64
        public var gameCenter: Int64
        public var resolution: String

        package init(type: String, local: Int64, gameCenter: Int64, resolution: String) {
            self.type = type
            self.local = local
            self.gameCenter = gameCenter
            self.resolution = resolution
        }

        package enum CodingKeys: String, CodingKey {
            case type, local
            case gameCenter = "game_center"
            case resolution
        }
    }

    public var achievements: [String]
    public var leaderboardScore: Int64
    /// What the app should report to Game Center so both sides agree.
    public var achievementsToReport: [String]
    public var scoreToReport: Int64?
    public var conflicts: [Conflict]

    public static func merge(
        storedAchievements: [String],
        storedScore: Int64,
        gameCenterAchievements: [String],
        gameCenterScore: Int64
    ) -> GameCenterMerge {
        let union = Array(Set(storedAchievements).union(gameCenterAchievements)).sorted()
        let toReport = Array(Set(storedAchievements).subtracting(gameCenterAchievements)).sorted()
        var conflicts: [Conflict] = []
        var scoreToReport: Int64?
        if gameCenterScore > storedScore {
            conflicts.append(Conflict(type: "leaderboard_score", local: storedScore, gameCenter: gameCenterScore, resolution: "game_center_wins"))
        } else if storedScore > gameCenterScore {
            conflicts.append(Conflict(type: "leaderboard_score", local: storedScore, gameCenter: gameCenterScore, resolution: "local_reported"))
            scoreToReport = storedScore
        }
        return GameCenterMerge(
            achievements: union,
            leaderboardScore: max(storedScore, gameCenterScore),
            achievementsToReport: toReport,
            scoreToReport: scoreToReport,
            conflicts: conflicts
        )
    }
}

import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-AUTH-1.3: link a Game Center player (signature verified), sync achievements and the
/// best score, unlink.
struct GameCenterController {
    let ctx: AuthContext
    let verifier: any GameCenterVerifying

    func addRoutes(to user: RouterGroup<ServiceRequestContext>) {
        user.post("auth/game-center/link") { request, context in try await link(request, context) }
        user.post("auth/game-center/sync") { request, context in try await sync(request, context) }
        user.post("auth/game-center/unlink") { _, context in try await unlink(context) }
    }

    struct LinkBody: Codable {
        var playerID: String
        var alias: String?
        var publicKeyURL: String
        var signature: String
        var salt: String
        var timestamp: UInt64
        var achievements: [String]?
        var leaderboardScore: Int64?
        enum CodingKeys: String, CodingKey {
            case playerID = "player_id", alias, publicKeyURL = "public_key_url", signature, salt, timestamp, achievements
            case leaderboardScore = "leaderboard_score"
        }
    }

    struct SyncBody: Codable {
        var achievements: [String]
        var leaderboardScore: Int64
        enum CodingKeys: String, CodingKey { case achievements; case leaderboardScore = "leaderboard_score" }
    }

    struct Synced: Codable {
        var achievements: Int; var leaderboardScore: Int64
        enum CodingKeys: String, CodingKey { case achievements; case leaderboardScore = "leaderboard_score" }
    }
    struct Report: Codable {
        var achievements: [String]; var leaderboardScore: Int64?
        enum CodingKeys: String, CodingKey { case achievements; case leaderboardScore = "leaderboard_score" }
    }
    struct LinkResponse: Codable {
        var linked: Bool; var playerID: String; var alias: String?; var synced: Synced
        var conflicts: [GameCenterMerge.Conflict]; var reportToGameCenter: Report
        enum CodingKeys: String, CodingKey {
            case linked, playerID = "player_id", alias, synced, conflicts, reportToGameCenter = "report_to_game_center"
        }
    }

    static func validate(_ achievements: [String]?) throws {
        guard let achievements else { return }
        guard achievements.count <= 1000, achievements.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 200 }) else {
            throw AppError.validation("achievements", "At most 1000 achievement ids of 1 to 200 bytes")
        }
    }

    func link(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        if context.identity?.isGuest == true {
            throw AppError(AuthErrorCode.guestNotAllowed, "Create an account to link Game Center")
        }
        let body = try await request.decodeJSON(as: LinkBody.self, context: context)
        guard !body.playerID.isEmpty, body.playerID.utf8.count <= 200 else { throw AppError.validation("player_id", "Invalid player_id") }
        guard let signature = Data(base64Encoded: body.signature) else { throw AppError.validation("signature", "signature must be base64") }
        guard let salt = Data(base64Encoded: body.salt) else { throw AppError.validation("salt", "salt must be base64") }
        try Self.validate(body.achievements)
        let now = ctx.clock.now()
        let bundleIDs = try await ctx.applications.find(id: appID)?.appleBundleIDs ?? []
        do {
            try await verifier.verify(
                GameCenterProof(
                    playerID: body.playerID, publicKeyURL: body.publicKeyURL, signature: signature,
                    salt: salt, timestamp: body.timestamp), bundleIDs: bundleIDs, now: now)
        } catch {
            ctx.logger.info("Game Center signature refused", metadata: ["reason": "\(error)"])
            await ctx.audit.record(
                ctx.entry(
                    "game_center_link", "failure", app: appID, user: userID, request, context,
                    details: ["reason": .string(String(describing: error))]), db: ctx.db)
            throw AppError(AuthErrorCode.invalidSignature, "Game Center authentication failed")
        }
        do {
            let response = try await ctx.db.withTransaction(logger: ctx.logger) { conn -> LinkResponse in
                if let (other, email) = try await ctx.users.gameCenterOwner(of: body.playerID, appID: appID, on: conn), other != userID {
                    throw AppError(
                        AuthErrorCode.playerIdAlreadyLinked, "This Game Center account is already linked to another user",
                        extra: ["linked_user_email": email.map { .string(EmailAddress.mask($0)) } ?? .null, "can_unlink": true])
                }
                if let mine = try await ctx.users.gameCenterLink(of: userID, appID: appID, forUpdate: false, on: conn),
                    mine.playerID != body.playerID
                {
                    throw AppError(AuthErrorCode.gameCenterAlreadyLinked, "Another Game Center player is linked to this account; unlink it first")
                }
                let merge = GameCenterMerge.merge(
                    storedAchievements: [], storedScore: 0,
                    gameCenterAchievements: body.achievements ?? [], gameCenterScore: body.leaderboardScore ?? 0)
                try await ctx.users.linkGameCenter(
                    .init(
                        playerID: body.playerID, alias: body.alias, achievements: merge.achievements,
                        leaderboardScore: merge.leaderboardScore),
                    userID: userID, appID: appID, now: now, on: conn)
                try await ctx.audit.record(
                    ctx.entry(
                        "game_center_link", "success", app: appID, user: userID, request, context,
                        details: ["player_id": .string(body.playerID)]), on: conn)
                return LinkResponse(
                    linked: true, playerID: body.playerID, alias: body.alias,
                    synced: Synced(achievements: merge.achievements.count, leaderboardScore: merge.leaderboardScore),
                    conflicts: [], reportToGameCenter: Report(achievements: [], leaderboardScore: nil))
            }
            return try context.json(response)
        } catch  where DatabaseErrors.isUniqueViolation(error) {
            throw AppError(
                AuthErrorCode.playerIdAlreadyLinked, "This Game Center account is already linked to another user",
                extra: ["can_unlink": true])
        }
    }

    func sync(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        let body = try await request.decodeJSON(as: SyncBody.self, context: context)
        try Self.validate(body.achievements)
        guard body.leaderboardScore >= 0 else { throw AppError.validation("leaderboard_score", "Score cannot be negative") }
        let now = ctx.clock.now()
        let response = try await ctx.db.withTransaction(logger: ctx.logger) { conn -> LinkResponse in
            guard let link = try await ctx.users.gameCenterLink(of: userID, appID: appID, forUpdate: true, on: conn) else {
                throw AppError(AuthErrorCode.notLinked, "No Game Center player is linked")
            }
            let (player, alias, stored, score) = (link.playerID, link.alias, link.achievements, link.leaderboardScore)
            let merge = GameCenterMerge.merge(
                storedAchievements: stored, storedScore: score,
                gameCenterAchievements: body.achievements, gameCenterScore: body.leaderboardScore)
            try await ctx.users.syncGameCenter(
                userID: userID, achievements: merge.achievements, leaderboardScore: merge.leaderboardScore,
                now: now, on: conn)
            return LinkResponse(
                linked: true, playerID: player, alias: alias,
                synced: Synced(achievements: merge.achievements.count, leaderboardScore: merge.leaderboardScore),
                conflicts: merge.conflicts,
                reportToGameCenter: Report(achievements: merge.achievementsToReport, leaderboardScore: merge.scoreToReport))
        }
        return try context.json(response)
    }

    func unlink(_ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        let removed = try await ctx.db.withConnection { try await ctx.users.unlinkGameCenter(userID: userID, appID: appID, on: $0) }
        guard removed else { throw AppError(AuthErrorCode.notLinked, "No Game Center player is linked") }
        return try context.json(["linked": false])
    }
}

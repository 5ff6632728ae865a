import AuthDomain
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
    var gameCenter: GameCenterLinking { GameCenterLinking(ctx: ctx) }

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
            case playerID = "player_id"
            case alias
            case publicKeyURL = "public_key_url"
            case signature, salt, timestamp, achievements
            case leaderboardScore = "leaderboard_score"
        }
    }

    struct SyncBody: Codable {
        var achievements: [String]
        var leaderboardScore: Int64
        enum CodingKeys: String, CodingKey {
            case achievements
            case leaderboardScore = "leaderboard_score"
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
                    playerID: body.playerID,
                    publicKeyURL: body.publicKeyURL,
                    signature: signature,
                    salt: salt,
                    timestamp: body.timestamp
                ),
                bundleIDs: bundleIDs,
                now: now
            )
        } catch {
            ctx.logger.info("Game Center signature refused", metadata: ["reason": "\(error)"])
            await ctx.audit.record(
                ctx.entry(
                    "game_center_link",
                    "failure",
                    app: appID,
                    user: userID,
                    request,
                    context,
                    details: ["reason": .string(String(describing: error))]
                ),
                db: ctx.db
            )
            throw AppError(AuthErrorCode.invalidSignature, "Game Center authentication failed")
        }
        do {
            let response = try await gameCenter.link(
                playerID: body.playerID,
                alias: body.alias,
                achievements: body.achievements ?? [],
                leaderboardScore: body.leaderboardScore ?? 0,
                appID: appID,
                userID: userID,
                now: now,
                origin: ctx.origin(request, context)
            )
            return try context.json(response)
        } catch  where DatabaseErrors.isUniqueViolation(error) {
            throw AppError(
                AuthErrorCode.playerIdAlreadyLinked,
                "This Game Center account is already linked to another user",
                extra: ["can_unlink": true]
            )
        }
    }

    func sync(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        let body = try await request.decodeJSON(as: SyncBody.self, context: context)
        try Self.validate(body.achievements)
        guard body.leaderboardScore >= 0 else { throw AppError.validation("leaderboard_score", "Score cannot be negative") }
        let now = ctx.clock.now()
        let response = try await gameCenter.sync(
            achievements: body.achievements,
            leaderboardScore: body.leaderboardScore,
            appID: appID,
            userID: userID,
            now: now
        )
        return try context.json(response)
    }

    func unlink(_ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        let removed = try await ctx.db.withConnection { try await ctx.users.unlinkGameCenter(userID: userID, appID: appID, on: $0) }
        guard removed else { throw AppError(AuthErrorCode.notLinked, "No Game Center player is linked") }
        return try context.json(["linked": false])
    }
}

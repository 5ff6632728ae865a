import AuthDomain
import AuthMessaging
import Foundation
import Logging
import ServiceKit
import WireTypes

/// UC-AUTH-1.4: a refresh token exchanged for a new pair, in one transaction. The decision is
/// `RefreshRotation`'s; this reads what it needs and carries it out. A refusal that must still
/// commit (ending a family on reuse) is returned, not thrown, so the transaction keeps it.
struct TokenRefresh: Sendable {
    let db: DatabasePool
    let logger: Logger
    let users: UserStore
    let refreshTokens: RefreshTokenStore
    let issuer: TokenIssuer
    let audit: AuditLog
    let box: SecretBox

    enum Outcome: Sendable {
        case pair(TokenPair)
        case refused
        case reused
        case suspended(User)
    }

    /// `reuseAudit` builds the audit entry of a detected reuse (the user, the sessions ended).
    func run(token: String, appID: UUID, now: Date, reuseAudit: @Sendable (UUID, Int) -> AuditLog.Entry) async throws -> Outcome {
        try await db.withTransaction(logger: logger) { conn -> Outcome in
            let found = try await refreshTokens.lock(token: token, on: conn)
            let record = found?.appID == appID ? found : nil
            var owner: User?
            if let record { owner = try await users.find(.id(record.userID), appID: appID, on: conn) }
            let presented = record.map {
                RefreshRotation.Presented(
                    revoked: $0.revoked,
                    expiresAt: $0.expiresAt,
                    rotatedAt: $0.rotatedAt,
                    hasSuccessor: $0.successorSealed != nil
                )
            }
            let ownerState: RefreshRotation.Owner = owner.map { $0.status == .suspended ? .suspended : .active } ?? .missing
            var decision = RefreshRotation.decide(presented, owner: ownerState, now: now)
            if decision == .returnSuccessor, let record, let user = owner {
                var live = false
                if let sealed = record.successorSealed, let successor = try? box.open(sealed),
                    let next = try await refreshTokens.lock(token: successor, on: conn)
                {
                    live = !next.revoked
                    if live {
                        return .pair(
                            issuer.pair(access: try issuer.accessToken(for: user, session: record.familyID, now: now), refresh: successor)
                        )
                    }
                }
                decision = RefreshRotation.successor(isLive: live)
            }
            switch decision {
            case .refuse, .returnSuccessor:
                return .refused
            case .ownerSuspended:
                guard let owner else { return .refused }
                return .suspended(owner)
            case .endFamily:
                guard let record else { return .refused }
                let ended = try await refreshTokens.revokeFamily(record.familyID, reason: "reuse_detected", on: conn)
                try await MessagingOutbox.endStreams(
                    .sessionRevoked,
                    app: record.appID,
                    user: record.userID,
                    version: 0,
                    data: ["session_id": .string(record.familyID.lowercasedString), "reason": .string("reuse_detected")],
                    on: conn,
                    logger: logger
                )
                try await audit.record(reuseAudit(record.userID, ended), on: conn)
                return .reused
            case .rotate:
                guard let record, let user = owner else { return .refused }
                let next = OpaqueToken.generate()
                try await refreshTokens.rotate(record.id, successor: next, successorSealed: try box.seal(next), now: now, on: conn)
                if user.isGuest { _ = try await users.recordLogin(user.id, now: now, on: conn) }
                return .pair(issuer.pair(access: try issuer.accessToken(for: user, session: record.familyID, now: now), refresh: next))
            }
        }
    }
}

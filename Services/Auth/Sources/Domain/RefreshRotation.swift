import Foundation

/// UC-AUTH-1.4, refreshing a session: what a presented refresh token earns, decided from the
/// token's row and its owner alone (the flow, `TokenRefresh`, reads them and carries it out).
package enum RefreshRotation {
    /// The presented token as stored (nil: unknown, or another app's).
    package struct Presented: Sendable, Equatable {
        package var revoked: Bool
        package var expiresAt: Date
        /// When it was exchanged for its successor (nil: never used).
        package var rotatedAt: Date?
        /// Whether its successor was kept (sealed) to answer a concurrent refresh.
        package var hasSuccessor: Bool

        package init(revoked: Bool, expiresAt: Date, rotatedAt: Date? = nil, hasSuccessor: Bool) {
            self.revoked = revoked
            self.expiresAt = expiresAt
            self.rotatedAt = rotatedAt
            self.hasSuccessor = hasSuccessor
        }
    }

    package enum Owner: Sendable, Equatable { case missing, suspended, active }

    package enum Decision: Sendable, Equatable {
        /// `invalid_token`: unknown, another app's, revoked, expired, or its user is gone.
        case refuse
        /// `account_suspended`: a suspension ended every session, and its holder is told why.
        case ownerSuspended
        /// Two refreshes of one app raced: the loser gets the winner's pair (if the successor is still live).
        case returnSuccessor
        /// `token_reused`: a rotated token came back; someone else may hold it, so its family ends.
        case endFamily
        /// The token is exchanged for a new one of the same family.
        case rotate
    }

    package static func decide(_ token: Presented?, owner: Owner, now: Date, grace: TimeInterval = TokenLifetimes.rotationGrace) -> Decision {
        guard let token else { return .refuse }
        if owner == .suspended { return .ownerSuspended }
        if token.revoked || token.expiresAt <= now { return .refuse }
        if let rotatedAt = token.rotatedAt {
            let withinGrace = now.timeIntervalSince(rotatedAt) <= grace
            return withinGrace && token.hasSuccessor && owner != .missing ? .returnSuccessor : .endFamily
        }
        return owner == .missing ? .refuse : .rotate
    }

    /// After `.returnSuccessor`: a successor that is gone or revoked means the race story does
    /// not hold, and the reuse is treated as one.
    package static func successor(isLive: Bool) -> Decision { isLive ? .returnSuccessor : .endFamily }
}

import Foundation
import Synchronization
import WireTypes

/// The ordering rule of every versioned fact: a receiver keeps the newest version its owner
/// assigned. Arrival order, retries and replays cannot move a fact backwards.
public enum FactVersion {
    public static func isNewer(_ incoming: Int64, than stored: Int64?) -> Bool {
        guard let stored else { return true }
        return incoming > stored
    }
}

/// What this process knows about ended sessions (pure state, no I/O): which users' tokens of an
/// older session epoch are refused, who is suspended or erased, which single sessions ended.
public struct SessionRevocations: Sendable, Equatable {
    public struct UserState: Sendable, Equatable {
        public var version: Int64
        public var sessionEpoch: Int
        public var state: SessionFact.State
        public var reason: String?
    }

    public enum Verdict: Sendable, Equatable {
        case allowed
        case sessionEnded
        case suspended(reason: String?)
        case erased
    }

    struct Key: Hashable, Sendable {
        var app: UUID
        var user: UUID
    }

    private(set) var users: [Key: UserState] = [:]
    private(set) var sessions: Set<UUID> = []

    public init() {}

    public var userCount: Int { users.count }
    public var sessionCount: Int { sessions.count }

    /// Whether a token with these claims may still be used.
    public func verdict(app: UUID, user: UUID, session: UUID?, sessionEpoch: Int?) -> Verdict {
        if let u = users[Key(app: app, user: user)] {
            switch u.state {
            case .erased: return .erased
            case .suspended: return .suspended(reason: u.reason)
            case .active: if (sessionEpoch ?? 0) < u.sessionEpoch { return .sessionEnded }
            }
        }
        if let session, sessions.contains(session) { return .sessionEnded }
        return .allowed
    }

    public func state(app: UUID, user: UUID) -> UserState? { users[Key(app: app, user: user)] }

    /// Applies a fact; returns whether it changed anything. An ended session stays ended; the
    /// user's state moves only to a newer version; the epoch never goes down; erased is final
    /// and wins over any version.
    @discardableResult
    public mutating func apply(_ fact: SessionFact) -> Bool {
        var changed = false
        if let sid = fact.revokedSessionID { changed = sessions.insert(sid).inserted }
        let key = Key(app: fact.appID, user: fact.userID)
        let current = users[key]
        if current?.state == .erased { return changed }
        // Erasure wins in any order; anything else only when newer. The same rule as the
        // schema's (`UserFactStore.record`), so memory and table agree whatever the order.
        guard fact.state == .erased || FactVersion.isNewer(fact.version, than: current?.version) else { return changed }
        users[key] = UserState(
            version: fact.version,
            sessionEpoch: max(current?.sessionEpoch ?? 0, fact.sessionEpoch),
            state: fact.state,
            reason: fact.state == .suspended ? fact.reason : nil
        )
        return true
    }
}

/// The process-wide copy of `SessionRevocations`, read on every authenticated request (a lock
/// and two hash lookups: no database or network round trip).
public final class SessionRegistry: Sendable {
    private let state = Mutex(SessionRevocations())
    public init() {}

    public func verdict(for claims: AccessTokenClaims) -> SessionRevocations.Verdict {
        state.withLock { $0.verdict(app: claims.appID, user: claims.userID, session: claims.sid, sessionEpoch: claims.sv) }
    }

    public func apply(_ facts: [SessionFact]) {
        guard !facts.isEmpty else { return }
        state.withLock { s in for f in facts { s.apply(f) } }
    }

    /// Replaces everything (a full reload from the service's own schema).
    public func replace(with facts: [SessionFact]) {
        var fresh = SessionRevocations()
        for f in facts { fresh.apply(f) }
        state.withLock { $0 = fresh }
    }

    public var snapshot: SessionRevocations { state.withLock { $0 } }
}

extension AppError {
    /// An erased user's token, or a request of theirs that meets the erasure (401).
    public static let accountErased = AppError(.unauthorized, "invalid_token", "This account no longer exists")

    /// The refusal for a token whose session ended (401) or whose user is suspended (403, the
    /// reason included) or erased (401).
    public static func refusal(_ verdict: SessionRevocations.Verdict) -> AppError? {
        switch verdict {
        case .allowed: return nil
        case .sessionEnded: return AppError(.unauthorized, "session_revoked", "This session has ended; please sign in again")
        case .erased: return .accountErased
        case .suspended(let reason):
            return AppError(
                .forbidden,
                "account_suspended",
                "This account is suspended",
                extra: ["reason": .string(reason ?? "Account suspended")]
            )
        }
    }
}

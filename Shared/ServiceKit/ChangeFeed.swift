import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization
import WireTypes

/// A change a service made to its own data, announced so that every replica drops what it
/// holds of it: `topic` names what changed (`location`, `places`, `user`, …), `app` and `user`
/// narrow it (nil: every tenant, every user).
public struct DataChange: Sendable, Hashable, CustomStringConvertible {
    public var topic: String
    public var app: UUID?
    public var user: UUID?

    public init(_ topic: String, app: UUID? = nil, user: UUID? = nil) {
        self.topic = topic
        self.app = app
        self.user = user
    }

    /// Everything held about one user of one tenant (erasure, suspension): every cache listens to it.
    public static let userTopic = "user"

    var payload: String { "\(topic)|\(app.map { $0.lowercasedString } ?? "")|\(user.map { $0.lowercasedString } ?? "")" }

    init?(payload: String) {
        let parts = payload.split(separator: "|", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty else { return nil }
        topic = String(parts[0])
        app = parts[1].isEmpty ? nil : UUID(uuidString: String(parts[1]))
        user = parts[2].isEmpty ? nil : UUID(uuidString: String(parts[2]))
        if !parts[1].isEmpty && app == nil || !parts[2].isEmpty && user == nil { return nil }
    }

    public var description: String { payload }
}

/// The changes of this service's schema, heard by every replica: table triggers
/// (`announce_change`, platform include `change_feed`) or `publish(_:on:)` NOTIFY inside the
/// writing transaction (delivered at commit, to no one if it rolls back); each replica keeps one
/// connection LISTENing on the schema's channel and hands what it hears to its caches.
///
/// A cache may hold an answer only while the feed is live: when the listening connection is
/// lost, changes may go unheard, so subscribers are told to `reset` (drop everything) and the
/// feed is not live again until it listens on a new connection. The connection is checked
/// every few seconds, so a silently dead one is noticed too.
public final class ChangeFeed: Service, Sendable {
    public enum Event: Sendable {
        case change(DataChange)
        /// Changes may have been missed (or the feed went live again): drop everything held.
        case reset
    }

    public let channel: String
    private let db: DatabasePool
    private let logger: Logger
    private let pingInterval: Duration
    private struct State {
        var handlers: [@Sendable (Event) -> Void] = []
        var live = false
        /// Counts the times the feed went live; an answer read during one period may be kept only in that period.
        var period: UInt64 = 0
    }
    private let state = Mutex(State())

    public init(db: DatabasePool, schema: String, pingInterval: Duration = .seconds(5), logger: Logger) {
        self.db = db
        self.channel = "\(schema)_changes"
        self.pingInterval = pingInterval
        self.logger = logger
    }

    /// The live period now (nil: not listening, nothing may be cached).
    public var livePeriod: UInt64? { state.withLock { $0.live ? $0.period : nil } }

    public func subscribe(_ handler: @escaping @Sendable (Event) -> Void) {
        state.withLock { $0.handlers.append(handler) }
    }

    /// Announces a change inside the caller's transaction (heard by every replica at commit),
    /// and drops it here at once: a read racing the write may not keep what it read before.
    /// For changes no table trigger announces (an erasure: the user topic).
    public func publish(_ change: DataChange, on conn: PostgresConnection) async throws {
        try await conn.run("SELECT pg_notify(\(channel), \(change.payload))", logger: logger)
        deliver(.change(change))
    }

    /// Drops what this replica holds of a change it just committed, without waiting for its
    /// own notification to come back (read-your-writes on the replica that answered).
    public func dropLocally(_ change: DataChange) {
        deliver(.change(change))
    }

    private func deliver(_ event: Event) {
        let handlers = state.withLock { $0.handlers }
        for h in handlers { h(event) }
    }

    private func setLive(_ live: Bool) {
        let changed = state.withLock { s -> Bool in
            guard s.live != live else { return false }
            s.live = live
            if live { s.period += 1 }
            return true
        }
        if changed { deliver(.reset) }
    }

    public func run() async throws {
        try await cancelWhenGracefulShutdown {
            var failures = 0
            while !Task.isCancelled {
                let before = self.state.withLock { $0.period }
                do {
                    try await self.listenOnce()
                } catch {
                    // Counted from the last time it listened.
                    if self.state.withLock({ $0.period }) != before { failures = 0 }
                    if Task.isCancelled { break }
                    failures += 1
                    self.logger.warning(
                        "change feed lost its connection; caches dropped until it listens again",
                        metadata: ["channel": "\(self.channel)", "error": "\(String(reflecting: error))"]
                    )
                }
                self.setLive(false)
                // 100 ms, 200 ms, … at most 2 s between attempts.
                try? await Task.sleep(for: .milliseconds(min(2000, 100 << min(failures, 5))))
            }
        }
        setLive(false)
    }

    private func listenOnce() async throws {
        let conn = try await db.connectDedicated()
        do {
            try await listen(on: conn)
        } catch {
            try? await conn.close()
            throw error
        }
        try? await conn.close()
    }

    private func listen(on conn: PostgresConnection) async throws {
        try await conn.listen(on: channel) { notifications in
            setLive(true)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await n in notifications {
                        if let change = DataChange(payload: n.payload) {
                            self.deliver(.change(change))
                        } else {
                            self.logger.warning("unreadable change notification", metadata: ["payload": "\(n.payload)"])
                        }
                    }
                    throw DatabaseUnavailableError(reason: "the listening connection ended")
                }
                group.addTask {
                    while true {
                        try await Task.sleep(for: self.pingInterval)
                        try await conn.run("SELECT 1", logger: self.logger)
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }
}

/// A write is in the next read on the replica that answered it, before its own notification
/// comes back: after any request that may write (not GET or HEAD) this replica drops what its
/// caches hold of the signed-in user (`signedInUser`, behind the access token) or, for a writer
/// that is not a user and whose rows cannot be named here (a store's webhook, another service's
/// delivery, an operator), everything it holds (`everything`). The other replicas hear the change
/// from the feed. The route's transaction has committed when it answers, so a read that begins
/// after this drop reads the write.
public struct ReadYourWritesMiddleware: RouterMiddleware {
    public typealias Context = ServiceRequestContext
    public enum Scope: Sendable { case signedInUser, everything }
    let changes: ChangeFeed
    let scope: Scope

    public init(changes: ChangeFeed, scope: Scope = .signedInUser) {
        self.changes = changes
        self.scope = scope
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method != .get, request.method != .head else { return try await next(request, context) }
        let change: DataChange
        switch (scope, context.identity?.userID, context.identity?.appID) {
        case (.signedInUser, let user?, let app?): change = DataChange(DataChange.userTopic, app: app, user: user)
        case (.signedInUser, _, _): return try await next(request, context)
        case (.everything, _, _):
            // Only a write that was accepted: a refused one changed nothing, and anyone may send one.
            let response = try await next(request, context)
            if response.status.code < 300 { changes.dropLocally(DataChange(DataChange.userTopic)) }
            return response
        }
        defer { changes.dropLocally(change) }
        return try await next(request, context)
    }
}

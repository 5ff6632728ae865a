import AuthDomain
import Foundation
import Logging
import PostgresNIO
import Prometheus
import ServiceKit
import ServiceLifecycle
import Synchronization

/// This replica's open live streams (#46) and the one connection that LISTENs for every
/// replica's events: an event committed anywhere (this replica, another, another service's
/// outbox through any of them) reaches the streams of its user here at its commit. The hub only
/// passes signals on; each stream reads what it missed from the table itself, so a lost
/// notification (the listening connection dropped) costs a read, never an event.
final class LiveHub: Service, Sendable {
    enum Signal: Sendable {
        /// One of the user's events; its body when the notification carried it.
        case event(LiveStore.Stored)
        /// An event that is not kept (a session's end, an erasure): it may end the stream.
        case terminal(type: LiveEventType, body: String)
        case heartbeat
        /// Notifications may have been missed: read the table after the stream's cursor.
        case catchUp
        case replaced
        case closing
    }

    private struct State {
        /// Each user's streams by the order they opened in.
        var byUser: [UUID: [UInt64: LiveStream]] = [:]
        var ids: [ObjectIdentifier: UInt64] = [:]
        var nextID: UInt64 = 0
        var closing = false
    }

    let heartbeat: Duration
    let maxPerUser: Int
    /// Frames a stream's client has not taken yet; a client this far behind is closed and
    /// resumes from its cursor (nothing lost, nothing held without bound).
    let buffer: Int
    let logger: Logger
    private let db: DatabasePool
    private let registry: PrometheusCollectorRegistry
    private let state = Mutex(State())

    init(
        db: DatabasePool,
        registry: PrometheusCollectorRegistry,
        logger: Logger,
        heartbeat: Duration = .seconds(20),
        maxPerUser: Int = 10,
        buffer: Int = 512
    ) {
        self.db = db
        self.registry = registry
        self.logger = logger
        self.heartbeat = heartbeat
        self.maxPerUser = maxPerUser
        self.buffer = buffer
    }

    var openStreams: Int { state.withLock { $0.ids.count } }

    /// Registers a stream; the oldest of its user's streams beyond `maxPerUser` is told it is
    /// replaced. false once the replica is shutting down.
    func open(_ stream: LiveStream) -> Bool {
        let user = stream.session.userID
        let replaced: [LiveStream]? = state.withLock { s in
            guard !s.closing else { return nil }
            s.nextID += 1
            s.ids[ObjectIdentifier(stream)] = s.nextID
            var mine = s.byUser[user] ?? [:]
            mine[s.nextID] = stream
            var gone: [LiveStream] = []
            for old in LiveRules.replaced(openedInOrder: Array(mine.keys), max: maxPerUser) {
                if let o = mine.removeValue(forKey: old) {
                    s.ids[ObjectIdentifier(o)] = nil
                    gone.append(o)
                }
            }
            s.byUser[user] = mine
            return gone
        }
        guard let replaced else { return false }
        for old in replaced { old.receive(.replaced) }
        gauge.set(Double(openStreams))
        return true
    }

    func close(_ stream: LiveStream) {
        let user = stream.session.userID
        state.withLock { s in
            guard let id = s.ids.removeValue(forKey: ObjectIdentifier(stream)) else { return }
            s.byUser[user]?[id] = nil
            if s.byUser[user]?.isEmpty == true { s.byUser[user] = nil }
        }
        gauge.set(Double(openStreams))
    }

    /// To the user's streams here.
    func deliver(_ signal: Signal, user: UUID) {
        guard let mine = state.withLock({ $0.byUser[user].map { Array($0.values) } }) else { return }
        for stream in mine { stream.receive(signal) }
    }

    private func everyone(_ signal: Signal) {
        let all = state.withLock { s in s.byUser.values.flatMap(\.values) }
        for stream in all { stream.receive(signal) }
    }

    /// `<user> <seq> <tag> <type> [<body>]`: seq 0 is an event that is not kept.
    func handle(payload: String) {
        let parts = payload.split(separator: " ", maxSplits: 4, omittingEmptySubsequences: false)
        guard parts.count >= 4, let user = UUID(uuidString: String(parts[0])), let seq = Int64(parts[1]) else {
            logger.warning("unreadable live notification")
            return
        }
        let body = parts.count == 5 ? String(parts[4]) : nil
        if seq == 0 {
            guard let body, let type = LiveEventType(rawValue: String(parts[3])) else { return }
            deliver(.terminal(type: type, body: body), user: user)
        } else {
            deliver(.event(LiveStore.Stored(seq: seq, tag: String(parts[2]), type: String(parts[3]), body: body)), user: user)
        }
    }

    /// Every stream here hears `stream.closing` and ends; no new one opens. The server's own
    /// shutdown waits for its connections to close, so each stream's connection calls this when
    /// it is asked to quiesce (the hub's turn in the service group would come after the server's).
    func closeAll() {
        state.withLock { $0.closing = true }
        everyone(.closing)
    }

    func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: heartbeat)
                    everyone(.heartbeat)
                }
            }
            group.addTask { [self] in await listenUntilCancelled() }
            // On SIGTERM every stream hears `stream.closing` first (WebSocket 1012): the client
            // comes back to another replica with its cursor and loses nothing.
            try? await gracefulShutdown()
            closeAll()
            group.cancelAll()
        }
    }

    private func listenUntilCancelled() async {
        var failures = 0
        while !Task.isCancelled {
            do {
                let conn = try await db.connectDedicated()
                do {
                    try await conn.listen(on: Self.channelName) { notifications in
                        failures = 0
                        // Anything committed while no one listened is read from the table.
                        self.everyone(.catchUp)
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            group.addTask {
                                for try await n in notifications { self.handle(payload: n.payload) }
                                throw ListenEnded()
                            }
                            // A silently dead connection is noticed within a few seconds.
                            group.addTask {
                                while true {
                                    try await Task.sleep(for: .seconds(5))
                                    try await LiveStore.ping(conn, logger: self.logger)
                                }
                            }
                            try await group.next()
                            group.cancelAll()
                        }
                    }
                } catch {
                    try? await conn.close()
                    throw error
                }
                try? await conn.close()
            } catch {
                if Task.isCancelled { return }
                failures += 1
                logger.warning("live events lost their listening connection", metadata: ["error": "\(String(reflecting: error))"])
            }
            try? await Task.sleep(for: .milliseconds(min(2000, 100 << min(failures, 5))))
        }
    }

    static let channelName = LiveStore.channel
    struct ListenEnded: Error {}

    // MARK: metrics

    private var gauge: Gauge {
        registry.makeGauge(
            descriptor: MetricNameDescriptor(metricName: "live_streams", unitName: "open", helpText: "Live streams open on this replica")
        )
    }

    /// Counted by what happened: sent (events written to a stream), replayed (read from the
    /// table on resume or catch-up), reset (a cursor refused), snapshot.
    func count(_ what: String, _ n: Int = 1) {
        guard n > 0 else { return }
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                metricName: "live_events",
                unitName: "total",
                helpText: "Live events by what happened: sent, replayed, reset, snapshot"
            ),
            labels: [("outcome", what)]
        ).increment(by: Int64(n))
    }
}

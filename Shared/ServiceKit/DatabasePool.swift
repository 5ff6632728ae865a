import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import ServiceContextModule
import ServiceLifecycle
import Synchronization
import Tracing

/// The database is unreachable right now (down, restarting, refusing connections): the request
/// may be retried, so it is answered 503.
public struct DatabaseUnavailableError: Error, CustomStringConvertible {
    public var reason: String
    public var description: String { "database unavailable: \(reason)" }
}

/// The Postgres connection pool of one service: at most `size` connections, opened at start and
/// again on demand, handed out first-come first-served, never closed for being idle.
///
/// Why not postgres-nio's `PostgresClient` pool (1.33.2): with a minimum above zero it stops the
/// process on a precondition after the database restarts (connections that failed while the
/// database was away are dropped without being replaced, then the next lease finds fewer than the
/// minimum), and with a minimum of zero every release schedules an idle timer whose tasks pile up
/// under load (measured: ~1 KB per request, 2.5x less throughput) and a queued request can be
/// stranded when the last connection dies (vapor/postgres-nio#657). This pool has no timers: a
/// closed connection is dropped when it is seen, a replacement is opened while someone waits, and
/// while the database refuses connections requests fail at once (503) instead of queueing.
public final class DatabasePool: Sendable, Service {
    private struct Waiter {
        let id: Int
        let since: ContinuousClock.Instant
        let continuation: CheckedContinuation<PostgresConnection, any Error>
        /// Fails the wait at `acquireTimeout`; cancelled by whoever hands the waiter a connection.
        let deadline: Scheduled<Void>

        /// Whoever removed the waiter from the state (under the lock) is the one to resume it.
        func resume(with result: Result<PostgresConnection, any Error>) {
            deadline.cancel()
            continuation.resume(with: result)
        }
    }

    private struct State {
        var idle: [PostgresConnection] = []
        /// Established connections, idle or leased.
        var open = 0
        var connecting = 0
        var waiters: [Waiter] = []
        var nextID = 0
        /// After a failed connection attempt, no new attempt before this instant.
        var retryAfter: ContinuousClock.Instant?
        var failures = 0
        /// For the logs of the requests answered 503 while the pool waits to try again.
        var lastError = ""
        var closed = false
        /// Leases that waited their whole `acquireTimeout` and were answered 503 (a counter).
        var acquireTimeouts = 0
    }

    private let configuration: PostgresConnection.Configuration
    private let directConfiguration: PostgresConnection.Configuration
    private let size: Int
    /// The longest a request waits for a free connection before it is answered 503: a pool
    /// that cannot serve (every connection held by slow work) is reported, never waited on forever.
    let acquireTimeout: Duration
    private let logger: Logger
    private let state = Mutex(State())
    private let connectRequests: AsyncStream<Void>
    private let requestConnect: AsyncStream<Void>.Continuation
    private static let quiet = Logger(label: "postgres-query", factory: { _ in SwiftLogNoOpLogHandler() })

    public init(
        configuration: PostgresConnection.Configuration,
        direct: PostgresConnection.Configuration? = nil,
        size: Int,
        acquireTimeout: Duration = .seconds(10),
        logger: Logger
    ) {
        self.configuration = configuration
        self.directConfiguration = direct ?? configuration
        self.size = max(1, size)
        self.acquireTimeout = acquireTimeout
        self.logger = logger
        (connectRequests, requestConnect) = AsyncStream.makeStream(of: Void.self)
    }

    /// The pool of one service: its own login role, its own schema first on the search path.
    public convenience init(config: DatabaseConfig, logger: Logger) {
        func configuration(host: String, port: Int) -> PostgresConnection.Configuration {
            var pg = PostgresConnection.Configuration(
                host: host,
                port: port,
                username: config.username,
                password: config.password,
                database: config.database,
                tls: .disable
            )
            pg.options.connectTimeout = .seconds(3)
            // Through PgBouncer these are dropped (`ignore_startup_parameters`) and the role's
            // own settings apply: bootstrap.sql sets the same values on each role.
            pg.options.additionalStartupParameters = [
                ("search_path", "\(config.schema),public"),
                ("application_name", config.username),
                ("statement_timeout", String(config.statementTimeoutMilliseconds)),
                ("idle_in_transaction_session_timeout", String(config.idleInTransactionTimeoutMilliseconds)),
            ]
            return pg
        }
        self.init(
            configuration: configuration(host: config.host, port: config.port),
            direct: configuration(host: config.directHost ?? config.host, port: config.directPort ?? config.port),
            size: config.maxConnections,
            acquireTimeout: .milliseconds(config.acquireTimeoutMilliseconds),
            logger: logger
        )
    }

    /// What the pool holds right now (for metrics and for a report when something waits too long).
    public struct Statistics: Sendable, CustomStringConvertible {
        public var size: Int, open: Int, idle: Int, connecting: Int, waiting: Int, closed: Bool, acquireTimeouts = 0
        public var description: String {
            "size \(size), open \(open), idle \(idle), connecting \(connecting), waiting \(waiting)\(closed ? ", closed" : "")"
        }
    }

    public var statistics: Statistics { state.withLock { Self.statistics(of: $0, size: size) } }

    private static func statistics(of s: State, size: Int) -> Statistics {
        Statistics(
            size: size,
            open: s.open,
            idle: s.idle.count,
            connecting: s.connecting,
            waiting: s.waiters.count,
            closed: s.closed,
            acquireTimeouts: s.acquireTimeouts
        )
    }

    // MARK: Running

    /// Opens the connections and keeps opening the ones asked for until shutdown, then closes
    /// them (leased ones when they come back).
    public func run() async {
        let missing = state.withLock { s in
            let n = max(0, size - s.open - s.connecting)
            s.connecting += n
            return n
        }
        for _ in 0..<missing { requestConnect.yield() }
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await _ in connectRequests {
                    group.addTask { await self.connectOne() }
                }
            }
        } onGracefulShutdown: {
            self.requestConnect.finish()
        }
        let (idle, waiters) = state.withLock { s in
            s.closed = true
            defer {
                s.idle = []
                s.waiters = []
            }
            return (s.idle, s.waiters)
        }
        for w in waiters { w.resume(with: .failure(DatabaseUnavailableError(reason: "the pool is shut down"))) }
        for c in idle { try? await c.close() }
    }

    /// One connection attempt, tried again while requests wait for it. When it fails, requests
    /// waiting are answered at once (503) if the pool holds no connection at all; otherwise they
    /// may still get one that comes back, but wait at most `maximumWait`.
    private func connectOne() async {
        while !Task.isCancelled {
            let id = state.withLock { s in
                s.nextID += 1
                return s.nextID
            }
            do {
                let connection = try await connect(id: id)
                let (waiter, close) = state.withLock { s -> (Waiter?, Bool) in
                    s.connecting -= 1
                    s.failures = 0
                    s.retryAfter = nil
                    if s.closed { return (nil, true) }
                    s.open += 1
                    if s.waiters.isEmpty {
                        s.idle.append(connection)
                        return (nil, false)
                    }
                    return (s.waiters.removeFirst(), false)
                }
                if close { try? await connection.close() }
                waiter?.resume(with: .success(connection))
                return
            } catch {
                let now = ContinuousClock.now
                let (failed, retryAt) = state.withLock { s -> ([Waiter], ContinuousClock.Instant?) in
                    s.failures += 1
                    // 50 ms, 100 ms, ... at most 1 s between attempts while the database is away.
                    let retryAt = now + .milliseconds(min(1000, 50 << min(s.failures - 1, 5)))
                    s.retryAfter = retryAt
                    s.lastError = String(reflecting: error)
                    var failed: [Waiter] = []
                    if s.open == 0 {
                        failed = s.waiters
                        s.waiters = []
                    } else {
                        failed = s.waiters.filter { $0.since + Self.maximumWait <= now }
                        s.waiters.removeAll { $0.since + Self.maximumWait <= now }
                    }
                    guard !s.closed, !s.waiters.isEmpty else {
                        s.connecting -= 1
                        return (failed, nil)
                    }
                    return (failed, retryAt)
                }
                if !(error is CancellationError), !Task.isCancelled {
                    logger.warning("database connection failed", metadata: ["error": "\(String(reflecting: error))"])
                }
                let unavailable = DatabaseUnavailableError(reason: "cannot connect: \(String(reflecting: error))")
                for w in failed { w.resume(with: .failure(unavailable)) }
                guard let retryAt else { return }
                try? await Task.sleep(until: retryAt)
            }
        }
        state.withLock { $0.connecting -= 1 }
    }

    static let maximumWait = Duration.seconds(2)

    /// A connection the pool does not count or lend, to PostgreSQL itself (never through a
    /// transaction-mode pooler): for a session that must stay open for its own purpose (LISTEN,
    /// a session advisory lock), closed by its owner.
    public func connectDedicated() async throws -> PostgresConnection {
        let id = state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
        return try await connect(id: id, configuration: directConfiguration)
    }

    /// `connectTimeout` bounds the TCP connect only; the start-up exchange is bounded here too.
    /// The attempt is raced with a timer on its event loop and never awaited past the limit (or
    /// past cancellation, at shutdown): an attempt that completes later is closed, not dropped open.
    private func connect(id: Int, configuration: PostgresConnection.Configuration? = nil) async throws -> PostgresConnection {
        let configuration = configuration ?? self.configuration
        let limit = configuration.options.connectTimeout + .seconds(2)
        let eventLoop = PostgresConnection.defaultEventLoopGroup.any()
        let answer = eventLoop.makePromise(of: PostgresConnection.self)
        let decided = NIOLockedValueBox(false)
        let decide = { @Sendable (result: Result<PostgresConnection, any Error>) in
            let first = decided.withLockedValue { done in
                defer { done = true }
                return !done
            }
            if first {
                answer.completeWith(result)
            } else if case .success(let late) = result {
                late.close().whenComplete { _ in }
            }
        }
        let timer = eventLoop.scheduleTask(in: limit) {
            decide(.failure(DatabaseUnavailableError(reason: "no answer to the start-up within \(limit)")))
        }
        PostgresConnection.connect(on: eventLoop, configuration: configuration, id: id, logger: logger).whenComplete { result in
            timer.cancel()
            decide(result)
        }
        return try await withTaskCancellationHandler {
            try await answer.futureResult.get()
        } onCancel: {
            decide(.failure(CancellationError()))
        }
    }

    // MARK: Leasing

    private enum LeaseDecision {
        case connection(PostgresConnection)
        case fail(DatabaseUnavailableError)
        case wait
    }

    /// An idle connection, or nil after dropping the closed ones; fails while the database refuses.
    private func immediate(_ s: inout State) -> LeaseDecision {
        while let c = s.idle.popLast() {
            if !c.isClosed { return .connection(c) }
            s.open -= 1
        }
        if s.closed { return .fail(DatabaseUnavailableError(reason: "the pool is shut down")) }
        if s.open == 0, s.connecting == 0, let until = s.retryAfter, ContinuousClock.now < until {
            return .fail(DatabaseUnavailableError(reason: "cannot connect (waiting before the next attempt): \(s.lastError)"))
        }
        return .wait
    }

    private func lease() async throws -> PostgresConnection {
        switch state.withLock({ immediate(&$0) }) {
        case .connection(let c): return c
        case .fail(let e): throw e
        case .wait: break
        }
        let id = state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<PostgresConnection, any Error>) in
                let deadline = PostgresConnection.defaultEventLoopGroup.any().scheduleTask(in: .nanoseconds(acquireTimeout.nanoseconds)) {
                    self.expire(id)
                }
                let (decision, connect) = state.withLock { s -> (LeaseDecision, Bool) in
                    let d = immediate(&s)
                    guard case .wait = d else { return (d, false) }
                    s.waiters.append(Waiter(id: id, since: .now, continuation: continuation, deadline: deadline))
                    // One attempt per waiter not already covered, within the size.
                    let connect =
                        s.connecting < s.waiters.count && s.open + s.connecting < size
                        && (s.retryAfter.map { ContinuousClock.now >= $0 } ?? true)
                    if connect { s.connecting += 1 }
                    return (.wait, connect)
                }
                switch decision {
                case .connection(let c):
                    deadline.cancel()
                    continuation.resume(returning: c)
                case .fail(let e):
                    deadline.cancel()
                    continuation.resume(throwing: e)
                case .wait: if connect { requestConnect.yield() }
                }
            }
        } onCancel: {
            let waiter = state.withLock { s -> Waiter? in
                guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.waiters.remove(at: i)
            }
            waiter?.resume(with: .failure(CancellationError()))
        }
    }

    /// A waiter's deadline passed before any connection came free.
    private func expire(_ id: Int) {
        let (waiter, stats) = state.withLock { s -> (Waiter?, Statistics?) in
            guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return (nil, nil) }
            s.acquireTimeouts += 1
            let stats = Self.statistics(of: s, size: size)  // counted with this waiter still waiting
            return (s.waiters.remove(at: i), stats)
        }
        guard let waiter, let stats else { return }
        logger.warning("no database connection came free in time", metadata: ["pool": "\(stats)"])
        waiter.resume(with: .failure(DatabaseUnavailableError(reason: "no connection came free within \(acquireTimeout) (\(stats))")))
    }

    private func release(_ connection: PostgresConnection) {
        enum Next {
            case give(Waiter)
            case close, replace, none
        }
        let next = state.withLock { s -> Next in
            if connection.isClosed || s.closed {
                s.open -= 1
                guard !s.closed else { return .close }
                guard s.waiters.count > s.connecting else { return .none }
                s.connecting += 1
                return .replace
            }
            if s.waiters.isEmpty {
                s.idle.append(connection)
                return .none
            }
            return .give(s.waiters.removeFirst())
        }
        switch next {
        case .give(let w): w.resume(with: .success(connection))
        case .close: connection.close().whenComplete { _ in }
        case .replace: requestConnect.yield()
        case .none: break
        }
    }

    // MARK: The PostgresClient-shaped API the services use

    public func withConnection<R>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> sending R
    ) async throws -> sending R {
        let connection = try await lease()
        defer { release(connection) }
        return try await body(connection)
    }

    /// BEGIN, the body, COMMIT; ROLLBACK when the body throws, and the body's error is rethrown
    /// as it was. Each of the three goes through `run` (postgres-nio's `withTransaction` writes
    /// its ROLLBACK from the caller's thread, and after a server-side disconnect that ROLLBACK
    /// was never answered).
    public func withTransaction<R>(
        logger: Logger,
        file: String = #fileID,
        line: Int = #line,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> sending R
    ) async throws -> sending R {
        // #49: inside a trace, the transaction is a span from BEGIN to COMMIT; its statements
        // are spans beside it, under the same parent (a task-local of the transaction's own
        // would have to carry the body's `sending` result through TaskLocal.withValue, which
        // does not return one).
        guard let span = Telemetry.statementSpan(nil, file: file, line: line) else {
            return try await transaction(logger: logger, file: file, line: line, body)
        }
        defer { span.end() }
        do {
            return try await transaction(logger: logger, file: file, line: line, body)
        } catch {
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }

    private func transaction<R>(
        logger: Logger,
        file: String,
        line: Int,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> sending R
    ) async throws -> sending R {
        try await withConnection(isolation: isolation) { connection in
            try await connection.run("BEGIN", logger: logger, file: file, line: line)
            let value: R
            do {
                value = try await body(connection)
            } catch {
                _ = try? await connection.run("ROLLBACK", logger: logger, file: file, line: line)
                throw error
            }
            try await connection.run("COMMIT", logger: logger, file: file, line: line)
            return value
        }
    }

    /// Runs one statement and returns its rows, read in full before the connection goes back.
    @discardableResult
    public func query(
        _ query: PostgresQuery,
        logger: Logger? = nil,
        file: String = #fileID,
        line: Int = #line
    ) async throws -> PostgresRows {
        try await withConnection { connection in
            try await connection.run(query, logger: logger ?? Self.quiet, file: file, line: line)
        }
    }
}

extension PostgresRows {
    /// How many rows came back: what a `... RETURNING 1` statement touched.
    public func count() async throws -> Int {
        var n = 0
        for try await _ in self { n += 1 }
        return n
    }
}

/// Runs a task's jobs on one NIO event loop, so that code awaiting a connection's work executes
/// on that connection's loop (see `PostgresConnection.run`).
public final class EventLoopTaskExecutor: TaskExecutor {
    public let eventLoop: any EventLoop
    public init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

extension PostgresConnection {
    /// Runs one statement and reads its rows. The check that the connection is open and the
    /// write of the statement happen in one turn of the connection's event loop. postgres-nio's
    /// async `query` writes from the caller's thread: when the server ends the connection between
    /// the caller's check and that write (a restart, a terminated backend, an idle-in-transaction
    /// timeout), the write lands on a pipeline already torn down and the statement's promise is
    /// never completed, so the caller waited forever (seen under `pg_terminate_backend` in
    /// `DatabasePoolTests`: 1 lease in ~20,000 never came back). Here it fails as unavailable.
    @discardableResult
    public func run(_ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line) async throws -> PostgresRows {
        // #49: a statement inside a trace is a span named by its operation and table; its text
        // and bind values are never recorded.
        guard let span = Telemetry.statementSpan(query.sql, file: file, line: line) else {
            return try await runUntraced(query, logger: logger, file: file, line: line)
        }
        defer { span.end() }
        do {
            return try await runUntraced(query, logger: logger, file: file, line: line)
        } catch {
            span.attributes["db.response.status_code"] = DatabaseErrors.sqlState(error)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }

    private func runUntraced(_ query: PostgresQuery, logger: Logger, file: String, line: Int) async throws -> PostgresRows {
        let result = eventLoop.flatSubmit { () -> EventLoopFuture<PostgresQueryResult> in
            guard !self.isClosed else {
                return self.eventLoop.makeFailedFuture(DatabaseUnavailableError(reason: "the connection was closed"))
            }
            return self.query(query, logger: logger, file: file, line: line)
        }
        return PostgresRows(rows: try await result.get().rows)
    }
}

/// The rows of one statement, already read: an `AsyncSequence` of `PostgresRow`, so
/// `decode(...)` works as on a `PostgresRowSequence`.
public struct PostgresRows: AsyncSequence, Sendable {
    public typealias Element = PostgresRow
    public let rows: [PostgresRow]

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: IndexingIterator<[PostgresRow]>
        public mutating func next() async -> PostgresRow? { base.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: rows.makeIterator()) }
    public func collect() -> [PostgresRow] { rows }
}

import Foundation
import Logging
import PostgresNIO
import ServiceContextModule
import ServiceLifecycle
import Synchronization
import Tracing

/// A job as a handler sees it.
public struct Job: Sendable {
    public var id: Int64
    public var queue: String
    public var kind: String
    public var payload: Data
    /// 1 on the first run.
    public var attempt: Int
    public var maxAttempts: Int
    /// The request that queued the job (its log lines and outbound calls carry it).
    public var requestID: String? = nil
    /// #49: the span of the transaction that queued it; the run links to it.
    public var traceparent: String? = nil

    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try JSON.decoder.decode(T.self, from: payload)
    }
}

/// Exponential backoff with ±20 % jitter, capped.
public struct Backoff: Sendable {
    public var base: Duration
    public var cap: Duration
    public init(base: Duration = .seconds(1), cap: Duration = .seconds(3600)) {
        self.base = base
        self.cap = cap
    }

    public func delay(afterAttempt attempt: Int) -> Duration {
        let exp = base * Int(pow(2.0, Double(min(attempt - 1, 30))))
        let capped = min(exp, cap)
        return capped * Double.random(in: 0.8...1.2)
    }
}

/// The Postgres-backed queue: enqueue in the caller's transaction, claim with
/// `FOR UPDATE SKIP LOCKED` so two workers (or two replicas) never take the same job.
public struct JobQueue: Sendable {
    public let client: DatabasePool
    public let queue: String
    public let logger: Logger
    /// Due times are compared with this clock, so tests can move time instead of waiting.
    public let clock: any WallClock

    public init(client: DatabasePool, queue: String, logger: Logger, clock: any WallClock = SystemClock()) {
        self.client = client
        self.queue = queue
        self.logger = logger
        self.clock = clock
    }

    /// Enqueues a job on `connection` (inside the caller's transaction). A `uniqueKey` makes
    /// a second enqueue of the same job a no-op. Returns the job id, or nil if it already existed.
    @discardableResult
    /// `runAfter`: seconds from the database's clock now (a retry counted from the moment of the
    /// failure, whatever clock the caller holds).
    public static func enqueue<P: Encodable>(
        on connection: PostgresConnection,
        queue: String,
        kind: String,
        payload: P,
        runAt: Date? = nil,
        runAfter: Double? = nil,
        maxAttempts: Int = 5,
        uniqueKey: String? = nil,
        logger: Logger
    ) async throws -> Int64? {
        let json = String(decoding: try JSON.encoder.encode(payload), as: UTF8.self)
        let rows = try await connection.run(
            """
            INSERT INTO jobs (queue, kind, payload, run_at, max_attempts, unique_key, request_id, traceparent)
            VALUES (\(queue), \(kind), \(json)::jsonb,
                    COALESCE(\(runAt), clock_timestamp() + make_interval(secs => COALESCE(\(runAfter), 0))), \(maxAttempts), \(uniqueKey),
                    \(RequestTrace.requestID), \(Telemetry.currentTraceparent()))
            ON CONFLICT (unique_key) DO NOTHING
            RETURNING id
            """,
            logger: logger
        )
        for try await id in rows.decode(Int64.self) { return id }
        return nil
    }

    @discardableResult
    public func enqueue<P: Encodable & Sendable>(
        kind: String,
        payload: P,
        runAt: Date? = nil,
        maxAttempts: Int = 5,
        uniqueKey: String? = nil
    ) async throws -> Int64? {
        try await client.withConnection { conn in
            try await Self.enqueue(
                on: conn,
                queue: queue,
                kind: kind,
                payload: payload,
                runAt: runAt,
                maxAttempts: maxAttempts,
                uniqueKey: uniqueKey,
                logger: logger
            )
        }
    }

    /// Claims up to `limit` due jobs. A job whose worker died (lease expired) is due again.
    /// Due means by the later of the injected clock and the database's: `enqueue` without a
    /// `runAt` stamps the database's now, and a test clock that lags must not hold that back.
    public func claim(limit: Int, lease: Duration) async throws -> [Job] {
        let now = clock.now()
        let leaseUntil = now.addingTimeInterval(Double(lease.components.seconds))
        let rows = try await client.query(Self.claimQuery(queue: queue, now: now, leaseUntil: leaseUntil, limit: limit), logger: logger)
        var jobs: [Job] = []
        for try await (id, kind, payload, attempts, max, requestID, traceparent) in rows.decode(
            (Int64, String, String, Int, Int, String?, String?).self
        ) {
            jobs.append(
                Job(
                    id: id,
                    queue: queue,
                    kind: kind,
                    payload: Data(payload.utf8),
                    attempt: attempts,
                    maxAttempts: max,
                    requestID: requestID,
                    traceparent: traceparent
                )
            )
        }
        return jobs
    }

    /// The claim (a periodic query: see `PeriodicQuery`).
    static func claimQuery(queue: String, now: Date, leaseUntil: Date, limit: Int) -> PostgresQuery {
        """
        UPDATE jobs SET status = 'running', attempts = attempts + 1,
               locked_until = \(leaseUntil), updated_at = now()
        WHERE id IN (
            SELECT id FROM jobs
            WHERE queue = \(queue)
              AND ((status = 'pending' AND run_at <= GREATEST(\(now), now())) OR (status = 'running' AND locked_until < \(now)))
            ORDER BY run_at
            LIMIT \(limit)
            FOR UPDATE SKIP LOCKED)
        RETURNING id, kind, payload::text, attempts, max_attempts, request_id, traceparent
        """
    }

    /// Extends the lease of a job this worker still holds (the heartbeat). False when the lease
    /// was lost: it ran out and another worker claimed the job again (its attempt moved on), or
    /// the job ended; the work must then stop before it writes.
    public func renew(_ job: Job, lease: Duration) async throws -> Bool {
        let leaseUntil = clock.now().addingTimeInterval(Double(lease.components.seconds))
        let rows = try await client.query(
            """
            UPDATE jobs SET locked_until = \(leaseUntil), updated_at = now()
            WHERE id = \(job.id) AND status = 'running' AND attempts = \(job.attempt)
            RETURNING id
            """,
            logger: logger
        )
        for try await _ in rows.decode(Int64.self) { return true }
        return false
    }

    /// Marks the job done, if this attempt still holds it (a worker whose lease was lost and
    /// given to another must not end the other's run).
    public func complete(_ job: Job) async throws {
        try await client.query(
            """
            UPDATE jobs SET status = 'done', finished_at = now(), updated_at = now(), locked_until = NULL
            WHERE id = \(job.id) AND status = 'running' AND attempts = \(job.attempt)
            """,
            logger: logger
        )
    }

    /// Schedules a retry after `backoff`, or marks the job dead after its last attempt.
    public func fail(_ job: Job, error: String, backoff: Backoff) async throws {
        if job.attempt >= job.maxAttempts {
            try await client.query(
                """
                UPDATE jobs SET status = 'dead', last_error = \(error), finished_at = now(), updated_at = now(), locked_until = NULL
                WHERE id = \(job.id) AND status = 'running' AND attempts = \(job.attempt)
                """,
                logger: logger
            )
        } else {
            let runAt = clock.now().addingTimeInterval(Double(backoff.delay(afterAttempt: job.attempt).milliseconds) / 1000)
            try await client.query(
                """
                UPDATE jobs SET status = 'pending', last_error = \(error), locked_until = NULL, updated_at = now(),
                       run_at = \(runAt)
                WHERE id = \(job.id) AND status = 'running' AND attempts = \(job.attempt)
                """,
                logger: logger
            )
        }
    }
}

public enum JobError: Error { case noHandler(kind: String) }

/// A handler's error, as text (the handler ran in a child task).
struct JobFailure: Error, CustomStringConvertible { let description: String }

public typealias JobHandler = @Sendable (Job) async throws -> Void

/// Runs the jobs of one queue as a service of the ServiceGroup, until graceful shutdown.
public struct JobWorker: Service {
    public let queue: JobQueue
    public let handlers: [String: JobHandler]
    public let concurrency: Int
    public let pollInterval: Duration
    public let lease: Duration
    public let backoff: Backoff

    public static let defaultConcurrency = 4
    /// Short, and renewed by a heartbeat every third of it while the job runs (#34): the job of a
    /// process that died is claimed again within about this long, a live one keeps its job.
    public static let defaultLease: Duration = .seconds(15)

    public init(
        queue: JobQueue,
        handlers: [String: JobHandler],
        concurrency: Int = Self.defaultConcurrency,
        pollInterval: Duration = .milliseconds(250),
        lease: Duration = Self.defaultLease,
        backoff: Backoff = Backoff()
    ) {
        self.queue = queue
        self.handlers = handlers
        self.concurrency = concurrency
        self.pollInterval = pollInterval
        self.lease = lease
        self.backoff = backoff
    }

    /// `concurrency` slots, each free as soon as its job ends: a slow job (an upstream that
    /// hangs) holds one slot, never the start of the others. Claims only as many jobs as there
    /// are free slots; in-flight jobs finish on graceful shutdown.
    public func run() async throws {
        final class Slots: Sendable { let busy = Mutex(0) }
        let slots = Slots()
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                while !Task.isCancelled {
                    let free = concurrency - slots.busy.withLock { $0 }
                    var claimed = 0
                    if free > 0 {
                        do {
                            let jobs = try await queue.claim(limit: free, lease: lease)
                            claimed = jobs.count
                            for job in jobs {
                                slots.busy.withLock { $0 += 1 }
                                group.addTask {
                                    await process(job)
                                    slots.busy.withLock { $0 -= 1 }
                                }
                            }
                        } catch {
                            queue.logger.warning("job claim failed", metadata: ["queue": "\(queue.queue)", "error": "\(String(reflecting: error))"])
                        }
                    }
                    if free == 0 {
                        // Every slot busy: look again shortly (an in-memory check, no query).
                        try? await Task.sleep(for: .milliseconds(20))
                    } else if claimed < free {
                        try? await Task.sleep(for: pollInterval)
                    }
                }
            }
        }
    }

    /// Claims one batch and runs it to the end; returns how many jobs it ran (tests and tools
    /// drive the queue with it; `run` does not wait for a batch).
    @discardableResult
    public func runOnce() async throws -> Int {
        let jobs = try await queue.claim(limit: concurrency, lease: lease)
        await withTaskGroup(of: Void.self) { group in
            for job in jobs {
                group.addTask { await process(job) }
            }
        }
        return jobs.count
    }

    /// #49: a run is a span linked to the transaction that queued the job (a new trace: it may
    /// run minutes later, on another replica), kept when that transaction's trace was kept (the
    /// decision stored in the job's `traceparent`); otherwise no span, and what it calls learns
    /// that the trace is not kept.
    private func process(_ job: Job) async {
        await RequestTrace.$requestID.withValue(job.requestID) {
            guard let origin = Telemetry.stored(traceparent: job.traceparent) else { return await run(job) }
            guard origin.kept else { return await ServiceContext.$current.withValue(origin.context) { await run(job) } }
            let span = Telemetry.startSpan("job \(job.kind)", context: .topLevel, ofKind: .consumer)
            span.addLink(SpanLink(context: origin.context, attributes: [:]))
            span.attributes["job.queue"] = job.queue
            span.attributes["job.id"] = "\(job.id)"
            span.attributes["job.attempt"] = job.attempt
            defer { span.end() }
            await ServiceContext.$current.withValue(Telemetry.context(of: span)) { await run(job) }
        }
    }

    private enum Ending: Sendable {
        case finished
        case failed(String)
        case leaseLost
    }

    /// The handler runs beside its heartbeat. When the heartbeat finds the lease lost, the
    /// handler is cancelled and nothing more is recorded for this attempt: the job belongs to
    /// the worker that claimed it again.
    private func runHoldingLease(_ job: Job, _ handler: @escaping JobHandler) async -> Ending {
        await withTaskGroup(of: Ending?.self) { group in
            group.addTask {
                do {
                    try await handler(job)
                    return .finished
                } catch  where ErasureFence.isRefusal(error) {
                    // The job's user was erased meanwhile: nothing is left to do for them.
                    queue.logger.notice("job ended: its user is erased", metadata: ["job": "\(job.id)", "kind": "\(job.kind)"])
                    return .finished
                } catch { return .failed(String(describing: error)) }
            }
            group.addTask {
                let beat = lease / 3
                while !Task.isCancelled {
                    try? await Task.sleep(for: beat)
                    if Task.isCancelled { return nil }
                    do {
                        if try await !queue.renew(job, lease: lease) { return .leaseLost }
                    } catch {
                        // The database is away: keep working; the next beat or the end records it.
                        queue.logger.warning("job heartbeat failed", metadata: ["job": "\(job.id)", "error": "\(error)"])
                    }
                }
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .leaseLost
        }
    }

    private func run(_ job: Job) async {
        do {
            guard let handler = handlers[job.kind] else {
                throw JobError.noHandler(kind: job.kind)
            }
            switch await runHoldingLease(job, handler) {
            case .finished: break
            case .failed(let error): throw JobFailure(description: error)
            case .leaseLost:
                queue.logger.warning(
                    "job lease lost: another worker runs it now",
                    metadata: ["job": "\(job.id)", "kind": "\(job.kind)", "attempt": "\(job.attempt)"]
                )
                return
            }
            try await queue.complete(job)
            queue.logger.debug("job done", metadata: ["job": "\(job.id)", "kind": "\(job.kind)", "attempt": "\(job.attempt)"])
        } catch {
            queue.logger.warning(
                "job failed",
                metadata: ["job": "\(job.id)", "kind": "\(job.kind)", "attempt": "\(job.attempt)", "error": "\(error)"]
            )
            do { try await queue.fail(job, error: String(describing: error), backoff: backoff) } catch {
                queue.logger.error("could not record job failure", metadata: ["job": "\(job.id)", "error": "\(error)"])
            }
        }
    }
}

import Foundation
import Logging
import PostgresNIO
import Prometheus
import Synchronization

/// What fails in production, read when Prometheus scrapes `/metrics`: the database pool (from
/// memory) and the backlogs of the outbox and the job queue (one grouped query each, on their
/// partial indexes, so the cost follows the backlog, not the tables' history). Outbound calls
/// are counted as they happen (`UpstreamMetrics`).
public final class OperationalMetrics: Sendable {
    private let registry: PrometheusCollectorRegistry
    private let db: DatabasePool
    private let store: BacklogStore
    /// Label sets set at an earlier scrape: one no longer in the backlog is set to 0, not left
    /// showing its last value.
    private let seen = Mutex<Set<[String]>>([])
    private let acquireTimeouts: MirroredCounter
    private let executorJobs: MirroredCounter

    static var pool: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "db_pool",
            unitName: "connections",
            helpText: "Connections of this replica's PostgreSQL pool, by state (size is the configured maximum)"
        )
    }
    static var waiters: MetricNameDescriptor {
        MetricNameDescriptor(metricName: "db_pool_waiters", helpText: "Requests waiting for a pooled connection now")
    }
    static var timeouts: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "db_pool_acquire_timeouts",
            unitName: "total",
            helpText: "Requests answered 503 because no pooled connection came free within DATABASE_ACQUIRE_TIMEOUT_MS"
        )
    }
    static var outbox: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "outbox",
            unitName: "messages",
            helpText: "Messages to other services not delivered yet (pending) or given up on (dead), by destination"
        )
    }
    static var outboxAge: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "outbox_oldest",
            unitName: "age_seconds",
            helpText: "Age of the oldest message still pending, or dead, by destination and status"
        )
    }
    static var executorJobs: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "executor_jobs",
            unitName: "total",
            helpText: "Swift concurrency jobs enqueued on the event loops: each resumption of a suspended task (a request costs one or two)"
        )
    }
    static var jobs: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "jobs",
            helpText: "Background jobs by kind and state: due (waiting for a worker), scheduled (later), running, dead (failed for good)"
        )
    }

    public init(registry: PrometheusCollectorRegistry, db: DatabasePool, logger: Logger) {
        self.registry = registry
        self.db = db
        self.store = BacklogStore(logger: logger)
        acquireTimeouts = MirroredCounter(registry.makeCounter(descriptor: Self.timeouts))
        executorJobs = MirroredCounter(registry.makeCounter(descriptor: Self.executorJobs))
    }

    /// Sets the gauges; a database that cannot be read leaves the backlog gauges as they were
    /// (the pool gauges then say why).
    public func refresh() async {
        let stats = db.statistics
        for (state, value) in [
            ("size", stats.size), ("open", stats.open), ("idle", stats.idle),
            ("in_use", stats.open - stats.idle), ("connecting", stats.connecting),
        ] {
            registry.makeGauge(descriptor: Self.pool, labels: [("state", state)]).set(Double(value))
        }
        registry.makeGauge(descriptor: Self.waiters).set(Double(stats.waiting))
        acquireTimeouts.advance(to: stats.acquireTimeouts)
        executorJobs.advance(to: EventLoopGlobalExecutor.enqueuedJobs)

        guard let backlog = try? await store.read(db: db) else { return }
        var now: [[String]: Double] = [:]
        for row in backlog.outbox {
            now[["outbox", row.destination, row.status]] = Double(row.count)
            now[["outbox_age", row.destination, row.status]] = row.oldestAgeSeconds
        }
        for row in backlog.jobs { now[["jobs", row.kind, row.state], default: 0] += Double(row.count) }
        let stale = seen.withLock { seen in
            defer { seen.formUnion(now.keys) }
            return seen.subtracting(now.keys)
        }
        for key in stale { now[key] = 0 }
        for (key, value) in now {
            switch key[0] {
            case "outbox": registry.makeGauge(descriptor: Self.outbox, labels: [("destination", key[1]), ("status", key[2])]).set(value)
            case "outbox_age": registry.makeGauge(descriptor: Self.outboxAge, labels: [("destination", key[1]), ("status", key[2])]).set(value)
            default: registry.makeGauge(descriptor: Self.jobs, labels: [("kind", key[1]), ("state", key[2])]).set(value)
            }
        }
    }
}

/// A Prometheus counter that follows a running total kept elsewhere (the pool's, the
/// executor's): each scrape adds what the total grew by since the last one.
final class MirroredCounter: Sendable {
    let counter: Counter
    let counted = Mutex(0)
    init(_ counter: Counter) { self.counter = counter }

    func advance(to total: Int) {
        let grown = counted.withLock { counted in
            defer { counted = max(counted, total) }
            return total - counted
        }
        if grown > 0 { counter.increment(by: Int64(grown)) }
    }
}

/// The platform tables' backlogs (every service has an outbox and a job queue).
struct BacklogStore: Sendable {
    let logger: Logger

    struct OutboxRow { var destination: String, status: String, count: Int, oldestAgeSeconds: Double }
    struct JobRow { var kind: String, state: String, count: Int }

    func read(db: DatabasePool) async throws -> (outbox: [OutboxRow], jobs: [JobRow]) {
        var outbox: [OutboxRow] = []
        var jobs: [JobRow] = []
        for try await (destination, status, count, age) in try await db.query(
            """
            SELECT target_service, status, count(*)::int, COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)::float8
            FROM outbox WHERE status IN ('pending', 'dead') GROUP BY 1, 2
            """,
            logger: logger
        ).decode((String, String, Int, Double).self) {
            outbox.append(OutboxRow(destination: destination, status: status, count: count, oldestAgeSeconds: age))
        }
        for try await (kind, state, count) in try await db.query(
            """
            SELECT kind, CASE WHEN status = 'pending' AND run_at > now() THEN 'scheduled' WHEN status = 'pending' THEN 'due' ELSE status END,
                   count(*)::int
            FROM jobs WHERE status IN ('pending', 'running', 'dead') GROUP BY 1, 2
            """,
            logger: logger
        ).decode((String, String, Int).self) {
            jobs.append(JobRow(kind: kind, state: state, count: count))
        }
        return (outbox, jobs)
    }
}

/// Calls to stores, providers and the other services, by peer (`host:port` of the URL: a
/// bounded set, the configured upstreams) and outcome (`2xx`…`5xx`, or `error` when no answer
/// came: refused, timed out).
public struct UpstreamMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    static var calls: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "upstream_requests",
            unitName: "total",
            helpText: "Outbound HTTP calls (stores, providers, other services) by peer and outcome"
        )
    }
    static var duration: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "upstream_request_duration",
            unitName: "seconds",
            helpText: "Time to the answer of an outbound HTTP call, by peer"
        )
    }

    public init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    static func peer(of url: String) -> String {
        guard let c = URLComponents(string: url), let host = c.host else { return "unknown" }
        return c.port.map { "\(host):\($0)" } ?? host
    }

    func record(url: String, status: Int?, elapsed: Duration) {
        let peer = Self.peer(of: url)
        let outcome = status.map { "\($0 / 100)xx" } ?? "error"
        registry.makeCounter(descriptor: Self.calls, labels: [("peer", peer), ("outcome", outcome)]).increment()
        registry.makeDurationHistogram(descriptor: Self.duration, labels: [("peer", peer)], buckets: MetricsMiddleware.buckets)
            .recordNanoseconds(elapsed.nanoseconds)
    }
}

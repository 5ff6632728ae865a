import Foundation
import Logging
import PostgresNIO

/// A statement a service runs on a schedule (a sweep, a purge, a queue's claim, a poll), built
/// by the very function the service runs it with. Each service lists its own
/// (`ServiceDefinition.periodicQueries`): a test checks that every one is served by an index,
/// and `make bench` times them on a grown database (`admin periodic-queries --analyze`), so a
/// sweep whose cost follows the table's size rather than the work due cannot go unseen.
public struct PeriodicQuery: Sendable {
    public let name: String
    public let query: PostgresQuery

    public init(_ name: String, _ query: PostgresQuery) {
        self.name = name
        self.query = query
    }

    /// What every service runs: its job queue's claim, the outbox's delivery, the session
    /// watcher's poll, and the retention purges (the platform's and `retention`).
    public static func platform(_ env: EnvironmentVariables, retention: [RetentionRule] = []) -> [PeriodicQuery] {
        let now = Date()
        return [
            // Every queue's claim has the same plan; the name is only a value.
            PeriodicQuery(
                "job claim",
                JobQueue.claimQuery(
                    queue: "jobs",
                    now: now,
                    leaseUntil: now.addingTimeInterval(Double(JobWorker.defaultLease.components.seconds)),
                    limit: JobWorker.defaultConcurrency
                )
            ),
            PeriodicQuery("outbox delivery", OutboxWorker.dueQuery(batchSize: OutboxWorker.defaultBatchSize)),
            PeriodicQuery("session watcher (states)", UserFactStore.sessionStatesQuery(since: now.addingTimeInterval(-5))),
            PeriodicQuery("session watcher (revocations)", UserFactStore.revokedSessionsQuery(since: now.addingTimeInterval(-5))),
        ] + (RetentionRule.platform(env) + retention).map { PeriodicQuery("retention \($0.name)", $0.purgeQuery) }
    }
}

/// One periodic query's plan, as `EXPLAIN` printed it.
public struct PeriodicPlan: Sendable {
    public let name: String
    public let plan: String
    /// A sequential scan reads the whole table: its cost grows with the table, not the work.
    public var readsWholeTable: Bool { plan.contains("Seq Scan") }
    public var usesIndex: Bool { plan.contains("Index") }
    /// With `analyze`: how long the statement took.
    public var executionMilliseconds: Double? {
        guard let line = plan.split(separator: "\n").last(where: { $0.contains("Execution Time:") }) else { return nil }
        return line.split(separator: " ").compactMap { Double($0) }.first
    }
}

extension DatabasePool {
    /// `EXPLAIN` of each query; with `analyze` each also runs, inside a transaction that is
    /// rolled back, so nothing changes. `forbidSequentialScans` prices them out (on a small
    /// table the planner rightly prefers one; the question is whether an index could serve).
    /// `warmUp` first EXPLAINs them all on the same connection, so that the times are a worker's
    /// in steady state (PostGIS loaded by its first call, the catalog caches filled), not a new
    /// connection's.
    public func explain(
        _ queries: [PeriodicQuery],
        analyze: Bool,
        forbidSequentialScans: Bool = false,
        warmUp: Bool = false,
        logger: Logger
    ) async throws -> [PeriodicPlan] {
        try await withConnection { conn in
            var out: [PeriodicPlan] = []
            for (q, pass) in (warmUp ? queries.map { ($0, 0) } : []) + queries.map({ ($0, 1) }) {
                try await conn.run("BEGIN", logger: logger)
                do {
                    if forbidSequentialScans { try await conn.run("SET LOCAL enable_seqscan = off", logger: logger) }
                    let explain = PostgresQuery(
                        unsafeSQL: (analyze && pass == 1 ? "EXPLAIN (ANALYZE, BUFFERS) " : "EXPLAIN ") + q.query.sql,
                        binds: q.query.binds
                    )
                    var lines: [String] = []
                    for try await line in try await conn.run(explain, logger: logger).decode(String.self) { lines.append(line) }
                    if pass == 1 { out.append(PeriodicPlan(name: q.name, plan: lines.joined(separator: "\n"))) }
                    try await conn.run("ROLLBACK", logger: logger)
                } catch {
                    _ = try? await conn.run("ROLLBACK", logger: logger)
                    throw error
                }
            }
            return out
        }
    }
}

import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// How long an append-only table keeps its rows (#19): rows matching `due` (with `$1` the
/// cutoff, `now() - keep` on the database's clock) are deleted a batch at a time. Each batch is
/// one short statement that takes the rows it can lock (`SKIP LOCKED`): a row a request is
/// writing is left for the next run, and no request waits on the purge.
public struct RetentionRule: Sendable {
    public var name: String
    public var table: String
    /// A predicate on the table, `$1` the cutoff; an index must serve it (the tests EXPLAIN it).
    public var due: String
    public var keep: Duration
    public var batch: Int
    /// A statement run before each purge, `$1` the seconds kept: a table partitioned by time
    /// makes its partitions ahead and drops those wholly past the cutoff there (#48).
    public var prepare: String?

    public init(name: String, table: String, due: String, keep: Duration, batch: Int = 1000, prepare: String? = nil) {
        self.name = name
        self.table = table
        self.due = due
        self.keep = keep
        self.batch = batch
        self.prepare = prepare
    }

    /// The rules every service's platform tables follow. Dead outbox rows and dead jobs stay
    /// until an operator has seen them (the metrics count them); pending ones are never due.
    public static func platform(_ env: EnvironmentVariables) -> [RetentionRule] {
        [
            RetentionRule(
                name: "outbox_delivered",
                table: "outbox",
                due: "status = 'delivered' AND delivered_at < $1",
                keep: .seconds(86_400 * env.int("OUTBOX_RETENTION_DAYS", default: 7))
            ),
            RetentionRule(
                name: "jobs_done",
                table: "jobs",
                due: "status = 'done' AND finished_at < $1",
                keep: .seconds(86_400 * env.int("JOB_RETENTION_DAYS", default: 7))
            ),
            // A key answers the retries of one request: the app's within minutes, the outbox's
            // within its few hours of backoff (at most 20 tries, 10 minutes apart at most).
            RetentionRule(
                name: "idempotency_keys",
                table: "idempotency_keys",
                due: "created_at < $1",
                keep: .seconds(3600 * env.int("IDEMPOTENCY_RETENTION_HOURS", default: 24))
            ),
            RetentionRule(name: "rate_limits", table: "rate_limits", due: "window_start < $1", keep: .seconds(86_400)),
            RetentionRule(name: "operator_audit", table: "operator_audit", due: "at < $1", keep: auditKeep(env)),
        ]
    }

    /// `AUDIT_LOG_RETENTION_DAYS` (400 by default: a year of history and a margin for a yearly review).
    public static func auditKeep(_ env: EnvironmentVariables) -> Duration {
        .seconds(86_400 * env.int("AUDIT_LOG_RETENTION_DAYS", default: 400))
    }

    /// The rows a purge would look at, for `EXPLAIN` (the index that serves the rule); the
    /// cutoff on the database's clock, `$1` the seconds kept. Identifiers come from the code.
    public var selection: String {
        "SELECT ctid FROM \(table) WHERE \(dueNow) LIMIT \(batch)"
    }

    var dueNow: String { due.replacingOccurrences(of: "$1", with: "(now() - make_interval(secs => $1))") }

    /// One batch: the selection, locked as it can be, deleted (a periodic query). The rule is
    /// asked again of the rows deleted: in a partitioned table a ctid names a row in each
    /// partition, and only the due one may go.
    public var purgeQuery: PostgresQuery {
        PostgresQuery(
            unsafeSQL: "DELETE FROM \(table) WHERE ctid = ANY(ARRAY(\(selection) FOR UPDATE SKIP LOCKED)) AND \(dueNow) RETURNING 1",
            binds: keptSeconds
        )
    }

    /// `prepare` with its cutoff bound.
    public var prepareQuery: PostgresQuery? {
        prepare.map { PostgresQuery(unsafeSQL: $0, binds: keptSeconds) }
    }

    var keptSeconds: PostgresBindings {
        var binds = PostgresBindings()
        binds.append(Double(keep.components.seconds))
        return binds
    }
}

/// Runs the retention rules on a schedule (every replica that runs workers; batches skip what
/// another holds, so two replicas share the work).
public struct RetentionPurger: Service {
    let db: DatabasePool
    let rules: [RetentionRule]
    let interval: Duration
    let logger: Logger
    /// At most this many batches per rule and run: a huge backlog drains over several runs
    /// instead of one long one.
    let maxBatches: Int

    public init(db: DatabasePool, rules: [RetentionRule], interval: Duration, maxBatches: Int = 100, logger: Logger) {
        self.db = db
        self.rules = rules
        self.interval = interval
        self.maxBatches = maxBatches
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do { _ = try await runOnce() } catch {
                    logger.warning("retention purge failed; it runs again later", metadata: ["error": "\(String(reflecting: type(of: error)))"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// Rows deleted, by rule.
    public func runOnce() async throws -> [String: Int] {
        var out: [String: Int] = [:]
        for rule in rules {
            // The purge does not depend on it: a prepare that fails leaves the rule's rows to
            // the purge, and the other rules run.
            if let prepare = rule.prepareQuery {
                do { _ = try await db.query(prepare, logger: logger).count() } catch {
                    logger.warning(
                        "retention prepare failed; the purge goes on",
                        metadata: ["rule": "\(rule.name)", "error": "\(String(reflecting: type(of: error)))"]
                    )
                }
            }
            var total = 0
            for _ in 0..<maxBatches {
                let n = try await db.query(rule.purgeQuery, logger: logger).count()
                total += n
                if n < rule.batch { break }
            }
            out[rule.name] = total
            if total > 0 { logger.info("retention purge", metadata: ["rule": "\(rule.name)", "rows": "\(total)"]) }
        }
        return out
    }
}

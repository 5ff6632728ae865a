import Foundation
import Logging
import PostgresNIO

public struct RateLimitDecision: Sendable, Equatable {
    public var allowed: Bool
    public var remaining: Int
    /// Seconds until a request would be allowed again (0 when allowed).
    public var retryAfter: Int
}

/// Counts requests per (scope, key) in Postgres so a limit holds across every replica.
/// `fixed` counts in aligned windows; `sliding` weights the previous window by how much of
/// it still overlaps the last `window` seconds (the usual sliding-window-counter estimate).
public struct RateLimiter: Sendable {
    public enum Mode: Sendable { case fixed, sliding }

    public let client: DatabasePool
    public let clock: any WallClock
    public let logger: Logger

    public init(client: DatabasePool, clock: any WallClock = SystemClock(), logger: Logger) {
        self.client = client
        self.clock = clock
        self.logger = logger
    }

    /// Counts one hit and says whether it is within `limit` per `window` seconds.
    public func hit(scope: String, key: String, limit: Int, window: Int, mode: Mode = .fixed) async throws -> RateLimitDecision {
        let now = clock.now()
        let t = Int(now.timeIntervalSince1970)
        let start = t - t % window
        let windowStart = Date(timeIntervalSince1970: TimeInterval(start))
        let previousStart = Date(timeIntervalSince1970: TimeInterval(start - window))
        // The count commits without waiting for its WAL flush (`synchronous_commit` off for this
        // statement's own transaction only): a counter is no acknowledged fact, a crash loses at
        // most the last ~0.6 s of counts, and the request no longer waits on a second fsync.
        let rows = try await client.query(
            """
            WITH hit AS (
                INSERT INTO rate_limits (scope, key, window_start, count)
                VALUES (\(scope), \(key), \(windowStart), 1)
                ON CONFLICT (scope, key, window_start) DO UPDATE SET count = rate_limits.count + 1
                RETURNING count
            )
            SELECT (SELECT count FROM hit),
                   COALESCE((SELECT count FROM rate_limits
                             WHERE scope = \(scope) AND key = \(key) AND window_start = \(previousStart)), 0),
                   set_config('synchronous_commit', 'off', true)
            """,
            logger: logger
        )
        var current = 0
        var previous = 0
        for try await (c, p, _) in rows.decode((Int, Int, String).self) {
            current = c
            previous = p
        }
        let elapsed = t - start
        let estimate: Int
        switch mode {
        case .fixed: estimate = current
        case .sliding: estimate = current + Int((Double(previous) * Double(window - elapsed) / Double(window)).rounded(.down))
        }
        if Int.random(in: 0..<100) == 0 { try await prune(scope: scope, before: previousStart) }
        if estimate <= limit {
            return RateLimitDecision(allowed: true, remaining: limit - estimate, retryAfter: 0)
        }
        return RateLimitDecision(allowed: false, remaining: 0, retryAfter: max(1, window - elapsed))
    }

    /// Throws the 429 envelope (`rate_limit_exceeded`, `retry_after`) when over the limit.
    public func enforce(scope: String, key: String, limit: Int, window: Int, mode: Mode = .fixed) async throws {
        let decision = try await hit(scope: scope, key: key, limit: limit, window: window, mode: mode)
        if !decision.allowed { throw AppError.rateLimited(retryAfter: decision.retryAfter) }
    }

    /// Forgets the counts of a key (after a successful login, for instance).
    public func reset(scope: String, key: String) async throws {
        try await client.query("DELETE FROM rate_limits WHERE scope = \(scope) AND key = \(key)", logger: logger)
    }

    private func prune(scope: String, before: Date) async throws {
        try await client.query("DELETE FROM rate_limits WHERE scope = \(scope) AND window_start < \(before)", logger: logger)
    }
}

import Foundation
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import ServiceKit
import TestSupport
import XCTest

/// #15: `/metrics` shows what fails in production, each metric with its HELP: the pool, the
/// outbox and job backlogs (a destination or kind that drained goes back to 0), and outbound
/// calls by peer and outcome.
final class OperationalMetricsTests: XCTestCase {
    struct DenyAll: AppVerifier { func verify(appID: UUID, apiKey: String) async throws -> Bool { false } }

    func testMetricsShowThePoolTheBacklogsAndUpstreamCalls() async throws {
        let runtime = kitRuntime(.ads, overrides: ["OUTBOX_POLL_MS": "600000"])
        let app = buildServiceApplication(
            runtime: runtime,
            appVerifier: CachedAppVerifier(DenyAll(), ttl: .seconds(1)),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [])))
        ) { _ in }
        let destination = "probe-\(UUID().lowercasedString.prefix(8))"
        let kind = "probe-\(UUID().lowercasedString.prefix(8))"
        try await app.test(.router) { client in
            await runtime.readiness.waitUntilMigrated()
            let db = runtime.db
            let logger = runtime.logger
            // Two pending messages (the oldest a minute old) and one dead, for a destination no
            // worker can reach; jobs of a queue no worker takes: one due, one later, one dead.
            try await db.query(
                """
                INSERT INTO outbox (target_service, method, path, status, attempts, next_attempt_at, created_at) VALUES
                  (\(destination), 'POST', '/x', 'pending', 1, now() + interval '1 hour', now() - interval '60 seconds'),
                  (\(destination), 'POST', '/x', 'pending', 1, now() + interval '1 hour', now()),
                  (\(destination), 'POST', '/x', 'dead', 1, now(), now())
                """,
                logger: logger
            )
            try await db.query(
                """
                INSERT INTO jobs (queue, kind, status, run_at) VALUES
                  ('probe', \(kind), 'pending', now() - interval '1 second'),
                  ('probe', \(kind), 'pending', now() + interval '1 hour'),
                  ('probe', \(kind), 'dead', now())
                """,
                logger: logger
            )
            // An upstream that refuses the connection.
            _ = try? await runtime.http.send(ServiceKit.HTTPRequest(url: "http://127.0.0.1:9/nothing", timeout: .seconds(2)))

            var text = try await client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
            func value(_ series: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last!) }
            }
            XCTAssertEqual(value(#"outbox_messages{destination="\#(destination)",status="pending"}"#), 2, String(text.prefix(3000)))
            XCTAssertEqual(value(#"outbox_messages{destination="\#(destination)",status="dead"}"#), 1)
            XCTAssertGreaterThanOrEqual(value(#"outbox_oldest_age_seconds{destination="\#(destination)",status="pending"}"#) ?? 0, 59)
            XCTAssertEqual(value(#"jobs{kind="\#(kind)",state="due"}"#), 1)
            XCTAssertEqual(value(#"jobs{kind="\#(kind)",state="scheduled"}"#), 1)
            XCTAssertEqual(value(#"jobs{kind="\#(kind)",state="dead"}"#), 1)
            XCTAssertEqual(value(#"db_pool_connections{state="size"}"#), Double(runtime.config.database.maxConnections))
            XCTAssertNotNil(value(#"db_pool_connections{state="in_use"}"#))
            XCTAssertEqual(value("db_pool_waiters"), 0)
            XCTAssertEqual(value(#"upstream_requests_total{peer="127.0.0.1:9",outcome="error"}"#), 1)
            for name in [
                "outbox_messages", "jobs", "db_pool_connections", "db_pool_acquire_timeouts_total",
                "upstream_requests_total", "upstream_request_duration_seconds",
            ] {
                XCTAssertTrue(text.contains("# HELP \(name) "), "HELP for \(name)")
            }

            // Drained: the series read 0, not their last value.
            try await db.query("DELETE FROM outbox WHERE target_service = \(destination)", logger: logger)
            try await db.query("DELETE FROM jobs WHERE kind = \(kind)", logger: logger)
            text = try await client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
            XCTAssertEqual(value(#"outbox_messages{destination="\#(destination)",status="pending"}"#), 0)
            XCTAssertEqual(value(#"jobs{kind="\#(kind)",state="dead"}"#), 0)
            // The first scrape is counted once it is answered.
            XCTAssertTrue(text.contains("# HELP http_requests_total "), "HELP for http_requests_total")
            XCTAssertEqual(value(#"http_requests_total{method="GET",route="/metrics",status="200"}"#), 1)
        }
    }
}

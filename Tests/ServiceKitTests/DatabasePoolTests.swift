import Foundation
import PostgresNIO
import ServiceKit
import Synchronization
import TestSupport
import XCTest

/// Runs on whatever executor the caller's task prefers (a nonisolated async function).
private func currentLoopCheck(_ loop: any EventLoop) async -> Bool { loop.inEventLoop }

private final class Tally: Sendable {
    let value = Mutex((ok: 0, unavailable: 0, other: [String]()))
}

final class DatabasePoolTests: XCTestCase {
    private static func pool(name: String, size: Int, acquireTimeout: Duration = .seconds(10)) -> DatabasePool {
        var c = PostgresConnection.Configuration(
            unixSocketPath: "\(TestEnvironment.adminSocket)/.s.PGSQL.\(TestEnvironment.databasePort)",
            username: "postgres",
            password: nil,
            database: TestEnvironment.unitDatabase
        )
        c.options.additionalStartupParameters = [("application_name", name)]
        return DatabasePool(configuration: c, size: size, acquireTimeout: acquireTimeout, logger: TestEnvironment.logger)
    }

    /// Every connection of the pool is killed by the server (as in a database restart) while 32
    /// tasks query through it: the process keeps running, the requests that met a dead connection
    /// fail as "unavailable" (a 503, never a 500), and the pool is whole again afterwards.
    func testConnectionsKilledUnderLoadAreReplaced() async throws {
        let name = "pool-test-\(UUID().uuidString.prefix(8))"
        let admin = TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)
        try await withPostgres(admin) { admin in
            try await withPostgres(Self.pool(name: name, size: 8)) { pool in
                let outcomes = Tally()
                let stop = ContinuousClock.now + .seconds(3)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<32 {
                        group.addTask {
                            while ContinuousClock.now < stop {
                                do {
                                    // Half single statements, half transactions: both must fail, never hang.
                                    if Bool.random() {
                                        let rows = try await pool.query("SELECT 1::int4").decode(Int32.self)
                                        for try await one in rows { XCTAssertEqual(one, 1) }
                                    } else {
                                        let echoed = try await pool.withTransaction(logger: TestEnvironment.logger) { conn in
                                            var out: [Int32] = []
                                            for try await v in try await conn.run("SELECT \(Int32(2))::int4", logger: TestEnvironment.logger).decode(
                                                Int32.self
                                            ) { out.append(v) }
                                            return out
                                        }
                                        XCTAssertEqual(echoed, [2])
                                    }
                                    outcomes.value.withLock { $0.ok += 1 }
                                } catch  where DatabaseErrors.isUnavailable(error) {
                                    outcomes.value.withLock { $0.unavailable += 1 }
                                } catch {
                                    outcomes.value.withLock { $0.other.append(String(reflecting: error)) }
                                }
                            }
                        }
                    }
                    group.addTask {
                        for _ in 0..<3 {
                            try await Task.sleep(for: .milliseconds(700))
                            var killed = 0
                            for try await n in try await admin.query(
                                """
                                SELECT count(*)::int FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = \(name)) t
                                """
                            ).decode(Int.self) { killed = n }
                            XCTAssertGreaterThan(killed, 0, "the pool's connections were there to be killed")
                        }
                    }
                    try await group.waitForAll()
                }
                let seen = outcomes.value.withLock { $0 }
                XCTAssertEqual(seen.other, [], "every failure is an unavailable database")
                XCTAssertGreaterThan(seen.ok, 100)
                // After the storm the pool answers again and holds at most its size.
                for _ in 0..<20 {
                    let rows = try await pool.query("SELECT 1::int4").collect()
                    XCTAssertEqual(rows.count, 1)
                }
                let count = try await admin.query("SELECT count(*)::int4 FROM pg_stat_activity WHERE application_name = \(name)")
                for try await n in count.decode(Int32.self) {
                    XCTAssertLessThanOrEqual(n, 8)
                    XCTAssertGreaterThan(n, 0)
                }
            }
        }
    }

    /// Nothing listens where the database should be: a lease fails as "unavailable" within the
    /// connect timeout instead of queueing forever, and, while the pool waits before its next
    /// attempt, at once.
    func testRefusedConnectionsFailFast() async throws {
        let port = try TestEnvironment.freePort()
        var c = PostgresConnection.Configuration(host: "127.0.0.1", port: port, username: "nobody", password: nil, database: "none", tls: .disable)
        c.options.connectTimeout = .seconds(2)
        let pool = DatabasePool(configuration: c, size: 4, logger: TestEnvironment.logger)
        try await withPostgres(pool) { pool in
            let started = ContinuousClock.now
            do {
                try await pool.query("SELECT 1")
                XCTFail("a query without a database")
            } catch {
                XCTAssertTrue(error is DatabaseUnavailableError, "\(error)")
            }
            XCTAssertLessThan(started.duration(to: .now), .seconds(1), "not held until a timeout")
            do {
                try await pool.query("SELECT 1")
                XCTFail("a query without a database")
            } catch {
                XCTAssertTrue(DatabaseErrors.isUnavailable(error), "\(error)")
            }
        }
    }

    /// A transaction that throws is rolled back and its connection goes back to the pool usable.
    func testTransactionRollsBackAndConnectionIsReused() async throws {
        try await withPostgres(Self.pool(name: "pool-test-tx", size: 1)) { pool in
            try await pool.query("CREATE TEMP TABLE IF NOT EXISTS pool_probe (n int)")
            struct Boom: Error {}
            do {
                try await pool.withTransaction(logger: TestEnvironment.logger) { c in
                    try await c.query("INSERT INTO pool_probe VALUES (1)", logger: TestEnvironment.logger)
                    throw Boom()
                }
                XCTFail("the body threw")
            } catch {
                XCTAssertTrue(error is Boom, "the body's own error: \(error)")
            }
            // Size 1: the same connection, so the temp table is visible and empty.
            let rows = try await pool.query("SELECT count(*)::int4 FROM pool_probe").decode(Int32.self)
            for try await n in rows { XCTAssertEqual(n, 0) }
        }
    }

    /// A statement on a connection the server has already ended fails at once as unavailable
    /// (postgres-nio's own `query` would wait forever once the connection's pipeline is gone).
    func testAStatementOnAClosedConnectionFailsInsteadOfWaiting() async throws {
        let name = "pool-test-closed-\(UUID().uuidString.prefix(8))"
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { admin in
            try await withPostgres(Self.pool(name: name, size: 1)) { pool in
                try await pool.withConnection { conn in
                    try await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = \(name)")
                    for _ in 0..<100 where !conn.isClosed { try await Task.sleep(for: .milliseconds(20)) }
                    XCTAssertTrue(conn.isClosed)
                    try await Task.sleep(for: .milliseconds(100))  // the pipeline is torn down after the close
                    do {
                        try await conn.run("SELECT 1", logger: TestEnvironment.logger)
                        XCTFail("a statement on a closed connection")
                    } catch {
                        XCTAssertTrue(DatabaseErrors.isUnavailable(error), "\(error)")
                    }
                }
                // The pool drops the dead connection and opens another.
                for try await n in try await pool.query("SELECT 3::int4").decode(Int32.self) { XCTAssertEqual(n, 3) }
            }
        }
    }

    /// Code under `EventLoopTaskExecutor` runs on that loop, nonisolated async callees included:
    /// what `execute` relies on to check and write in one turn of the connection's loop.
    func testTheEventLoopExecutorRunsCalleesOnTheLoop() async throws {
        let loop = PostgresConnection.defaultEventLoopGroup.any()
        let (direct, callee) = await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
            (loop.inEventLoop, await currentLoopCheck(loop))
        }
        XCTAssertTrue(direct)
        XCTAssertTrue(callee)
        let outside = await currentLoopCheck(loop)
        XCTAssertFalse(outside)
    }

    /// Every connection busy past the acquire timeout: the waiting request fails as "unavailable"
    /// (a 503) and says why, instead of waiting forever; the pool serves again once one is back.
    func testAWaitForAConnectionIsBounded() async throws {
        try await withPostgres(Self.pool(name: "pool-test-acquire", size: 1, acquireTimeout: .milliseconds(300))) { pool in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await pool.query("SELECT pg_sleep(1.5)") }
                try await Task.sleep(for: .milliseconds(200))
                let started = ContinuousClock.now
                do {
                    try await pool.query("SELECT 1")
                    XCTFail("the only connection was busy")
                } catch let e as DatabaseUnavailableError {
                    XCTAssertTrue(e.reason.contains("no connection came free"), e.reason)
                    XCTAssertTrue(e.reason.contains("waiting 1"), e.reason)
                }
                XCTAssertLessThan(started.duration(to: .now), .seconds(1), "answered at the deadline, not when the sleep ended")
                try await group.waitForAll()
            }
            let rows = try await pool.query("SELECT 7::int4").decode(Int32.self)
            for try await n in rows { XCTAssertEqual(n, 7) }
        }
    }

    /// A service's sessions carry the statement and idle-in-transaction limits from its config:
    /// PostgreSQL ends a statement that runs too long (the request gets an error, never a hang).
    func testServiceSessionsHaveServerSideTimeouts() async throws {
        let runtime = TestEnvironment.runtime(
            .ads,
            overrides: [
                "DATABASE_STATEMENT_TIMEOUT_MS": "250",
                "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS": "4000",
            ]
        )
        try await withPostgres(runtime.db) { db in
            for try await (statement, idle) in try await db.query(
                """
                SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')
                """
            ).decode((String, String).self) {
                XCTAssertEqual(statement, "250ms")
                XCTAssertEqual(idle, "4s")
            }
            do {
                try await db.query("SELECT pg_sleep(2)")
                XCTFail("the statement outlived the limit")
            } catch let e as PSQLError {
                XCTAssertEqual(e.serverInfo?[.sqlState], "57014", "query_canceled")
                XCTAssertTrue(DatabaseErrors.isUnavailable(e), "a statement timeout is answered 503 (retryable), not 500")
            }
        }
    }

    /// A write that reaches a read-only server (a leader that demoted itself when it lost its
    /// store, a replica a stale proxy still routes to) is a failover under way: 503, never 500.
    func testAWriteToAReadOnlyServerIsUnavailable() async throws {
        let runtime = TestEnvironment.runtime(.ads)
        try await withPostgres(runtime.db) { db in
            do {
                try await db.withTransaction(logger: TestEnvironment.logger) { conn in
                    try await conn.query("SET TRANSACTION READ ONLY", logger: TestEnvironment.logger)
                    try await conn.query("CREATE TEMP TABLE read_only_probe (x int)", logger: TestEnvironment.logger)
                }
                XCTFail("a read-only transaction wrote")
            } catch {
                XCTAssertTrue(DatabaseErrors.isUnavailable(error), "\(String(reflecting: error))")
            }
        }
    }
}

/// A pool started, used once and cancelled, many times over (as every test's helper does):
/// each `run()` returns and closes its connections.
final class DatabasePoolLifecycleTests: XCTestCase {
    func testShortLivedPoolsAlwaysShutDown() async throws {
        for round in 0..<300 {
            let pool = TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)
            let finished = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await withPostgres(pool) { db in
                        for try await n in try await db.query("SELECT 1::int4").decode(Int32.self) { XCTAssertEqual(n, 1) }
                    }
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(10))
                    return false
                }
                let first = try await group.next()!
                group.cancelAll()
                return first
            }
            XCTAssertTrue(finished, "round \(round): the pool did not shut down")
            if !finished { return }
        }
    }
}

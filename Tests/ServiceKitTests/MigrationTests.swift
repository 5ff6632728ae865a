import AuthDomain
import AuthService
import Foundation
import PostgresNIO
import ServiceKit
import TestSupport
import XCTest

final class MigrationTests: XCTestCase {
    /// Four `auth-service migrate` processes on a fresh database at once: no error, and each
    /// migration recorded exactly once.
    func testFourProcessesApplyEachMigrationOnce() async throws {
        try await withScratchDatabase("migrate_race", schema: "auth") { database in
            let binary = URL(fileURLWithPath: TestEnvironment.binDirectory).appendingPathComponent("auth-service")
            var env = ProcessInfo.processInfo.environment
            env["DATABASE_NAME"] = database
            env["DATABASE_PORT"] = String(TestEnvironment.databasePort)
            env["LOG_LEVEL"] = "error"
            let processes = try (0..<4).map { _ in try ChildProcess(binary.path, ["migrate"], environment: env) }
            for p in processes {
                let (status, _, err) = p.wait()
                XCTAssertEqual(status, 0, "migrate failed: \(err)")
            }

            let expected = try PlatformMigrations.all.count + AuthMigrationsCount.value()
            let counts = try await withPostgres(TestEnvironment.adminClient(database: database)) { db -> [String: Int] in
                var counts: [String: Int] = [:]
                let rows = try await db.query("SELECT name, count(*)::int FROM auth.schema_migrations GROUP BY name")
                for try await (name, n) in rows.decode((String, Int).self) { counts[name] = n }
                return counts
            }
            XCTAssertEqual(counts.count, expected)
            XCTAssertTrue(counts.values.allSatisfy { $0 == 1 }, "\(counts)")
        }
    }

    /// A database whose history differs from the code (edited or unknown migration) is refused.
    func testRefusesHistoryThatDoesNotMatch() async throws {
        let schema = "auth"
        let runtime = kitRuntime(.auth)
        try await withPostgres(runtime.db) { db in
            let first = MigrationRunner(schema: schema, migrations: runtime.migrations.migrations)
            try await first.run(on: db, logger: TestEnvironment.logger)

            var edited = runtime.migrations.migrations
            edited[0].sql += "\n-- edited after it was applied"
            do {
                try await MigrationRunner(schema: schema, migrations: edited).run(on: db, logger: TestEnvironment.logger)
                XCTFail("an edited migration must stop the start")
            } catch let error as MigrationError {
                XCTAssertTrue(error.description.contains("checksum"), error.description)
            }

            var renamed = runtime.migrations.migrations
            renamed[0].name = "0000_something_else"
            do {
                try await MigrationRunner(schema: schema, migrations: renamed).run(on: db, logger: TestEnvironment.logger)
                XCTFail("a renamed migration must stop the start")
            } catch let error as MigrationError {
                XCTAssertTrue(error.description.contains("does not match"), error.description)
            }

            do {
                try await MigrationRunner(schema: schema, migrations: []).run(on: db, logger: TestEnvironment.logger)
                XCTFail("a newer database must stop the start")
            } catch let error as MigrationError {
                XCTAssertTrue(error.description.contains("newer"), error.description)
            }
        }
    }

    /// Another session holds the migration lock (a replica migrating): the runner waits for it
    /// without blocking a statement (a statement limit shorter than the wait does not end it),
    /// then runs; the session's statement limit is back afterwards.
    func testWaitsForTheMigrationLockThenRestoresTheStatementLimit() async throws {
        let runtime = kitRuntime(.auth, overrides: ["DATABASE_MAX_CONNECTIONS": "1", "DATABASE_STATEMENT_TIMEOUT_MS": "300"])
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { admin in
            try await withPostgres(runtime.db) { db in
                try await admin.withConnection { holder in
                    try await holder.query("SELECT pg_advisory_lock(hashtext('migrations:auth'))", logger: TestEnvironment.logger)
                    let released = Task {
                        try await Task.sleep(for: .milliseconds(1200))
                        try await holder.query("SELECT pg_advisory_unlock(hashtext('migrations:auth'))", logger: TestEnvironment.logger)
                    }
                    let started = ContinuousClock.now
                    try await runtime.migrations.run(on: db, logger: TestEnvironment.logger)
                    XCTAssertGreaterThanOrEqual(started.duration(to: .now), .milliseconds(1100), "waited for the holder")
                    try await released.value
                }
                // One connection: the one the runner used.
                for try await limit in try await db.query("SELECT current_setting('statement_timeout')").decode(String.self) {
                    XCTAssertEqual(limit, "300ms")
                }
            }
        }
    }

    func testSQLScriptSplitsStatementsButNotQuotedSemicolons() {
        let sql = """
            -- a comment; with a semicolon
            CREATE TABLE a (x text DEFAULT 'a;b');
            /* block; comment */
            CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql;
            INSERT INTO a VALUES ('it''s; fine')
            """
        let statements = SQLScript.statements(sql)
        XCTAssertEqual(statements.count, 3)
        XCTAssertEqual(statements[0], "CREATE TABLE a (x text DEFAULT 'a;b')")
        XCTAssertTrue(statements[1].contains("$body$ SELECT 1; $body$"))
        XCTAssertEqual(statements[2], "INSERT INTO a VALUES ('it''s; fine')")
    }
}

enum AuthMigrationsCount {
    static func value() throws -> Int { try AuthService.migrations().count }
}

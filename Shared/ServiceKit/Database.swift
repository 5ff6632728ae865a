import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO

public enum DatabaseErrors {
    /// True when the error says the database cannot be reached (down, restarting, pool
    /// closed): the request may be retried, so it is answered 503 rather than 500.
    public static func isUnavailable(_ error: any Error) -> Bool {
        if error is DatabaseUnavailableError { return true }
        if let t = error as? PostgresTransactionError {
            if let inner = t.closureError ?? t.beginError ?? t.commitError { return isUnavailable(inner) }
            return false
        }
        if let e = error as? PSQLError {
            switch e.code {
            case .connectionError, .serverClosedConnection, .clientClosedConnection, .poolClosed, .uncleanShutdown:
                return true
            case .server:
                // 57P01 admin_shutdown, 57P03 cannot_connect_now, 08xxx connection exceptions; and
                // what a retry may pass: 57014 statement timeout, 55P03 lock timeout, 25P03 idle
                // transaction ended, 40001 serialization failure, 40P01 deadlock; 25006 a read-only
                // server (a leader that demoted itself, a replica a stale proxy still sends to:
                // the failover is under way) and 53xxx a server out of connections or memory.
                let state = e.serverInfo?[.sqlState] ?? ""
                return state.hasPrefix("57P") || state.hasPrefix("08") || state.hasPrefix("53")
                    || ["57014", "55P03", "25P03", "40001", "40P01", "25006"].contains(state)
            default:
                return false
            }
        }
        if error is NIOConnectionError || error is ChannelError { return true }
        return false
    }

    /// The SQLSTATE of a server error, if it is one.
    public static func sqlState(_ error: any Error) -> String? {
        if let t = error as? PostgresTransactionError, let inner = t.closureError ?? t.commitError { return sqlState(inner) }
        return (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    public static func isUniqueViolation(_ error: any Error) -> Bool { sqlState(error) == "23505" }
}

/// One named step of a schema's history.
public struct Migration: Sendable, Equatable {
    public var name: String
    public var sql: String
    public init(name: String, sql: String) {
        self.name = name
        self.sql = sql
    }

    public var checksum: String {
        sql.sha256.hexEncoded
    }

    /// Loads `NNNN_name.sql` files from a directory, ordered by name.
    public static func load(directory: URL) throws -> [Migration] {
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "sql" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        return try files.map {
            let name = $0.deletingPathExtension().lastPathComponent
            return Migration(name: name, sql: try expandInclude(try String(contentsOf: $0, encoding: .utf8), in: name))
        }
    }
}

extension Migration {
    static let includeMarker = "-- include platform: "

    /// A file that says `-- include platform: NAME` takes the platform's SQL of that name, at
    /// the file's own position in the service's history (the tables every service has, added
    /// after its first release).
    static func expandInclude(_ sql: String, in name: String) throws -> String {
        let text = sql.trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix(includeMarker) else { return sql }
        let included = String(text.dropFirst(includeMarker.count)).trimmingCharacters(in: .whitespaces)
        guard let platform = PlatformMigrations.included[included] else {
            throw MigrationError(description: "migration \(name) includes an unknown platform migration '\(included)'")
        }
        return platform
    }
}

public struct MigrationError: Error, CustomStringConvertible {
    public var description: String
}

/// Applies a service's migrations in order, each exactly once, even when several replicas
/// start together: a session advisory lock keyed by the schema serialises them, and the
/// tracking table in the service's own schema records what ran. A database whose recorded
/// history is not a prefix of the code's (a renamed, edited or unknown migration) stops the
/// start: running on it would be guessing.
public struct MigrationRunner: Sendable {
    public let schema: String
    public let migrations: [Migration]

    public init(schema: String, migrations: [Migration]) {
        self.schema = schema
        self.migrations = migrations
    }

    /// Returns the names of the migrations this call applied.
    @discardableResult
    public func run(on client: DatabasePool, logger: Logger) async throws -> [String] {
        // A session of its own, to PostgreSQL itself: the advisory lock and the lifted
        // statement limit are session state, which a transaction-mode pooler would not keep.
        // Closing it ends both, whatever happened.
        let conn = try await Self.connect(client, logger: logger)
        do {
            try await conn.run("SET statement_timeout = 0", logger: logger)
            try await waitForLock("migrations:\(schema)", on: conn, logger: logger)
            let applied = try await apply(conn, logger: logger)
            try await conn.close()
            return applied
        } catch {
            try? await conn.close()
            throw error
        }
    }

    /// A database still starting (a replica and PostgreSQL started together) is waited for, as
    /// long as a request would wait for a pooled connection.
    private static func connect(_ client: DatabasePool, logger: Logger) async throws -> PostgresConnection {
        let deadline = ContinuousClock.now + client.acquireTimeout
        while true {
            do {
                return try await client.connectDedicated()
            } catch  where ContinuousClock.now < deadline && !(error is CancellationError) {
                logger.info("migrations waiting for the database", metadata: ["error": "\(String(reflecting: error))"])
                try await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    /// Takes the session lock, polling: a replica waiting for another one's migrations says so
    /// (and who holds the lock) every 10 s instead of blocking silently.
    private func waitForLock(_ key: String, on conn: PostgresConnection, logger: Logger) async throws {
        let started = ContinuousClock.now
        var lastReport = started
        while true {
            for try await taken in try await conn.run("SELECT pg_try_advisory_lock(hashtext(\(key)))", logger: logger).decode(Bool.self) where taken {
                return
            }
            if ContinuousClock.now - lastReport >= .seconds(10) {
                lastReport = .now
                // Only a diagnosis: if it cannot be read, the wait goes on regardless.
                var holder = "unknown"
                if let rows = try? await conn.run(
                    """
                    SELECT a.pid, a.application_name, a.state FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                    WHERE l.locktype = 'advisory' AND l.granted AND l.objid::int = hashtext(\(key))
                    """,
                    logger: logger
                ).rows, let row = rows.first, let (pid, app, state) = try? row.decode((Int, String, String?).self) {
                    holder = "pid \(pid) (\(app), \(state ?? "?"))"
                }
                logger.warning(
                    "waiting for the migration lock",
                    metadata: [
                        "schema": "\(schema)", "holder": "\(holder)",
                        "waited": "\(ContinuousClock.now - started)",
                    ]
                )
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    private func apply(_ conn: PostgresConnection, logger: Logger) async throws -> [String] {
        try await conn.run(
            """
            CREATE TABLE IF NOT EXISTS \(unescaped: schema).schema_migrations (
                position integer PRIMARY KEY,
                name text NOT NULL UNIQUE,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            logger: logger
        )
        var recorded: [(Int, String, String)] = []
        let rows = try await conn.run("SELECT position, name, checksum FROM \(unescaped: schema).schema_migrations ORDER BY position", logger: logger)
        for try await (position, name, checksum) in rows.decode((Int, String, String).self) {
            recorded.append((position, name, checksum))
        }
        try verify(recorded)
        var applied: [String] = []
        for (index, migration) in migrations.enumerated() where index >= recorded.count {
            try await conn.run("BEGIN", logger: logger)
            do {
                try await conn.run("SET LOCAL search_path TO \(unescaped: schema), public", logger: logger)
                for statement in SQLScript.statements(migration.sql) {
                    try await conn.run(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await conn.run(
                    """
                    INSERT INTO \(unescaped: schema).schema_migrations (position, name, checksum)
                    VALUES (\(index), \(migration.name), \(migration.checksum))
                    """,
                    logger: logger
                )
                try await conn.run("COMMIT", logger: logger)
            } catch {
                _ = try? await conn.run("ROLLBACK", logger: logger)
                throw MigrationError(description: "migration \(migration.name) failed: \(String(reflecting: error))")
            }
            logger.info("applied migration", metadata: ["schema": "\(schema)", "migration": "\(migration.name)"])
            applied.append(migration.name)
        }
        return applied
    }

    /// The database's history must be a prefix of the code's, name for name and byte for byte.
    func verify(_ recorded: [(Int, String, String)]) throws {
        if recorded.count > migrations.count {
            throw MigrationError(
                description:
                    "database \(schema) has \(recorded.count) migrations, the code knows \(migrations.count): refusing to start on a newer schema"
            )
        }
        for (i, row) in recorded.enumerated() {
            let m = migrations[i]
            guard row.0 == i, row.1 == m.name else {
                throw MigrationError(
                    description: "migration history of \(schema) does not match the code at position \(i): database has \(row.1), code has \(m.name)"
                )
            }
            guard row.2 == m.checksum else {
                throw MigrationError(description: "migration \(m.name) of \(schema) was changed after it was applied (checksum mismatch)")
            }
        }
    }

    /// Whether every migration of the code is recorded (for `/ready`).
    public func isUpToDate(on client: DatabasePool, logger: Logger) async throws -> Bool {
        let rows = try await client.query("SELECT count(*)::int FROM \(unescaped: schema).schema_migrations", logger: logger)
        for try await count in rows.decode(Int.self) { return count == migrations.count }
        return false
    }
}

extension Migration {
    /// The `Migrations/` folder a service target copies into its resource bundle.
    public static func bundled(in bundle: Bundle, service: ServiceName) throws -> [Migration] {
        guard let url = bundle.url(forResource: "Migrations", withExtension: nil) else {
            throw MigrationError(description: "\(service.rawValue) migrations missing from the resource bundle")
        }
        return try load(directory: url)
    }
}

/// Splits a SQL script into statements (the extended protocol takes one at a time), aware of
/// quotes, dollar-quoted bodies and comments.
public enum SQLScript {
    public static func statements(_ sql: String) -> [String] {
        var result: [String] = []
        var current = ""
        let chars = Array(sql)
        var i = 0
        func flush() {
            let t = current.trimmingCharacters(in: .whitespacesAndNewlines)
            if !t.isEmpty { result.append(t) }
            current = ""
        }
        while i < chars.count {
            let c = chars[i]
            let next: Character? = i + 1 < chars.count ? chars[i + 1] : nil
            if c == "-" && next == "-" {
                while i < chars.count && chars[i] != "\n" { i += 1 }
                continue
            }
            if c == "/" && next == "*" {
                i += 2
                while i + 1 < chars.count && !(chars[i] == "*" && chars[i + 1] == "/") { i += 1 }
                i += 2
                continue
            }
            if c == "'" || c == "\"" {
                current.append(c)
                i += 1
                while i < chars.count {
                    current.append(chars[i])
                    if chars[i] == c {
                        if i + 1 < chars.count && chars[i + 1] == c {
                            current.append(c)
                            i += 2
                            continue
                        }
                        i += 1
                        break
                    }
                    i += 1
                }
                continue
            }
            if c == "$" {
                // $tag$ ... $tag$
                var j = i + 1
                while j < chars.count && (chars[j].isLetter || chars[j].isNumber || chars[j] == "_") { j += 1 }
                if j < chars.count && chars[j] == "$" {
                    let tag = String(chars[i...j])
                    current += tag
                    i = j + 1
                    while i < chars.count {
                        if chars[i] == "$" && String(chars[i..<min(chars.count, i + tag.count)]) == tag {
                            current += tag
                            i += tag.count
                            break
                        }
                        current.append(chars[i])
                        i += 1
                    }
                    continue
                }
            }
            if c == ";" {
                flush()
                i += 1
                continue
            }
            current.append(c)
            i += 1
        }
        flush()
        return result
    }
}

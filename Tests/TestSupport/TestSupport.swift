import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import Synchronization
import WireTypes

/// What `make test` passes to the tests: the unit database (no service process runs on it),
/// the cluster's admin socket, the gateway of the running stack, the built binaries.
public enum TestEnvironment {
    public static var env: [String: String] { ProcessInfo.processInfo.environment }
    public static var databasePort: Int { Int(env["DATABASE_PORT"] ?? "") ?? 54329 }
    public static var unitDatabase: String { env["TEST_UNIT_DATABASE"] ?? "app_backend_unit" }
    /// The database of the running stack (the services `make test` started).
    public static var stackDatabase: String { env["DATABASE_NAME"] ?? "app_backend_test" }
    public static var adminSocket: String { env["TEST_PG_SOCKET"] ?? ".data/pg-socket" }
    public static var gatewayURL: String { env["TEST_GATEWAY_URL"] ?? "http://127.0.0.1:8080" }
    public static var binDirectory: String { env["TEST_BIN_DIR"] ?? ".build/debug" }
    public static var python: String { env["TEST_PYTHON"] ?? "python3" }

    public static let logger: Logger = {
        var l = Logger(label: "test")
        l.logLevel = .warning
        return l
    }()

    /// The configuration of `service` against the unit database, workers off unless asked.
    public static func config(_ service: ServiceName, overrides: [String: String] = [:]) -> ServiceConfig {
        // Only where the database is comes from outside: the operator's `.env` (lifted sign-in
        // limits, the stack's upstreams and store roots) must never change a test's outcome.
        // Everything else is a service default or the test's own override.
        var values = env.filter { key, _ in Self.inheritedByUnitTests(key) }
        values["DATABASE_NAME"] = unitDatabase
        values["DATABASE_PORT"] = String(databasePort)
        values["RUN_WORKERS"] = "false"
        values["LOG_LEVEL"] = "warning"
        for (k, v) in overrides { values[k] = v }
        return ServiceConfig(service: service, environment: EnvironmentVariables(values))
    }

    /// The variables an in-process service takes from the test process: how to reach the
    /// database, nothing that decides behaviour.
    public static func inheritedByUnitTests(_ key: String) -> Bool {
        key.hasPrefix("DATABASE_") && !key.hasSuffix("_TIMEOUT_MS") && key != "DATABASE_MAX_CONNECTIONS"
            || key.hasSuffix("_DATABASE_USER") || key.hasSuffix("_DATABASE_PASSWORD") || key == "DATA_DIR"
    }

    public static func runtime(
        _ service: ServiceName,
        migrations: [Migration] = [],
        overrides: [String: String] = [:],
        clock: any WallClock = SystemClock()
    ) -> ServiceRuntime {
        ServiceRuntime(config: config(service, overrides: overrides), migrations: migrations, clock: clock, logger: logger)
    }

    /// A superuser pool over the cluster's unix socket, for set-up a service role may not do.
    public static func adminClient(database: String = "postgres") -> DatabasePool {
        var c = PostgresConnection.Configuration(
            unixSocketPath: "\(adminSocket)/.s.PGSQL.\(databasePort)",
            username: "postgres",
            password: nil,
            database: database
        )
        c.options.additionalStartupParameters = [("client_min_messages", "warning")]
        return DatabasePool(configuration: c, size: 4, logger: logger)
    }

    /// A free TCP port on loopback (bound then released).
    public static func freePort() throws -> Int {
        // Below the kernel's ephemeral range (32768 and up): a port the kernel hands out for
        // the kernel to hand to an outbound connection in the gap before the test binds it again
        // (the running stack makes many) was taken there now and then ("Address already in use").
        for _ in 0..<200 {
            let port = Int.random(in: 15_000..<32_000)
            if canBind(port) { return port }
        }
        struct NoFreePort: Error {}
        throw NoFreePort()
    }

    static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let len = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } } == 0
    }
}

/// Runs `body` on a database of its own, named `prefix` and a random number, with `schema` made
/// and owned by its service's role (`<schema>_svc`), as the bootstrap makes it; dropped after.
/// For a test that changes what the shared database's other tests rely on, or needs it empty.
public func withScratchDatabase<T: Sendable>(
    _ prefix: String,
    schema: String,
    _ body: @Sendable (_ database: String) async throws -> T
) async throws -> T {
    let database = "\(prefix)_\(UInt32.random(in: 0...UInt32.max))"
    try await withPostgres(TestEnvironment.adminClient()) {
        try await $0.query("CREATE DATABASE \(unescaped: database)", logger: TestEnvironment.logger)
    }
    let drop: @Sendable () async -> Void = {
        try? await withPostgres(TestEnvironment.adminClient()) {
            try await $0.query("DROP DATABASE IF EXISTS \(unescaped: database) WITH (FORCE)", logger: TestEnvironment.logger)
        }
    }
    do {
        try await withPostgres(TestEnvironment.adminClient(database: database)) {
            try await $0.query("CREATE SCHEMA \(unescaped: schema) AUTHORIZATION \(unescaped: schema + "_svc")", logger: TestEnvironment.logger)
        }
        let value = try await body(database)
        await drop()
        return value
    } catch {
        await drop()
        throw error
    }
}

/// Runs `body` with the pool's `run()` going, then shuts the pool down.
public func withPostgres<T: Sendable>(_ client: DatabasePool, _ body: @Sendable (DatabasePool) async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            await client.run()
            return nil
        }
        do {
            let value = try await body(client)
            group.cancelAll()
            return value
        } catch {
            group.cancelAll()
            throw error
        }
    }
}

/// Runs the runtime's pool and migrations (as the service does before serving).
public func withMigratedRuntime<T: Sendable>(_ runtime: ServiceRuntime, _ body: @Sendable (ServiceRuntime) async throws -> T) async throws -> T {
    try await withPostgres(runtime.db) { db in
        try await runtime.migrations.run(on: db, logger: runtime.logger)
        runtime.readiness.markMigrated()
        return try await body(runtime)
    }
}

extension TestResponse {
    /// The error envelope of a 4xx/5xx answer.
    public func envelope() throws -> ErrorEnvelope {
        try JSONDecoder().decode(ErrorEnvelope.self, from: Data(body.readableBytesView))
    }

    public func json<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try JSON.decoder.decode(T.self, from: Data(body.readableBytesView))
    }
}

extension HTTPFields {
    public static func tenant(_ appID: UUID, _ key: String) -> HTTPFields {
        [.xAppID: appID.uuidString, .xAPIKey: key]
    }
}

/// A real SMTP server for tests: `aiosmtpd` (PyPI) writing every message to a Maildir.
public final class SMTPSink {
    public let port: Int
    public let maildir: URL
    let process: ChildProcess

    public init() throws {
        port = try TestEnvironment.freePort()
        maildir = FileManager.default.temporaryDirectory.appendingPathComponent("maildir-\(UUID().uuidString)")
        process = try ChildProcess(
            TestEnvironment.python,
            ["-m", "aiosmtpd", "-n", "-l", "127.0.0.1:\(port)", "-c", "aiosmtpd.handlers.Mailbox", maildir.path]
        )
    }

    public var url: String { "smtp://127.0.0.1:\(port)" }

    /// The messages received so far, as text.
    public func messages() throws -> [String] {
        let files = (try? FileManager.default.subpathsOfDirectory(atPath: maildir.path))?.filter { $0.hasPrefix("new/") && $0.count > 4 } ?? []
        return try files.map { try String(contentsOf: maildir.appendingPathComponent($0), encoding: .utf8) }
    }

    public func stop() { process.stop() }

    /// A test that forgot `stop()` (or failed before it) does not leave the server running.
    deinit { stop() }
}

/// Fetches the service's OpenAPI document and checks each documented operation reaches a
/// route: without credentials none may answer 404 or 405, so the document cannot name a path
/// the service does not serve. Returns what is wrong (empty when all is well).
/// `takenBeforeRouter`: documented paths a handler ahead of the router serves on a real server's
/// connection (auth's `GET /live/events`, #46), which a router-only test client cannot reach;
/// their own stack tests check them through the gateway.
public func documentedOperationProblems(
    _ client: any TestClientProtocol,
    prefix: String,
    takenBeforeRouter: Set<String> = []
) async throws -> [String] {
    let doc = try await client.execute(uri: "/\(prefix)/v1/openapi.json", method: .get) { $0 }
    guard doc.status == .ok, let json = try JSONSerialization.jsonObject(with: Data(buffer: doc.body)) as? [String: Any],
        json["openapi"] as? String == "3.1.0", let paths = json["paths"] as? [String: [String: Any]], !paths.isEmpty
    else {
        return ["no OpenAPI 3.1 document with paths at /\(prefix)/v1/openapi.json"]
    }
    var problems: [String] = []
    // The docs page shows this same document: every path is on it.
    let page = try await client.execute(uri: "/\(prefix)/v1/docs", method: .get) { String(buffer: $0.body) }
    for path in paths.keys where !page.contains("<code>\(path)</code>") { problems.append("\(path) is not on the docs page") }
    for (path, ops) in paths where !takenBeforeRouter.contains(path) {
        let concrete = path.replacingOccurrences(of: #"\{[^}]+\}"#, with: "00000000-0000-4000-8000-000000000000", options: .regularExpression)
        for method in ops.keys {
            guard let m = HTTPRequest.Method(rawValue: method.uppercased()) else {
                problems.append("bad method \(method)")
                continue
            }
            let r = try await client.execute(uri: concrete, method: m, headers: [.contentType: "application/json"], body: ByteBuffer(string: "{}")) {
                $0
            }
            if [404, 405].contains(r.status.code) { problems.append("\(method.uppercased()) \(path) answered \(r.status.code)") }
        }
    }
    return problems
}

/// Reading a decoded JSON object in assertions: nil when the key is missing or of another type.
extension [String: JSONValue] {
    public func int(_ k: String) -> Int? {
        if case .int(let v)? = self[k] { return v }
        return nil
    }
    public func string(_ k: String) -> String? {
        if case .string(let v)? = self[k] { return v }
        return nil
    }
    public func bool(_ k: String) -> Bool? {
        if case .bool(let v)? = self[k] { return v }
        return nil
    }
    public func double(_ k: String) -> Double? {
        switch self[k] {
        case .double(let v)?: v
        case .int(let v)?: Double(v)
        default: nil
        }
    }
    public func object(_ k: String) -> [String: JSONValue]? {
        if case .object(let v)? = self[k] { return v }
        return nil
    }
    public func array(_ k: String) -> [[String: JSONValue]] {
        guard case .array(let a)? = self[k] else { return [] }
        return a.compactMap {
            if case .object(let o) = $0 { return o }
            return nil
        }
    }
    public func isNull(_ k: String) -> Bool {
        if case .null? = self[k] { return true }
        return false
    }
}

/// Stops a test's local server (a fake upstream, identity provider or store) that runs in
/// `group`: a graceful shutdown first, and if the server has not ended within `grace` (a
/// connection a peer left half-open can hold it), cancellation. A test never waits forever on
/// its own stand-in.
public func stopLocalServer(
    _ server: ServiceGroup,
    in group: inout ThrowingTaskGroup<Void, any Error>,
    grace: Duration = .seconds(10)
) async throws {
    await server.triggerGracefulShutdown()
    let expired = Mutex(false)
    group.addTask {
        try await Task.sleep(for: grace)
        expired.withLock { $0 = true }
    }
    var failure: (any Error)?
    do { _ = try await group.next() } catch { failure = error }  // the server, or the grace period, whichever ends first
    group.cancelAll()
    while let next = await group.nextResult() {
        if case .failure(let error) = next, failure == nil, !(error is CancellationError) { failure = error }
    }
    if expired.withLock({ $0 }) {
        TestEnvironment.logger.warning("a local test server did not stop within \(grace) of a graceful shutdown; cancelled")
    }
    if let failure { throw failure }
}

/// Runs one of the built service binaries (`TEST_BIN_DIR`) to its end (ended after `timeout`
/// seconds, so a binary that should have refused to start cannot hang the run): exit status,
/// stdout, stderr.
public func runServiceBinary(
    _ name: String,
    _ args: [String],
    environment: [String: String],
    timeout: TimeInterval = 60
) throws -> (status: Int32, out: String, err: String) {
    try ChildProcess(TestEnvironment.binDirectory + "/" + name, args, environment: environment).wait(timeout: timeout)
}

/// Runs a service binary's operator command against the unit database.
public func runServiceCommand(_ name: String, _ args: [String]) throws -> (status: Int32, out: String, err: String) {
    var env = ProcessInfo.processInfo.environment
    env["DATABASE_NAME"] = TestEnvironment.unitDatabase
    env["DATABASE_PORT"] = String(TestEnvironment.databasePort)
    env["LOG_LEVEL"] = "error"
    return try runServiceBinary(name, args, environment: env)
}

extension ServiceRuntime {
    /// How many reads of the named cache this runtime answered from memory (its metrics).
    public func cacheHits(_ cache: String) -> Int {
        var buffer: [UInt8] = []
        metrics.emit(into: &buffer)
        let line = String(decoding: buffer, as: UTF8.self).split(separator: "\n")
            .first { $0.hasPrefix("cache_requests_total{") && $0.contains(#"cache="\#(cache)""#) && $0.contains(#"result="hit""#) }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }
}

/// Subscription's side of the pushed entitlement: what its outbox delivers to ads and offline.
public enum SubscriptionFacts {
    public static let headers: HTTPFields = [
        .authorization: "Bearer local-internal-subscription", .xServiceName: "subscription",
        .contentType: "application/json",
    ]

    /// `PUT /internal/users/{id}/entitlement?app_id=` as subscription sends it.
    public static func push(
        _ client: any TestClientProtocol,
        app: UUID,
        user: UUID,
        premium: Bool,
        version: Int64,
        validUntil: Date? = nil,
        headers: HTTPFields = headers
    ) async throws -> TestResponse {
        let fact = EntitlementFact(appID: app, userID: user, isPremium: premium, validUntil: validUntil, version: version)
        return try await client.execute(
            uri: "/internal/users/\(user.lowercasedString)/entitlement?app_id=\(app.lowercasedString)",
            method: .put,
            headers: headers,
            body: ByteBuffer(data: try JSON.encoder.encode(fact))
        ) { $0 }
    }
}

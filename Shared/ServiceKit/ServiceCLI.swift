import ArgumentParser
import CCurl
import Foundation
import Hummingbird
import Logging
import PostgresNIO

/// What a service binary is: its name, its migrations, and how to build its application.
public protocol ServiceDefinition {
    static var service: ServiceName { get }
    static func migrations() throws -> [Migration]
    static func buildApplication(runtime: ServiceRuntime) async throws -> any ApplicationProtocol
    /// Every statement the service runs on a schedule, as it runs it (see `PeriodicQuery`).
    static func periodicQueries(_ env: EnvironmentVariables) -> [PeriodicQuery]
}

extension ServiceDefinition {
    public static func makeRuntime(environment: EnvironmentVariables = EnvironmentVariables()) throws -> ServiceRuntime {
        ServiceRuntime(config: ServiceConfig(service: service, environment: environment), migrations: try migrations())
    }
}

/// `<name>-service serve` (the default): migrate, then serve until SIGTERM/SIGINT.
public struct ServeCommand<S: ServiceDefinition>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "serve", abstract: "Apply migrations and serve \(S.service.prefix)")
    }
    public init() {}
    public func run() async throws {
        limitMallocArenas()
        var runtime = try S.makeRuntime()
        // Outside the local stack a built-in secret is a door anyone can open: refuse to start.
        let unsafe = runtime.config.unsafeSecrets()
        guard unsafe.isEmpty else {
            throw ConfigurationError(
                "refusing to start with a default or empty secret outside ENVIRONMENT=local: set "
                    + unsafe.joined(separator: ", ")
            )
        }
        // #49: once per process, before anything makes a span (AsyncHTTPClient's shared client
        // reads the tracer when it is first used).
        if Telemetry.isRequested(runtime.config.environment) {
            runtime.telemetry = try Telemetry.bootstrap(service: S.service, logger: runtime.logger, environment: runtime.config.environment)
        }
        let app = try await S.buildApplication(runtime: runtime)
        try await app.runService()
    }
}

/// glibc gives threads that allocate at once their own heap arenas (up to 8 per core), and
/// memory freed in one is not reused by another: with the event loops and the concurrency pool
/// that is most of a service's resident size after a burst. Two arenas, unless the operator
/// chose otherwise with glibc's own `MALLOC_ARENA_MAX`.
func limitMallocArenas() {
    #if canImport(Glibc)
    if ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil { _ = mallopt(M_ARENA_MAX, 2) }
    #endif
}

/// `<name>-service admin periodic-queries [--analyze]`: the plan of every statement the service
/// runs on a schedule, whether an index serves it and (with `--analyze`, each run in a
/// transaction rolled back) how long it takes on this database. `make bench` runs it on its
/// grown database.
public struct PeriodicQueriesCommand<S: ServiceDefinition>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "periodic-queries", abstract: "EXPLAIN every statement this service runs on a schedule")
    }
    @Flag(help: "Also run each (rolled back) and print its time") var analyze = false
    @Flag(help: "Print each plan in full") var plans = false
    public init() {}
    public func run() async throws {
        let runtime = try S.makeRuntime()
        let analyze = analyze
        let queries = S.periodicQueries(runtime.config.environment)
        let explained = try await runtime.withDatabase { db in
            try await db.explain(queries, analyze: analyze, warmUp: analyze, logger: runtime.logger)
        }
        for p in explained {
            let time = p.executionMilliseconds.map { String(format: "%9.3f ms", $0) } ?? ""
            let how = p.readsWholeTable ? "SEQ-SCAN" : p.usesIndex ? "index" : "no-table"
            print(
                "\(S.service.rawValue.padding(toLength: 13, withPad: " ", startingAt: 0)) \(p.name.padding(toLength: 40, withPad: " ", startingAt: 0)) \(how.padding(toLength: 9, withPad: " ", startingAt: 0)) \(time)"
            )
            if plans { print(p.plan.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n")) }
        }
    }
}

/// `<name>-service migrate`: apply this service's migrations and exit.
public struct MigrateCommand<S: ServiceDefinition>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "migrate", abstract: "Apply the \(S.service.rawValue) schema migrations and exit")
    }
    public init() {}
    public func run() async throws {
        let runtime = try S.makeRuntime()
        try await runtime.withDatabase { db in
            let applied = try await runtime.migrations.run(on: db, logger: runtime.logger)
            print("applied \(applied.count) migration(s) to schema \(runtime.config.database.schema)")
        }
    }
}

extension ServiceRuntime {
    /// Runs `body` with the Postgres pool running (for commands outside the server).
    public func withDatabase<T: Sendable>(_ body: @Sendable (DatabasePool) async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await db.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(db)
        }
    }
}

import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import ServiceLifecycle
import Synchronization
import WireTypes

/// Whether the migrations of this process have been applied (for `/ready` and for workers
/// that must not poll tables that do not exist yet).
public final class Readiness: Sendable {
    private let migrated = Mutex(false)
    public init() {}
    public var isMigrated: Bool { migrated.withLock { $0 } }
    public func markMigrated() { migrated.withLock { $0 = true } }
    public func waitUntilMigrated() async {
        while !isMigrated && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(50)) }
    }
}

/// A service that starts only once migrations are applied.
public struct AfterMigrations: Service {
    let readiness: Readiness
    let inner: any Service
    public init(_ readiness: Readiness, _ inner: any Service) {
        self.readiness = readiness
        self.inner = inner
    }
    public func run() async throws {
        await readiness.waitUntilMigrated()
        try await inner.run()
    }
}

/// Everything a service binary is built from. Tests build it too, with their own config.
public struct ServiceRuntime: Sendable {
    public let config: ServiceConfig
    public let logger: Logger
    public let db: DatabasePool
    public let http: CurlHTTPClient
    public let metrics: PrometheusCollectorRegistry
    public let migrations: MigrationRunner
    public let readiness: Readiness
    public let clock: any WallClock
    /// Ended sessions, suspended and erased users, as this service last learned them.
    public let sessions: SessionRegistry
    /// The changes of this service's schema, as every replica hears them (for its caches).
    public let changes: ChangeFeed
    /// Rung when any replica commits an outbox row: the outbox worker delivers it at once.
    public let outboxWakeup: Wakeup
    /// #49: the span exporter and the sampling, when `serve` bootstrapped tracing (`Telemetry`);
    /// nil in tests and whenever no OTLP endpoint is configured. Its presence adds the tracing
    /// middleware.
    public var telemetry: TelemetryBackend? = nil

    public init(config: ServiceConfig, migrations: [Migration], clock: any WallClock = SystemClock(), logger: Logger? = nil) {
        var logger =
            logger
            ?? Logger(label: "\(config.service.rawValue)-service") { _ in
                var handler = ServiceLogHandler(service: config.service.rawValue, format: config.logFormat)
                // #49: a line written inside a span names its trace and span.
                if Telemetry.isRequested(config.environment) { handler.metadataProvider = Telemetry.logMetadata }
                return handler
            }
        logger.logLevel = Logger.Level(rawValue: config.logLevel) ?? .info
        self.config = config
        self.logger = logger
        self.db = DatabasePool(config: config.database, logger: logger)
        let metrics = PrometheusCollectorRegistry()
        self.metrics = metrics
        self.http = CurlHTTPClient(logger: logger, metrics: UpstreamMetrics(registry: metrics))
        self.migrations = MigrationRunner(schema: config.database.schema, migrations: PlatformMigrations.all + migrations)
        self.readiness = Readiness()
        self.clock = clock
        self.sessions = SessionRegistry()
        self.changes = ChangeFeed(db: db, schema: config.database.schema, logger: logger)
        let wakeup = Wakeup()
        self.outboxWakeup = wakeup
        changes.subscribe { event in
            // After a reset, rows committed while the feed was deaf may be waiting: look now too.
            switch event {
            case .change(let change) where change.topic == Outbox.topic: wakeup.signal()
            case .reset: wakeup.signal()
            default: break
            }
        }
    }

    /// Keeps `sessions` in step with this service's schema (every replica, workers or not).
    public var sessionWatcher: SessionWatcher {
        SessionWatcher(registry: sessions, db: db, interval: .milliseconds(config.sessionPollMilliseconds), logger: logger)
    }

    public var internalCredential: InternalCredential {
        InternalCredential(service: config.service, secret: config.ownInternalCredential)
    }

    /// The outbox worker of this service, delivering to the others.
    public var outboxWorker: OutboxWorker {
        OutboxWorker(
            client: db,
            http: http,
            serviceURLs: config.serviceURLs,
            credential: internalCredential,
            pollInterval: .milliseconds(config.outboxPollMilliseconds),
            wakeup: outboxWakeup,
            logger: logger
        )
    }

    /// Verifies access tokens against auth's JWKS over HTTP.
    public func remoteTokenVerifier() -> AccessTokenVerifier {
        AccessTokenVerifier(
            source: RemoteJWKSSource(url: "\(config.url(of: .auth))/auth/v1/.well-known/jwks.json", http: http),
            cacheTTL: .seconds(config.jwksCacheSeconds),
            issuers: config.acceptedIssuers,
            clock: clock
        )
    }

    /// Verifies tenant headers by asking auth, cached briefly.
    public func remoteAppVerifier() -> any AppVerifier {
        CachedAppVerifier(
            RemoteAppVerifier(authURL: config.url(of: .auth), http: http, credential: internalCredential),
            ttl: .seconds(config.tenantCacheSeconds)
        )
    }

    public func remoteOperatorVerifier() -> any OperatorVerifier {
        CachedOperatorVerifier(
            RemoteOperatorVerifier(authURL: config.url(of: .auth), http: http, credential: internalCredential),
            ttl: .seconds(config.operatorCacheSeconds)
        )
    }
}

/// The router groups a service fills: public routes behind tenant headers, authenticated
/// routes behind tenant headers and an access token, and internal routes behind a service
/// credential.
public struct ServiceRoutes {
    public let router: Router<ServiceRequestContext>
    /// `/<prefix>/v1`, no authentication (health, JWKS, OpenAPI).
    public let open: RouterGroup<ServiceRequestContext>
    /// `/<prefix>/v1`, tenant headers required.
    public let tenant: RouterGroup<ServiceRequestContext>
    /// `/<prefix>/v1`, tenant headers and an access token of that tenant required.
    public let user: RouterGroup<ServiceRequestContext>
    /// The same, for a user's requests whose only writes are rows no cache reads (a content
    /// check's decision log and device sighting): they leave the user's cached answers in place
    /// (`user` drops them after any write).
    public let userLogging: RouterGroup<ServiceRequestContext>
    /// `/internal`, service credential required.
    public let `internal`: RouterGroup<ServiceRequestContext>
    /// `/<prefix>/v1`, tenant headers and an operator credential for that app required.
    public let admin: RouterGroup<ServiceRequestContext>
}

/// The composition root shared by the four services: middleware, health/ready/metrics, the
/// migrations before the server starts, the Postgres pool and workers in the ServiceGroup.
public func buildServiceApplication(
    runtime: ServiceRuntime,
    appVerifier: any AppVerifier,
    tokenVerifier: AccessTokenVerifier,
    operatorVerifier: (any OperatorVerifier)? = nil,
    services extra: [any Service] = [],
    everyReplica: [any Service] = [],
    userData: [UserDataSection]? = nil,
    timeline: UserTimeline? = nil,
    retention: [RetentionRule] = [],
    server: HTTPServerBuilder = .http1(),
    configure: (ServiceRoutes) throws -> Void
) rethrows -> ServiceApplication {
    let config = runtime.config
    let router = Router(context: ServiceRequestContext.self)
    // #49: outermost the request's span, so that every line it logs (the access line too)
    // carries its trace id.
    if let telemetry = runtime.telemetry { router.add(middleware: TracingMiddleware(telemetry)) }
    // Then the request id (on every answer, errors included), then the metrics (which
    // see every answer, errors rendered), then the error envelope.
    router.add(middleware: RequestIDMiddleware(trustedProxies: config.trustedProxies, accessLevel: config.accessLogLevel))
    router.add(middleware: MetricsMiddleware(registry: runtime.metrics))
    router.add(middleware: ErrorMiddleware())

    let prefix = config.service.prefix
    // Writers that are not a signed-in user (webhooks, deliveries, operators) drop this
    // replica's cached answers before answering; a user's write drops only theirs (below).
    let everything = ReadYourWritesMiddleware(changes: runtime.changes, scope: .everything)
    let open = router.group(RouterPath(prefix)).add(middleware: everything)
    for base in [router.group(), open] {
        base.get("health") { _, context in
            try context.json(HealthStatus(status: "ok", service: config.service.rawValue))
        }
    }
    // Operators only: at the root, outside every public prefix, so neither the gateway nor the
    // Ingress (which route by prefix) ever reaches them.
    router.get("ready") { _, context in
        try await readiness(runtime: runtime, context: context)
    }
    let operational = OperationalMetrics(registry: runtime.metrics, db: runtime.db, logger: runtime.logger)
    router.get("metrics") { _, _ in
        await operational.refresh()
        var buffer: [UInt8] = []
        runtime.metrics.emit(into: &buffer)
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4"],
            body: .init(byteBuffer: ByteBuffer(bytes: buffer))
        )
    }
    let tenant = router.group(RouterPath(prefix)).add(middleware: everything).add(middleware: TenantMiddleware(verifier: appVerifier))
    let user = router.group(RouterPath(prefix))
        .add(middleware: TenantMiddleware(verifier: appVerifier))
        .add(middleware: AccessTokenMiddleware(verifier: tokenVerifier, sessions: runtime.sessions))
        .add(middleware: ReadYourWritesMiddleware(changes: runtime.changes))
    let userLogging = router.group(RouterPath(prefix))
        .add(middleware: TenantMiddleware(verifier: appVerifier))
        .add(middleware: AccessTokenMiddleware(verifier: tokenVerifier, sessions: runtime.sessions))
    let internalGroup = router.group("internal").add(middleware: InternalAuthMiddleware(accepted: config.acceptedInternalCredentials)).add(
        middleware: everything
    )
    if let userData {
        UserDataController(
            service: config.service,
            sections: userData,
            db: runtime.db,
            sessions: runtime.sessions,
            changes: runtime.changes,
            logger: runtime.logger
        ).addRoutes(to: internalGroup)
    }
    timeline?.addRoute(service: config.service, to: internalGroup, db: runtime.db, logger: runtime.logger)
    if config.service != .auth {
        SessionFactsController(
            registry: runtime.sessions,
            db: runtime.db,
            store: UserFactStore(logger: runtime.logger),
            logger: runtime.logger
        ).addRoutes(to: internalGroup)
    }
    let audit = OperatorAuditStore(db: runtime.db, logger: runtime.logger)
    let admin = router.group(RouterPath(prefix))
        .add(middleware: TenantMiddleware(verifier: appVerifier, keyOptional: true))
        .add(
            middleware: AdminAuthMiddleware(
                token: config.adminToken,
                operators: operatorVerifier ?? runtime.remoteOperatorVerifier(),
                audit: audit,
                tokens: tokenVerifier
            )
        )
        .add(middleware: everything)
    OperatorAuditController(store: audit).addRoutes(to: admin)
    try configure(
        ServiceRoutes(router: router, open: open, tenant: tenant, user: user, userLogging: userLogging, internal: internalGroup, admin: admin)
    )

    let watcher = runtime.sessionWatcher
    // The exporter first: a group stops its services last to first, so the spans of the last
    // requests are still sent.
    var services: [any Service] =
        (runtime.telemetry.map { [$0.exporter] } ?? []) + [
            runtime.db, runtime.changes, AfterMigrations(runtime.readiness, watcher),
            MemoryTrimmer(interval: .seconds(config.environment.int("MALLOC_TRIM_SECONDS", default: 10))),
        ] + everyReplica.map { AfterMigrations(runtime.readiness, $0) }
    if config.runWorkers {
        let purger = RetentionPurger(
            db: runtime.db,
            rules: RetentionRule.platform(config.environment) + retention,
            interval: .seconds(config.environment.int("RETENTION_PURGE_SECONDS", default: 600)),
            logger: runtime.logger
        )
        services += ([runtime.outboxWorker, purger] + extra).map { AfterMigrations(runtime.readiness, $0) }
    }
    var app = Application(
        responder: ServiceResponder(router.buildResponder()),
        server: server,
        configuration: .init(
            address: .hostname(config.host, port: config.port),
            serverName: "\(config.service.rawValue)-service",
            // #46: after a replica stops, its live streams' clients all reconnect at once (the
            // kernel caps this at net.core.somaxconn); 256 refused a burst of 10,000 streams.
            backlog: config.environment.int("LISTEN_BACKLOG", default: 4096)
        ),
        services: services,
        logger: runtime.logger
    )
    app.beforeServerStarts {
        try await runtime.migrations.run(on: runtime.db, logger: runtime.logger)
        // A new or restarted replica refuses ended sessions from its first request.
        do { _ = try await watcher.loadAll() } catch {
            runtime.logger.warning("session revocations not loaded before start", metadata: ["error": "\(error)"])
        }
        runtime.readiness.markMigrated()
    }
    return app
}

private func readiness(runtime: ServiceRuntime, context: ServiceRequestContext) async throws -> Response {
    var checks: [String: String] = [:]
    var ok = runtime.readiness.isMigrated
    checks["migrations"] = ok ? "applied" : "pending"
    do {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await runtime.db.query("SELECT 1", logger: runtime.logger) }
            group.addTask {
                try await Task.sleep(for: .seconds(2))
                throw CancellationError()
            }
            try await group.next()
            group.cancelAll()
        }
        checks["database"] = "ok"
    } catch {
        checks["database"] = "unreachable"
        ok = false
    }
    return try context.json(
        HealthStatus(status: ok ? "ready" : "not_ready", service: runtime.config.service.rawValue, checks: checks),
        status: ok ? .ok : .serviceUnavailable
    )
}

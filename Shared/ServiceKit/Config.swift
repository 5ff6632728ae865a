import Foundation
import Logging

/// Reads configuration from environment variables (12-factor), with defaults that make the
/// local stack run with no set-up. Every variable read here is listed in `.env.example`.
public struct EnvironmentVariables: Sendable {
    public var values: [String: String]

    public init(_ values: [String: String] = ProcessInfo.processInfo.environment) {
        self.values = values
    }

    public func string(_ key: String, default def: String) -> String {
        if let v = values[key], !v.isEmpty { return v }
        return def
    }

    public func optional(_ key: String) -> String? {
        guard let v = values[key], !v.isEmpty else { return nil }
        return v
    }

    public func int(_ key: String, default def: Int) -> Int {
        optional(key).flatMap(Int.init) ?? def
    }

    public func bool(_ key: String, default def: Bool) -> Bool {
        guard let v = optional(key)?.lowercased() else { return def }
        return ["1", "true", "yes", "on"].contains(v)
    }
}

public struct DatabaseConfig: Sendable {
    public var host: String
    public var port: Int
    /// PostgreSQL itself when `host` is a transaction-mode pooler (PgBouncer): what needs a
    /// session of its own (the change feed's LISTEN, the migrations' advisory lock) connects
    /// here. The same as `host`/`port` unless `DATABASE_DIRECT_HOST`/`_PORT` say otherwise.
    public var directHost: String? = nil
    public var directPort: Int? = nil
    public var database: String
    public var username: String
    public var password: String
    public var schema: String
    public var maxConnections: Int
    /// Server-side limits on every session of the service: a statement running longer, or a
    /// transaction left open and idle longer, is ended by PostgreSQL (an error for the request,
    /// its locks released) rather than holding rows and a pooled connection forever.
    public var statementTimeoutMilliseconds: Int = 30_000
    public var idleInTransactionTimeoutMilliseconds: Int = 60_000
    /// How long a request waits for a free pooled connection before it is answered 503.
    public var acquireTimeoutMilliseconds: Int = 10_000
}

/// Configuration shared by every service binary.
public struct ServiceConfig: Sendable {
    public var service: ServiceName
    public var host: String
    public var port: Int
    public var database: DatabaseConfig
    /// Base URL of each service, for service-to-service calls (`http://127.0.0.1:3001`...).
    public var serviceURLs: [ServiceName: String]
    /// The credential this service presents on `/internal/` calls to others.
    public var ownInternalCredential: String
    /// The credentials this service accepts on its own `/internal/` routes, per calling service.
    public var acceptedInternalCredentials: [ServiceName: String]
    /// How long a verified (app id, API key) pair is trusted without asking auth again.
    public var tenantCacheSeconds: Int
    /// How long a verified operator key is trusted before auth is asked again (a revoked key
    /// is refused by every replica within this time).
    public var operatorCacheSeconds: Int
    /// The operator credential on `/<prefix>/v1/admin/...`-style routes (with the tenant headers).
    public var adminToken: String
    /// How long auth's JWKS is cached before a refetch.
    public var jwksCacheSeconds: Int
    /// `AUTH_ISSUER`: the public URL of auth's API, the access tokens' `iss` (#32; the local
    /// stack's gateway by default). `AUTH_ACCEPTED_ISSUERS` (comma-separated) are accepted too,
    /// while tokens signed before a change of issuer live ("auth", the name tokens carried
    /// before, by default: remove it a week after upgrading).
    public var authIssuer: String
    public var acceptedIssuers: Set<String>
    public var logLevel: String
    /// `LOG_FORMAT`: `json` (the default, one object per line) or `text`.
    public var logFormat: LogFormat
    public var dataDirectory: String
    public var outboxPollMilliseconds: Int
    /// How often each replica reads the session revocations other replicas stored.
    public var sessionPollMilliseconds: Int
    public var jobPollMilliseconds: Int
    public var runWorkers: Bool
    /// Whose `X-Forwarded-For` is believed (`TRUSTED_PROXIES`, CIDRs; loopback by default). An
    /// unreadable value falls back to loopback: the safe side, nobody else can spoof an address.
    public var trustedProxies: TrustedProxies
    /// The level of the one access line per request (`ACCESS_LOG_LEVEL`, info by default).
    public var accessLogLevel: Logger.Level
    public var environment: EnvironmentVariables

    public init(service: ServiceName, environment env: EnvironmentVariables = EnvironmentVariables()) {
        self.service = service
        self.environment = env
        let p = service.envPrefix
        host = env.string("\(p)_HOST", default: env.string("HOST", default: "127.0.0.1"))
        port = env.int("\(p)_PORT", default: service.defaultPort)
        database = DatabaseConfig(
            host: env.string("DATABASE_HOST", default: "127.0.0.1"),
            port: env.int("DATABASE_PORT", default: 54329),
            directHost: env.string("DATABASE_DIRECT_HOST", default: env.string("DATABASE_HOST", default: "127.0.0.1")),
            directPort: env.int("DATABASE_DIRECT_PORT", default: env.int("DATABASE_PORT", default: 54329)),
            database: env.string("DATABASE_NAME", default: "app_backend"),
            username: env.string("\(p)_DATABASE_USER", default: service.databaseRole),
            password: env.string("\(p)_DATABASE_PASSWORD", default: "\(service.databaseRole)_local"),
            schema: service.schema,
            maxConnections: env.int("DATABASE_MAX_CONNECTIONS", default: 16),
            statementTimeoutMilliseconds: env.int("DATABASE_STATEMENT_TIMEOUT_MS", default: 30_000),
            idleInTransactionTimeoutMilliseconds: env.int("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS", default: 60_000),
            acquireTimeoutMilliseconds: env.int("DATABASE_ACQUIRE_TIMEOUT_MS", default: 10_000)
        )
        var urls: [ServiceName: String] = [:]
        for s in ServiceName.allCases {
            urls[s] = env.string("\(s.envPrefix)_URL", default: "http://127.0.0.1:\(env.int("\(s.envPrefix)_PORT", default: s.defaultPort))")
        }
        serviceURLs = urls
        ownInternalCredential = env.string("\(p)_INTERNAL_CREDENTIAL", default: "local-internal-\(service.rawValue)")
        var accepted: [ServiceName: String] = [:]
        for s in ServiceName.allCases where s != service {
            accepted[s] = env.string("\(s.envPrefix)_INTERNAL_CREDENTIAL", default: "local-internal-\(s.rawValue)")
        }
        acceptedInternalCredentials = accepted
        tenantCacheSeconds = env.int("TENANT_CACHE_SECONDS", default: 60)
        operatorCacheSeconds = env.int("OPERATOR_CACHE_SECONDS", default: 5)
        adminToken = env.string("ADMIN_API_TOKEN", default: "local-admin-token")
        jwksCacheSeconds = env.int("JWKS_CACHE_SECONDS", default: 300)
        authIssuer = env.string("AUTH_ISSUER", default: "http://localhost:8080/auth/v1")
        acceptedIssuers = Set(
            [authIssuer]
                + env.string("AUTH_ACCEPTED_ISSUERS", default: "auth").split(separator: ",")
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        )
        logLevel = env.string("LOG_LEVEL", default: "info")
        logFormat = LogFormat(rawValue: env.string("LOG_FORMAT", default: "json").lowercased()) ?? .json
        dataDirectory = env.string("DATA_DIR", default: ".data")
        outboxPollMilliseconds = env.int("OUTBOX_POLL_MS", default: 200)
        sessionPollMilliseconds = env.int("SESSION_POLL_MS", default: 1000)
        jobPollMilliseconds = env.int("JOB_POLL_MS", default: 250)
        runWorkers = env.bool("RUN_WORKERS", default: true)
        trustedProxies = env.optional("TRUSTED_PROXIES").flatMap(TrustedProxies.init(cidrs:)) ?? .loopback
        accessLogLevel = Logger.Level(rawValue: env.string("ACCESS_LOG_LEVEL", default: "info")) ?? .info
    }

    public func url(of service: ServiceName) -> String { serviceURLs[service]! }

    /// `ENVIRONMENT=local` (set by `make run` and `make test`): the built-in secrets are allowed.
    public var isLocal: Bool { environment.optional("ENVIRONMENT") == "local" }

    /// The secrets this service would run with that are empty or the built-in local value,
    /// by variable name; always empty in the local stack.
    public func unsafeSecrets() -> [String] {
        guard !isLocal else { return [] }
        var checks: [(String, String)] = [
            ("ADMIN_API_TOKEN", "local-admin-token"),
            ("\(service.envPrefix)_DATABASE_PASSWORD", "\(service.databaseRole)_local"),
        ]
        for s in ServiceName.allCases { checks.append(("\(s.envPrefix)_INTERNAL_CREDENTIAL", "local-internal-\(s.rawValue)")) }
        if service == .offline { checks.append(("SYNC_SIGNING_KEY", "local-sync-signing-key")) }
        // The key sealing the apps' store credentials: without it they would be sealed with the local key.
        if service == .subscription { checks.append(("SUBSCRIPTION_DATA_KEY", "")) }
        // Auth: a generated signing key would differ per replica (and be lost with its volume),
        // and a data key derived from it would change at each rotation.
        if service == .auth { checks += [("AUTH_SIGNING_KEY", ""), ("AUTH_DATA_KEY", "")] }
        return checks.compactMap { name, builtIn in
            let value = environment.optional(name) ?? ""
            return value.isEmpty || value == builtIn ? name : nil
        }
    }
}

/// Configuration or packaging that makes the service unable to start.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

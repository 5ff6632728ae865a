import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceLifecycle
import WireTypes

/// The tables of the versioned facts, in every service's schema (included by each service's
/// migration list at its own position: `-- include platform: user_facts`).
extension PlatformMigrations {
    public static let userFacts = """
        -- Versions this service assigns to the facts it owns about a user (one counter per user,
        -- bumped in the transaction that changes a fact).
        CREATE TABLE fact_counters (
            app_id uuid NOT NULL,
            user_id uuid NOT NULL,
            version bigint NOT NULL,
            PRIMARY KEY (app_id, user_id)
        );
        -- Per user and fact, the newest version (the owner's counter) applied here.
        CREATE TABLE fact_versions (
            app_id uuid NOT NULL,
            user_id uuid NOT NULL,
            fact text NOT NULL,
            version bigint NOT NULL,
            PRIMARY KEY (app_id, user_id, fact)
        );
        -- What auth said about the user's sessions. 'erased' is final; the row holds no personal
        -- data and is purged once every token it refuses has expired.
        CREATE TABLE session_state (
            app_id uuid NOT NULL,
            user_id uuid NOT NULL,
            version bigint NOT NULL,
            session_epoch integer NOT NULL,
            state text NOT NULL CHECK (state IN ('active', 'suspended', 'erased')),
            reason text,
            changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (app_id, user_id)
        );
        CREATE INDEX session_state_changed ON session_state (changed_at);
        -- Single sessions (device token families) that ended, kept while their tokens live.
        CREATE TABLE revoked_sessions (
            session_id uuid PRIMARY KEY,
            app_id uuid NOT NULL,
            user_id uuid NOT NULL,
            revoked_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            expires_at timestamptz NOT NULL
        );
        CREATE INDEX revoked_sessions_changed ON revoked_sessions (revoked_at);
        CREATE INDEX revoked_sessions_user ON revoked_sessions (app_id, user_id);
        """

    /// An idempotency key remembers the request it was first used for.
    public static let idempotencyFingerprint = """
        ALTER TABLE idempotency_keys ADD COLUMN request_fingerprint text;
        """

    /// Migrations a service's `Migrations/` folder includes by name.
    static let included: [String: String] = [
        "user_facts": userFacts, "idempotency_fingerprint": idempotencyFingerprint,
        "request_trace": requestTrace, "trace_context": traceContext, "change_feed": changeFeed,
        "entitlements": entitlements, "outbox_wake": Outbox.wakeMigration,
        "backlog_indexes": backlogIndexes,
        "operator_audit": OperatorAuditStore.migration, "retention_indexes": retentionIndexes,
        "erasure_fence": ErasureFence.migration,
    ]

    /// #19: each retention rule's predicate served by an index (`RetentionRule.platform`), so a
    /// purge reads the rows that are due, not the table.
    static let retentionIndexes = """
        CREATE INDEX outbox_delivered ON outbox (delivered_at) WHERE status = 'delivered';
        CREATE INDEX jobs_done ON jobs (finished_at) WHERE status = 'done';
        CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
        CREATE INDEX rate_limits_window ON rate_limits (window_start);
        CREATE INDEX operator_audit_at ON operator_audit (at);
        """

    /// The metrics' backlog reads (`BacklogStore`) count dead rows by destination and kind:
    /// indexed, so a scrape never reads the delivered and finished history.
    static let backlogIndexes = """
        CREATE INDEX outbox_dead ON outbox (target_service) WHERE status = 'dead';
        CREATE INDEX jobs_backlog ON jobs (kind) WHERE status IN ('pending', 'running', 'dead');
        """

    /// Trigger functions that announce a row's change on the schema's change feed (NOTIFY on
    /// `<schema>_changes`, delivered at commit): no write path can forget to. `announce_change`
    /// names the row's tenant and user (both users when a row moves between them);
    /// `announce_tenant_change` the tenant only. The trigger's argument is the topic.
    static let changeFeed = """
        CREATE FUNCTION announce_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'DELETE' THEN
                PERFORM pg_notify(TG_TABLE_SCHEMA || '_changes', TG_ARGV[0] || '|' || NEW.app_id::text || '|' || COALESCE(NEW.user_id::text, ''));
            END IF;
            IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND (NEW.user_id IS DISTINCT FROM OLD.user_id OR NEW.app_id <> OLD.app_id)) THEN
                PERFORM pg_notify(TG_TABLE_SCHEMA || '_changes', TG_ARGV[0] || '|' || OLD.app_id::text || '|' || COALESCE(OLD.user_id::text, ''));
            END IF;
            RETURN NULL;
        END $$;
        CREATE FUNCTION announce_tenant_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'DELETE' THEN
                PERFORM pg_notify(TG_TABLE_SCHEMA || '_changes', TG_ARGV[0] || '|' || NEW.app_id::text || '|');
            END IF;
            IF TG_OP <> 'INSERT' THEN
                PERFORM pg_notify(TG_TABLE_SCHEMA || '_changes', TG_ARGV[0] || '|' || OLD.app_id::text || '|');
            END IF;
            RETURN NULL;
        END $$;
        """

    /// The request that wrote an outbox row or queued a job, carried to where the work runs.
    static let requestTrace = """
        ALTER TABLE outbox ADD COLUMN request_id text;
        ALTER TABLE jobs ADD COLUMN request_id text;
        """

    /// #49: the W3C `traceparent` of the transaction that wrote an outbox row or a job, so that
    /// the later delivery or run is a span linked to it.
    static let traceContext = """
        ALTER TABLE outbox ADD COLUMN traceparent text;
        ALTER TABLE jobs ADD COLUMN traceparent text;
        """
}

/// All SQL of the versioned facts and session revocations.
public struct UserFactStore: Sendable {
    /// How long a revocation must be remembered: the longest an access token lives, and a day.
    public static let retention: TimeInterval = 8 * 24 * 3600
    public let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    /// The next version of a fact this service owns about the user (in the caller's transaction).
    public func nextVersion(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Int64 {
        let rows = try await conn.run(
            """
            INSERT INTO fact_counters (app_id, user_id, version) VALUES (\(app), \(user), 1)
            ON CONFLICT (app_id, user_id) DO UPDATE SET version = fact_counters.version + 1
            RETURNING version
            """,
            logger: logger
        )
        for try await v in rows.decode(Int64.self) { return v }
        throw AppError.unavailable
    }

    /// Records `version` of `fact` if it is newer than the one held (the row stays locked until
    /// the caller's transaction ends, so competing deliveries apply in version order). A user
    /// already erased here takes no fact.
    public func advance(app: UUID, user: UUID, fact: String, version: Int64, on conn: PostgresConnection) async throws -> FactOutcome {
        if try await isErased(app: app, user: user, on: conn) { return FactOutcome(applied: false, reason: "erased") }
        let rows = try await conn.run(
            """
            INSERT INTO fact_versions (app_id, user_id, fact, version) VALUES (\(app), \(user), \(fact), \(version))
            ON CONFLICT (app_id, user_id, fact) DO UPDATE SET version = EXCLUDED.version
            WHERE fact_versions.version < EXCLUDED.version
            RETURNING version
            """,
            logger: logger
        )
        for try await _ in rows { return FactOutcome(applied: true) }
        return FactOutcome(applied: false, reason: "stale_version")
    }

    /// The version of `fact` held here (nil before the first).
    public func version(app: UUID, user: UUID, fact: String, on conn: PostgresConnection) async throws -> Int64? {
        for try await v in try await conn.run(
            """
            SELECT version FROM fact_versions WHERE app_id = \(app) AND user_id = \(user) AND fact = \(fact)
            """,
            logger: logger
        ).decode(Int64.self) { return v }
        return nil
    }

    public func isErased(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Bool {
        for try await _ in try await conn.run(
            """
            SELECT 1 FROM session_state WHERE app_id = \(app) AND user_id = \(user) AND state = 'erased'
            """,
            logger: logger
        ) { return true }
        return false
    }

    /// Stores a session fact; returns whether it changed anything (same rules as
    /// `SessionRevocations.apply`).
    @discardableResult
    public func record(_ fact: SessionFact, on conn: PostgresConnection) async throws -> Bool {
        var changed = false
        if let sid = fact.revokedSessionID {
            for try await _ in try await conn.run(
                """
                INSERT INTO revoked_sessions (session_id, app_id, user_id, expires_at)
                VALUES (\(sid), \(fact.appID), \(fact.userID), clock_timestamp() + make_interval(secs => \(Self.retention)))
                ON CONFLICT (session_id) DO NOTHING RETURNING 1
                """,
                logger: logger
            ) { changed = true }
        }
        for try await _ in try await conn.run(
            """
            INSERT INTO session_state (app_id, user_id, version, session_epoch, state, reason)
            VALUES (\(fact.appID), \(fact.userID), \(fact.version), \(fact.sessionEpoch), \(fact.state.rawValue), \(fact.reason))
            ON CONFLICT (app_id, user_id) DO UPDATE SET version = EXCLUDED.version,
                session_epoch = GREATEST(session_state.session_epoch, EXCLUDED.session_epoch),
                state = EXCLUDED.state, reason = EXCLUDED.reason, changed_at = clock_timestamp()
            WHERE session_state.state <> 'erased' AND (session_state.version < EXCLUDED.version OR EXCLUDED.state = 'erased')
            RETURNING 1
            """,
            logger: logger
        ) { changed = true }
        return changed
    }

    /// Drops what this service knew about the user's fact versions (at erasure; the erased
    /// session state refuses anything later).
    public func forget(app: UUID, user: UUID, on conn: PostgresConnection) async throws {
        try await conn.run("DELETE FROM fact_versions WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
        try await conn.run("DELETE FROM fact_counters WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
        try await conn.run("DELETE FROM revoked_sessions WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
    }

    /// The session watcher's polls (periodic queries: see `PeriodicQuery`).
    static func sessionStatesQuery(since: Date) -> PostgresQuery {
        "SELECT app_id, user_id, version, session_epoch, state, reason FROM session_state WHERE changed_at > \(since)"
    }
    static func revokedSessionsQuery(since: Date) -> PostgresQuery {
        "SELECT session_id, app_id, user_id FROM revoked_sessions WHERE revoked_at > \(since) AND expires_at > clock_timestamp()"
    }

    /// Session facts changed after `since` (all of them when nil), and the database's clock.
    public func changes(since: Date?, on conn: PostgresConnection) async throws -> (facts: [SessionFact], now: Date) {
        var facts: [SessionFact] = []
        let since = since ?? Date(timeIntervalSince1970: 0)
        for try await r in try await conn.run(Self.sessionStatesQuery(since: since), logger: logger)
            .decode((UUID, UUID, Int64, Int, String, String?).self)
        {
            facts.append(
                SessionFact(
                    appID: r.0,
                    userID: r.1,
                    version: r.2,
                    sessionEpoch: r.3,
                    state: SessionFact.State(rawValue: r.4) ?? .active,
                    reason: r.5
                )
            )
        }
        for try await r in try await conn.run(Self.revokedSessionsQuery(since: since), logger: logger).decode((UUID, UUID, UUID).self) {
            // version 0 never moves a user's state: only the session is ended.
            facts.append(SessionFact(appID: r.1, userID: r.2, version: 0, sessionEpoch: 0, state: .active, revokedSessionID: r.0))
        }
        var now = Date()
        for try await t in try await conn.run("SELECT clock_timestamp()", logger: logger).decode(Date.self) { now = t }
        return (facts, now)
    }

    /// Forgets revocations no live token can need any more.
    public func purgeExpired(on conn: PostgresConnection) async throws {
        try await conn.run("DELETE FROM revoked_sessions WHERE expires_at < clock_timestamp()", logger: logger)
        // Eight days after the last change every token it could refuse has expired: an erased
        // user's marker goes, and so does an epoch (tokens of later epochs need no row). A
        // suspension stays until it is lifted.
        try await conn.run(
            """
            DELETE FROM session_state WHERE state IN ('erased', 'active') AND changed_at < clock_timestamp() - make_interval(secs => \(Self.retention))
            """,
            logger: logger
        )
    }
}

/// Keeps this process's `SessionRegistry` in step with its schema: a full load at start (a new
/// or restarted replica refuses the same tokens from its first request), then what changed,
/// every `interval`; a full reload now and then drops expired revocations from memory. The
/// database being away only delays learning: what is known keeps being enforced.
public struct SessionWatcher: Service {
    let registry: SessionRegistry
    let db: DatabasePool
    let store: UserFactStore
    let interval: Duration
    let logger: Logger
    private let throttle = LogThrottle()

    /// Rows committed late (a transaction that started before the last poll) are read again:
    /// applying a fact twice changes nothing.
    static let overlap: TimeInterval = 15
    static let fullReloadEvery = 600

    public init(registry: SessionRegistry, db: DatabasePool, interval: Duration, logger: Logger) {
        self.registry = registry
        self.db = db
        self.store = UserFactStore(logger: logger)
        self.interval = interval
        self.logger = logger
    }

    /// One full load (also what the server does before it answers its first request).
    public func loadAll() async throws -> Date {
        let (facts, now) = try await db.withConnection { try await store.changes(since: nil, on: $0) }
        registry.replace(with: facts)
        return now
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown { await poll() }
    }

    private func poll() async {
        var since: Date?
        var polls = 0
        while !Task.isCancelled {
            do {
                if let last = since, polls % Self.fullReloadEvery != 0 {
                    let (facts, now) = try await db.withConnection {
                        try await store.changes(since: last.addingTimeInterval(-Self.overlap), on: $0)
                    }
                    registry.apply(facts)
                    since = now
                } else {
                    if polls > 0 { try await db.withConnection { try await store.purgeExpired(on: $0) } }
                    since = try await loadAll()
                }
            } catch {
                throttle.warning(logger, "session revocations not refreshed", metadata: ["error": "\(error)"])
            }
            polls += 1
            try? await Task.sleep(for: interval)
        }
    }
}

/// `PUT /internal/users/{id}/sessions?app_id=`: auth says a session (or all of a user's) ended,
/// or the user was suspended, reinstated or erased. Stored in this service's schema and applied
/// to this process at once; the other replicas read it within their poll interval.
struct SessionFactsController: Sendable {
    let registry: SessionRegistry
    let db: DatabasePool
    let store: UserFactStore
    let logger: Logger

    func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.on(InternalRoutes.sessions) { request, context in
            let fact = try await request.decodeFact(SessionFact.self, from: .auth, context: context)
            guard fact.sessionEpoch >= 0 else { throw AppError.validation("session_epoch", "session_epoch must not be negative") }
            if let reason = fact.reason, reason.utf8.count > 500 { throw AppError.validation("reason", "reason is at most 500 bytes") }
            let changed = try await db.withTransaction(logger: logger) { try await store.record(fact, on: $0) }
            registry.apply([fact])
            return try context.json(FactOutcome(applied: changed, reason: changed ? nil : "stale_version"))
        }
    }
}

extension Request {
    /// A versioned fact pushed by its owner to `/internal/users/{id}/...?app_id=`: only the owner
    /// may tell it, about the user and tenant the path names, with a positive version.
    public func decodeFact<Fact: VersionedUserFact>(_ type: Fact.Type, from owner: ServiceName, context: ServiceRequestContext) async throws -> Fact {
        guard context.callingService == owner else {
            throw AppError(.forbidden, "forbidden", "Only \(owner.rawValue) tells this fact")
        }
        let (user, app) = try internalUserAndApp(context)
        let fact = try await decodeJSON(as: Fact.self, context: context)
        guard fact.userID == user, fact.appID == app else { throw AppError.validation("user_id", "body and path name different users") }
        guard fact.version > 0 else { throw AppError.validation("version", "version must be a positive integer") }
        return fact
    }
}

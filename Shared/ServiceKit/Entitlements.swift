import Foundation
import Hummingbird
import Logging
import PostgresNIO
import Prometheus
import WireTypes

/// Whether a user is premium now, as subscription says (ads and offline ask it).
public protocol EntitlementSource: Sendable {
    func entitlement(app: UUID, user: UUID) async throws -> Entitlement
}

extension PlatformMigrations {
    /// What subscription last told this service about a user's access (`EntitlementFact`), one
    /// row per user, the newest version only; no row means never premium. Every change is
    /// announced on the change feed, so every replica's cached answer drops at once.
    static let entitlements = """
        CREATE TABLE entitlement_state (
            app_id uuid NOT NULL,
            user_id uuid NOT NULL,
            version bigint NOT NULL,
            is_premium boolean NOT NULL,
            valid_until timestamptz,
            updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (app_id, user_id)
        );
        CREATE TRIGGER entitlement_state_announce AFTER INSERT OR UPDATE OR DELETE ON entitlement_state
            FOR EACH ROW EXECUTE FUNCTION announce_change('entitlement');
        """
}

/// A user's access as last told: premium until `validUntil`, whichever fact ends it first.
public struct EntitlementState: Sendable, Equatable {
    public var isPremium: Bool
    public var validUntil: Date?
    public var version: Int64
    public init(isPremium: Bool, validUntil: Date?, version: Int64) {
        self.isPremium = isPremium
        self.validUntil = validUntil
        self.version = version
    }

    /// Premium at `now`: told so, and the period (or grace period) it was told about not over.
    /// Nothing told is free: subscription tells every user who ever gains access.
    public static func entitlement(_ state: EntitlementState?, at now: Date) -> Entitlement {
        let premium = state.map { $0.isPremium && ($0.validUntil.map { $0 > now } ?? true) } ?? false
        return Entitlement(isPremium: premium, status: premium ? "premium" : "free", features: .null)
    }
}

/// All SQL of the pushed entitlements (in the receiving service's schema).
public struct EntitlementStore: Sendable {
    let logger: Logger
    let facts: UserFactStore
    public init(logger: Logger) {
        self.logger = logger
        self.facts = UserFactStore(logger: logger)
    }

    /// Keeps `fact` if it is newer than the one held; an erased user takes no fact.
    public func record(_ fact: EntitlementFact, on conn: PostgresConnection) async throws -> FactOutcome {
        if try await facts.isErased(app: fact.appID, user: fact.userID, on: conn) { return FactOutcome(applied: false, reason: "erased") }
        let rows = try await conn.run(
            """
            INSERT INTO entitlement_state (app_id, user_id, version, is_premium, valid_until)
            VALUES (\(fact.appID), \(fact.userID), \(fact.version), \(fact.isPremium), \(fact.validUntil))
            ON CONFLICT (app_id, user_id) DO UPDATE
                SET version = EXCLUDED.version, is_premium = EXCLUDED.is_premium, valid_until = EXCLUDED.valid_until,
                    updated_at = clock_timestamp()
                WHERE entitlement_state.version < EXCLUDED.version
            RETURNING 1
            """,
            logger: logger
        )
        for try await _ in rows { return FactOutcome(applied: true) }
        return FactOutcome(applied: false, reason: "stale_version")
    }

    public func current(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> EntitlementState? {
        let rows = try await conn.run(
            """
            SELECT is_premium, valid_until, version FROM entitlement_state WHERE app_id = \(app) AND user_id = \(user)
            """,
            logger: logger
        )
        for try await (premium, until, version) in rows.decode((Bool, Date?, Int64).self) {
            return EntitlementState(isPremium: premium, validUntil: until, version: version)
        }
        return nil
    }

    /// The user's rights: what this service was told about their access, exported and erased.
    public var userDataSection: UserDataSection {
        let q = UserDataQueries(logger: logger)
        return UserDataSection(
            name: "entitlement",
            export: { user, app, conn in
                try await q.rows(
                    """
                    SELECT row_to_json(e)::text FROM (SELECT is_premium, valid_until, version, updated_at FROM entitlement_state
                    WHERE app_id = \(app) AND user_id = \(user)) e
                    """,
                    conn
                )
            },
            delete: { user, app, conn in
                try await q.count("DELETE FROM entitlement_state WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", conn)
            }
        )
    }
}

/// The entitlement as subscription pushed it to this service: read from this service's own
/// schema (no call to subscription on a request), kept per user in memory until a change of
/// the row is announced.
public final class PushedEntitlements: EntitlementSource {
    let db: DatabasePool
    let store: EntitlementStore
    let clock: any WallClock
    let cache: ReadCache<UserCacheKey, Held>
    struct Held: Sendable { let state: EntitlementState? }

    public init(runtime: ServiceRuntime) {
        db = runtime.db
        store = EntitlementStore(logger: runtime.logger)
        clock = runtime.clock
        let env = runtime.config.environment
        cache = ReadCache(
            name: "entitlement",
            capacity: env.int("ENTITLEMENT_CACHE_ENTRIES", default: 50_000),
            ttl: .seconds(min(env.int("ENTITLEMENT_CACHE_SECONDS", default: 300), 300)),
            feed: runtime.changes,
            topics: ["entitlement"],
            metrics: runtime.metrics,
            clock: runtime.clock
        )
    }

    public func entitlement(app: UUID, user: UUID) async throws -> Entitlement {
        let held = try await cache.value(for: UserCacheKey(app: app, user: user)) {
            Held(state: try await db.withConnection { try await store.current(app: app, user: user, on: $0) })
        }
        // The period's end is checked on every read: a held answer never outlives it.
        return EntitlementState.entitlement(held.state, at: clock.now())
    }

    /// `PUT /internal/users/{id}/entitlement?app_id=`: subscription's facts (through its outbox).
    public func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.on(InternalRoutes.pushEntitlement) { [db, store] request, context in
            let fact = try await request.decodeFact(EntitlementFact.self, from: .subscription, context: context)
            let outcome = try await db.withTransaction(logger: store.logger) { try await store.record(fact, on: $0) }
            return try context.json(outcome)
        }
    }
}

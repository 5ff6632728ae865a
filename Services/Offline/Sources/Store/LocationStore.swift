import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

/// `user_consents` (auth's geolocation consent, as its versions arrive) and `user_locations`.
struct LocationStore: Sendable {
    let logger: Logger
    /// Change topics, announced by the triggers of migration 0010: a user's positions, a tenant's places.
    static let locationTopic = "location", placesTopic = "places"
    var facts: UserFactStore { UserFactStore(logger: logger) }

    /// Applies auth's geolocation consent if its version is newer than the one held; a
    /// withdrawal deletes the user's locations in the same transaction (seed 11a).
    func applyGeolocationConsent(_ fact: ConsentFact, on conn: PostgresConnection) async throws -> FactOutcome {
        let outcome = try await facts.advance(app: fact.appID, user: fact.userID, fact: "consent.geolocation", version: fact.version, on: conn)
        guard outcome.applied else { return outcome }
        try await conn.run(
            """
            INSERT INTO user_consents (app_id, user_id, geolocation, changed_at) VALUES (\(fact.appID), \(fact.userID), \(fact.value), now())
            ON CONFLICT (app_id, user_id) DO UPDATE SET geolocation = EXCLUDED.geolocation, changed_at = EXCLUDED.changed_at
            """,
            logger: logger
        )
        if !fact.value { _ = try await deleteLocations(app: fact.appID, user: fact.userID, on: conn) }
        return outcome
    }

    /// The consent held here, locked against a concurrent withdrawal until the caller's
    /// transaction ends (nil: auth never told this service).
    func geolocationConsent(app: UUID, user: UUID, lock: Bool, on conn: PostgresConnection) async throws -> Bool? {
        let rows =
            lock
            ? try await conn.run("SELECT geolocation FROM user_consents WHERE app_id = \(app) AND user_id = \(user) FOR SHARE", logger: logger)
            : try await conn.run("SELECT geolocation FROM user_consents WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
        for try await g in rows.decode(Bool.self) { return g }
        return nil
    }

    func deleteLocations(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Int {
        let n = try await conn.run("DELETE FROM user_locations WHERE app_id = \(app) AND user_id = \(user) RETURNING 1", logger: logger).count()
        return n
    }

    /// One update per 15 minutes.
    func rateCheck(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws {
        for try await last in try await conn.run(
            """
            SELECT max(created_at) FROM user_locations WHERE app_id = \(app) AND user_id = \(user) HAVING count(*) > 0
            """,
            logger: logger
        ).decode(Date.self) {
            let wait = Int((last.addingTimeInterval(OfflineRules.locationInterval).timeIntervalSince(now)).rounded(.up))
            if wait > 0 { throw AppError.rateLimited(retryAfter: wait) }
        }
    }

    /// Serialises one user's location updates.
    func lockUser(app: UUID, user: UUID, on conn: PostgresConnection) async throws {
        try await conn.run("SELECT pg_advisory_xact_lock(hashtextextended(\("location:\(app):\(user)"), 0))", logger: logger)
    }

    /// Positions older than `cutoff` lose their user and their precision (seed: kept 30 days).
    /// In batches of `batch` rows, each its own statement, skipping rows a request holds.
    func anonymize(olderThan cutoff: Date, batch: Int = 1000, on conn: PostgresConnection) async throws -> Int {
        var total = 0
        while true {
            let n = try await conn.run(Self.anonymizeQuery(olderThan: cutoff, batch: batch), logger: logger).count()
            total += n
            if n < batch { return total }
        }
    }

    /// One batch of the anonymisation (a periodic query).
    static func anonymizeQuery(olderThan cutoff: Date, batch: Int) -> PostgresQuery {
        """
        UPDATE user_locations SET user_id = NULL, anonymized = true,
               location = ST_SnapToGrid(location::geometry, 0.1)::geography, city = NULL
        WHERE ctid = ANY(ARRAY(SELECT ctid FROM user_locations WHERE NOT anonymized AND created_at < \(cutoff)
                               LIMIT \(batch) FOR UPDATE SKIP LOCKED))
        RETURNING 1
        """
    }

    struct LocationContent {
        var id: String, contentType: String, title: String, metadata: String, latitude: Double, longitude: Double
        var active: Bool, availableUntil: Date?
    }

    /// Adds or replaces one place of the tenant's location-based content.
    func upsertPlace(app: UUID, _ p: LocationContent, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO location_based_content (app_id, id, content_type, title, metadata, location, active, available_until)
            VALUES (\(app), \(p.id), \(p.contentType), \(p.title), \(p.metadata)::jsonb,
                    ST_SetSRID(ST_MakePoint(\(p.longitude), \(p.latitude)), 4326)::geography, \(p.active), \(p.availableUntil))
            ON CONFLICT (app_id, id) DO UPDATE SET content_type = EXCLUDED.content_type, title = EXCLUDED.title, metadata = EXCLUDED.metadata,
                location = EXCLUDED.location, active = EXCLUDED.active, available_until = EXCLUDED.available_until
            """,
            logger: logger
        )
    }

    /// A demo place, kept as it is if it exists.
    func insertPlaceIfAbsent(app: UUID, _ p: LocationContent, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO location_based_content (app_id, id, content_type, title, metadata, location, active, available_until)
            VALUES (\(app), \(p.id), \(p.contentType), \(p.title), \(p.metadata)::jsonb,
                    ST_SetSRID(ST_MakePoint(\(p.longitude), \(p.latitude)), 4326)::geography, \(p.active), \(p.availableUntil))
            ON CONFLICT (app_id, id) DO NOTHING
            """,
            logger: logger
        )
    }

    struct NewLocation {
        var id: UUID, latitude: Double, longitude: Double, accuracy: Double, altitude: Double?, source: String
        var place: Place?, at: Date
    }

    func insert(app: UUID, user: UUID, _ l: NewLocation, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO user_locations (id, app_id, user_id, location, accuracy, altitude, source, country_code, country, city, created_at)
            VALUES (\(l.id), \(app), \(user), ST_SetSRID(ST_MakePoint(\(l.longitude), \(l.latitude)), 4326)::geography, \(l.accuracy), \(l.altitude),
                    \(l.source), \(l.place?.countryCode), \(l.place?.country), \(l.place?.city), \(l.at))
            """,
            logger: logger
        )
    }

    // MARK: nearby content (UC-OFFLINE-3.4)

    /// The user's latest position (latitude, longitude).
    func lastPoint(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> (Double, Double)? {
        for try await p in try await conn.run(
            """
            SELECT ST_Y(location::geometry), ST_X(location::geometry) FROM user_locations WHERE app_id = \(app) AND user_id = \(user)
            ORDER BY created_at DESC LIMIT 1
            """,
            logger: logger
        ).decode((Double, Double).self) { return p }
        return nil
    }

    struct NearbyContent: Sendable { var id: String, type: String, title: String, distanceMeters: Double, metadata: String, availableUntil: Date? }

    /// The nearest 20 within the radius, ordered by the distance reported (WGS84, the
    /// spheroid), found through the GiST index: the index's nearest-neighbour order (`<->`, a
    /// sphere) gives 20 candidates; every point whose spheroid distance is below the farthest of
    /// them lies within 1 % more on the sphere (the two differ by under 0.6 %), so the final
    /// set is taken from that ball and ordered exactly. A few dozen distances, not one per point
    /// of the radius.
    static func nearbyQuery(app: UUID, lat: Double, lon: Double, radiusKm: Double, now: Date) -> PostgresQuery {
        // The point is written out in each place (not a CTE): a constant lets the planner walk
        // the GiST index in distance order for the candidates.
        """
        WITH knn AS (
            SELECT ST_Distance(location, ST_SetSRID(ST_MakePoint(\(lon), \(lat)), 4326)::geography) AS d FROM location_based_content
            WHERE app_id = \(app) AND active AND (available_until IS NULL OR available_until > \(now))
              AND ST_DWithin(location, ST_SetSRID(ST_MakePoint(\(lon), \(lat)), 4326)::geography, \(radiusKm * 1010), false)
            ORDER BY location <-> ST_SetSRID(ST_MakePoint(\(lon), \(lat)), 4326)::geography LIMIT \(OfflineRules.nearbyLimit)),
        bound AS (SELECT LEAST(COALESCE(max(d), 0), \(radiusKm * 1000)) * 1.01 AS r FROM knn)
        SELECT c.id, c.content_type, c.title, ST_Distance(c.location, ST_SetSRID(ST_MakePoint(\(lon), \(lat)), 4326)::geography) AS d,
               c.metadata::text, c.available_until
        FROM location_based_content c, bound
        WHERE c.app_id = \(app) AND c.active AND (c.available_until IS NULL OR c.available_until > \(now))
          AND ST_DWithin(c.location, ST_SetSRID(ST_MakePoint(\(lon), \(lat)), 4326)::geography, bound.r, false)
          AND ST_Distance(c.location, ST_SetSRID(ST_MakePoint(\(lon), \(lat)), 4326)::geography) <= \(radiusKm * 1000)
        ORDER BY d, c.id LIMIT \(OfflineRules.nearbyLimit)
        """
    }

    func nearby(app: UUID, lat: Double, lon: Double, radiusKm: Double, now: Date, on conn: PostgresConnection) async throws -> [NearbyContent] {
        var out: [NearbyContent] = []
        for try await r in try await conn.run(Self.nearbyQuery(app: app, lat: lat, lon: lon, radiusKm: radiusKm, now: now), logger: logger)
            .decode((String, String, String, Double, String, Date?).self)
        {
            out.append(NearbyContent(id: r.0, type: r.1, title: r.2, distanceMeters: r.3, metadata: r.4, availableUntil: r.5))
        }
        return out
    }
}

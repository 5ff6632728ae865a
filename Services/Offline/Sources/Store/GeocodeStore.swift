import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit

/// The geocoder's memory, shared by every replica: places cached on coordinates rounded to
/// 0.01°, and the deployment's single one-second request slot (`geocoder_slot`).
struct GeocodeStore: Sendable {
    let db: DatabasePool
    let logger: Logger

    /// A place fetched after `since` for the rounded point.
    func cached(latKey: Double, lonKey: Double, since: Date) async throws -> Place? {
        for try await r in try await db.query(
            """
            SELECT country_code, country, city FROM geocode_cache
            WHERE lat_key = \(latKey)::numeric(6,2) AND lon_key = \(lonKey)::numeric(6,2) AND fetched_at > \(since)
            """,
            logger: logger
        ).decode((String?, String?, String?).self) {
            return Place(countryCode: r.0, country: r.1, city: r.2)
        }
        return nil
    }

    /// Takes the next free one-second slot for the deployment; the seconds to wait until it starts.
    func takeSlot() async throws -> Double {
        var wait = 0.0
        for try await w in try await db.query(
            """
            UPDATE geocoder_slot SET next_at = GREATEST(next_at, clock_timestamp()) + interval '1 second' WHERE id = 1
            RETURNING extract(epoch FROM (next_at - interval '1 second') - clock_timestamp())::float8
            """,
            logger: logger
        ).decode(Double.self) { wait = max(0, w) }
        return wait
    }

    func save(_ place: Place, latKey: Double, lonKey: Double, now: Date) async throws {
        try await db.query(
            """
            INSERT INTO geocode_cache (lat_key, lon_key, country_code, country, city, fetched_at)
            VALUES (\(latKey)::numeric(6,2), \(lonKey)::numeric(6,2), \(place.countryCode), \(place.country), \(place.city), \(now))
            ON CONFLICT (lat_key, lon_key) DO UPDATE SET country_code = EXCLUDED.country_code, country = EXCLUDED.country,
                city = EXCLUDED.city, fetched_at = EXCLUDED.fetched_at
            """,
            logger: logger
        )
    }
}

import Foundation
import Logging
import PostgresNIO
import ServiceKit

struct Place: Codable, Sendable, Equatable {
    var countryCode: String?
    var country: String?
    var city: String?
    enum CodingKeys: String, CodingKey { case countryCode = "country_code", country, city }
}

/// Reverse geocoding through a Nominatim-compatible server (`GEOCODER_URL`): an identifying
/// User-Agent, one request per second for the whole deployment (a slot taken in Postgres, so
/// replicas share it), results cached 24 h on coordinates rounded to 0.01°. Any failure
/// answers nil (seed 10a: the raw point is stored without a place).
struct Geocoder: Sendable {
    let baseURL: String?
    let userAgent: String
    let http: CurlHTTPClient
    let db: DatabasePool
    let clock: any WallClock
    let logger: Logger
    /// Longer than this in line for a slot, the request is not made (the answer would come too late).
    var maxWait: Duration = .seconds(3)

    static func key(_ x: Double) -> Double { (x * 100).rounded() / 100 }

    func place(latitude: Double, longitude: Double) async -> Place? {
        guard let baseURL else { return nil }
        let (lat, lon) = (Self.key(latitude), Self.key(longitude))
        let now = clock.now()
        do {
            for try await r in try await db.query("""
                SELECT country_code, country, city FROM geocode_cache
                WHERE lat_key = \(lat)::numeric(6,2) AND lon_key = \(lon)::numeric(6,2) AND fetched_at > \(now.addingTimeInterval(-86400))
                """, logger: logger).decode((String?, String?, String?).self) {
                return Place(countryCode: r.0, country: r.1, city: r.2)
            }
            // Take the next free one-second slot for the deployment.
            var wait = 0.0
            for try await w in try await db.query("""
                UPDATE geocoder_slot SET next_at = GREATEST(next_at, clock_timestamp()) + interval '1 second' WHERE id = 1
                RETURNING extract(epoch FROM (next_at - interval '1 second') - clock_timestamp())::float8
                """, logger: logger).decode(Double.self) { wait = max(0, w) }
            if wait > Double(maxWait.components.seconds) { return nil }
            if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) }
            let url = "\(baseURL)/reverse?format=jsonv2&lat=\(latitude)&lon=\(longitude)&zoom=10&addressdetails=1"
            let response = try await http.send(HTTPRequest(method: "GET", url: url, headers: [("User-Agent", userAgent), ("Accept", "application/json")],
                                                           timeout: .seconds(3)))
            guard response.isSuccess, let obj = try JSONSerialization.jsonObject(with: response.body) as? [String: Any],
                  let address = obj["address"] as? [String: Any] else { return nil }
            let place = Place(countryCode: (address["country_code"] as? String)?.uppercased(), country: address["country"] as? String,
                              city: (address["city"] ?? address["town"] ?? address["village"] ?? address["municipality"]) as? String)
            try await db.query("""
                INSERT INTO geocode_cache (lat_key, lon_key, country_code, country, city, fetched_at)
                VALUES (\(lat)::numeric(6,2), \(lon)::numeric(6,2), \(place.countryCode), \(place.country), \(place.city), \(now))
                ON CONFLICT (lat_key, lon_key) DO UPDATE SET country_code = EXCLUDED.country_code, country = EXCLUDED.country,
                    city = EXCLUDED.city, fetched_at = EXCLUDED.fetched_at
                """, logger: logger)
            return place
        } catch {
            logger.warning("reverse geocoding failed", metadata: ["error": "\(error)"])
            return nil
        }
    }
}

import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-OFFLINE-3.4: location updates (consent twice, rate, accuracy, PostGIS, reverse
/// geocoding) and nearby content; the internal routes auth calls on consent changes.
struct LocationController: Sendable {
    let db: DatabasePool
    let geocoder: Geocoder
    let http: CurlHTTPClient
    let authURL: String
    let credential: InternalCredential
    let clock: any WallClock
    let logger: Logger

    func addRoutes(user: RouterGroup<ServiceRequestContext>, internalGroup: RouterGroup<ServiceRequestContext>) {
        user.post("location/update") { request, context in try await update(request, context) }
        user.get("location/nearby-content") { request, context in try await nearby(request, context) }
        internalGroup.delete("users/:id/locations") { request, context in
            let (userID, app) = try request.internalUserAndApp(context)
            var n = 0
            for try await _ in try await db.query("DELETE FROM user_locations WHERE app_id = \(app) AND user_id = \(userID) RETURNING 1", logger: logger) { n += 1 }
            return try context.json(["deleted": n])
        }
        internalGroup.put("users/:id/consents") { request, context in
            let (userID, app) = try request.internalUserAndApp(context)
            let c = try await request.decodeJSON(as: ConsentChange.self, context: context)
            guard c.userID == userID, c.appID == app else { throw AppError.validation("user_id", "body and path name different users") }
            try await db.withTransaction(logger: logger) { conn in
                try await conn.run("""
                    INSERT INTO user_consents (app_id, user_id, geolocation, changed_at) VALUES (\(app), \(userID), \(c.geolocation), \(c.changedAt))
                    ON CONFLICT (app_id, user_id) DO UPDATE SET geolocation = EXCLUDED.geolocation, changed_at = EXCLUDED.changed_at
                    WHERE user_consents.changed_at <= EXCLUDED.changed_at
                    """, logger: logger)
                // Consent withdrawn: the locations go with it.
                if !c.geolocation { try await conn.run("DELETE FROM user_locations WHERE app_id = \(app) AND user_id = \(userID)", logger: logger) }
            }
            return try context.json(["applied": true])
        }
    }

    /// The geolocation consent at auth: what auth last pushed here, else asked directly.
    func geolocationConsent(app: UUID, user: UUID) async throws -> Bool {
        for try await g in try await db.query("SELECT geolocation FROM user_consents WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
            .decode(Bool.self) { return g }
        let url = "\(authURL)/internal/users/\(user.uuidString.lowercased())/consents?app_id=\(app.uuidString.lowercased())"
        do {
            let r = try await http.send(ServiceKit.HTTPRequest(method: "GET", url: url, headers: credential.headers, timeout: .seconds(2)))
            guard r.isSuccess else { return false }
            return try r.decode(ConsentChange.self).geolocation
        } catch {
            throw AppError(.serviceUnavailable, "service_unavailable", "Cannot check the geolocation consent right now")
        }
    }

    struct UpdateBody: Decodable {
        var latitude: Double, longitude: Double, accuracy: Double
        var altitude: Double?
        var source: String?
        var consentGiven: Bool
        enum CodingKeys: String, CodingKey { case latitude, longitude, accuracy, altitude, source, consentGiven = "consent_given" }
    }

    struct LocationView: Encodable {
        var id: UUID, latitude: Double, longitude: Double, accuracy: Double, geocoded: Place?, timestamp: Date
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id); try c.encode(latitude, forKey: .latitude); try c.encode(longitude, forKey: .longitude)
            try c.encode(accuracy, forKey: .accuracy); try c.encode(geocoded, forKey: .geocoded); try c.encode(timestamp, forKey: .timestamp)
        }
        enum CodingKeys: String, CodingKey { case id, latitude, longitude, accuracy, geocoded, timestamp }
    }

    func update(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let b = try await request.decodeJSON(as: UpdateBody.self, context: context)
        guard (-90...90).contains(b.latitude) else { throw AppError.validation("latitude", "latitude must be -90 to 90") }
        guard (-180...180).contains(b.longitude) else { throw AppError.validation("longitude", "longitude must be -180 to 180") }
        guard b.accuracy > 0, b.accuracy.isFinite else { throw AppError.validation("accuracy", "accuracy must be a positive number of meters") }
        guard b.accuracy <= OfflineRules.worstAccuracyMeters else {
            throw AppError.validation("accuracy", "accuracy worse than \(Int(OfflineRules.worstAccuracyMeters)) m is not precise enough")
        }
        if let a = b.altitude, !(-500...10_000).contains(a) { throw AppError.validation("altitude", "altitude must be -500 to 10000 m") }
        let source = b.source ?? "gps"
        guard ["gps", "wifi", "cell", "ip"].contains(source) else { throw AppError.validation("source", "source must be gps, wifi, cell or ip") }
        guard b.consentGiven else { throw AppError(.forbidden, "consent_required", "Location needs consent_given") }
        guard try await geolocationConsent(app: app, user: user) else {
            throw AppError(.forbidden, "consent_required", "Geolocation is not allowed in your privacy settings")
        }
        let now = clock.now()
        // One update per 15 minutes: checked before geocoding, and again under the lock.
        try await db.withConnection { try await rateCheck(app: app, user: user, now: now, on: $0) }
        let place = await geocoder.place(latitude: b.latitude, longitude: b.longitude)
        let id = UUID()
        try await db.withTransaction(logger: logger) { conn in
            try await conn.run("SELECT pg_advisory_xact_lock(hashtextextended(\("location:\(app):\(user)"), 0))", logger: logger)
            try await rateCheck(app: app, user: user, now: now, on: conn)
            try await conn.run("""
                INSERT INTO user_locations (id, app_id, user_id, location, accuracy, altitude, source, country_code, country, city, created_at)
                VALUES (\(id), \(app), \(user), ST_SetSRID(ST_MakePoint(\(b.longitude), \(b.latitude)), 4326)::geography, \(b.accuracy), \(b.altitude),
                        \(source), \(place?.countryCode), \(place?.country), \(place?.city), \(now))
                """, logger: logger)
        }
        return try context.json(["location": LocationView(id: id, latitude: b.latitude, longitude: b.longitude, accuracy: b.accuracy,
                                                          geocoded: place, timestamp: now)], status: .created)
    }

    func rateCheck(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws {
        for try await last in try await conn.run("""
            SELECT max(created_at) FROM user_locations WHERE app_id = \(app) AND user_id = \(user) HAVING count(*) > 0
            """, logger: logger).decode(Date.self) {
            let wait = Int((last.addingTimeInterval(OfflineRules.locationInterval).timeIntervalSince(now)).rounded(.up))
            if wait > 0 { throw AppError.rateLimited(retryAfter: wait) }
        }
    }

    func nearby(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let q = request.uri.queryParameters
        var radius = OfflineRules.nearbyDefaultKm
        if let raw = q.get("radius_km") {
            guard let r = Double(raw), r > 0, r <= OfflineRules.nearbyMaxKm else {
                throw AppError.validation("radius_km", "radius_km must be more than 0 and at most \(Int(OfflineRules.nearbyMaxKm))")
            }
            radius = r
        }
        let now = clock.now()
        var point: (Double, Double)?
        for try await p in try await db.query("""
            SELECT ST_Y(location::geometry), ST_X(location::geometry) FROM user_locations WHERE app_id = \(app) AND user_id = \(user)
            ORDER BY created_at DESC LIMIT 1
            """, logger: logger).decode((Double, Double).self) { point = p }
        guard let (lat, lon) = point else {
            throw AppError(.conflict, "location_required", "Send a location update first (POST /location/update)")
        }
        struct Item: Encodable {
            var id: String, type: String, title: String, distanceKm: Double, metadata: JSONValue
            enum CodingKeys: String, CodingKey { case id, type, title, distanceKm = "distance_km", metadata }
        }
        var items: [Item] = []
        for try await r in try await db.query(Self.nearbyQuery(app: app, lat: lat, lon: lon, radiusKm: radius, now: now), logger: logger)
            .decode((String, String, String, Double, String).self) {
            items.append(Item(id: r.0, type: r.1, title: r.2, distanceKm: (r.3 / 10).rounded() / 100,
                              metadata: (try? JSONDecoder().decode(JSONValue.self, from: Data(r.4.utf8))) ?? .object([:])))
        }
        return try context.json(["content": items])
    }

    /// ST_DWithin on the GiST-indexed geography column, nearest first, 20 at most.
    static func nearbyQuery(app: UUID, lat: Double, lon: Double, radiusKm: Double, now: Date) -> PostgresQuery {
        """
        SELECT id, content_type, title, ST_Distance(location, p.g), metadata::text
        FROM location_based_content, (SELECT ST_SetSRID(ST_MakePoint(\(lon), \(lat)), 4326)::geography AS g) p
        WHERE app_id = \(app) AND active AND ST_DWithin(location, p.g, \(radiusKm * 1000))
          AND (available_until IS NULL OR available_until > \(now))
        ORDER BY location <-> p.g LIMIT \(OfflineRules.nearbyLimit)
        """
    }
}

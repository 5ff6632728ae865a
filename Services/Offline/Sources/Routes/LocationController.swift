import Foundation
import Hummingbird
import NIOCore
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-OFFLINE-3.4: location updates (consent twice, rate, accuracy, PostGIS, reverse
/// geocoding) and nearby content; the internal routes auth calls on consent changes.
struct LocationController: Sendable {
    let db: DatabasePool
    let recording: LocationRecording
    /// Nearby answers by user and radius, dropped when the user's position or the tenant's
    /// places change (announced by triggers on both tables; a position changes at most every
    /// 15 minutes, the map screen asks again each time it opens).
    let nearbyCache: ReadCache<NearbyKey, ByteBuffer>
    let clock: any WallClock
    let logger: Logger
    var locations: LocationStore { LocationStore(logger: logger) }

    func addRoutes(user: RouterGroup<ServiceRequestContext>, internalGroup: RouterGroup<ServiceRequestContext>) {
        user.post("location/update") { request, context in try await update(request, context) }
        user.get("location/nearby-content") { request, context in try await nearby(request, context) }
        internalGroup.on(InternalRoutes.consentFact) { request, context in
            // Only auth tells a consent (one owner per fact): `decodeFact` checks the caller.
            let fact = try await request.decodeFact(ConsentFact.self, from: .auth, context: context)
            guard fact.consent == context.parameters.get("consent"), fact.consent == ConsentFact.geolocation else {
                throw AppError.validation("consent", "offline acts on the geolocation consent only")
            }
            let outcome = try await recording.applyConsent(fact)
            return try context.json(outcome)
        }
    }

    struct UpdateBody: Decodable {
        var latitude: Double, longitude: Double, accuracy: Double
        var altitude: Double?
        var source: String?
        var consentGiven: Bool
        enum CodingKeys: String, CodingKey {
            case latitude, longitude, accuracy, altitude, source
            case consentGiven = "consent_given"
        }
    }

    struct LocationView: Encodable {
        var id: UUID, latitude: Double, longitude: Double, accuracy: Double, geocoded: Place?, timestamp: Date
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(latitude, forKey: .latitude)
            try c.encode(longitude, forKey: .longitude)
            try c.encode(accuracy, forKey: .accuracy)
            try c.encode(geocoded, forKey: .geocoded)
            try c.encode(timestamp, forKey: .timestamp)
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
        guard b.consentGiven else { throw AppError(OfflineErrorCode.consentRequired, "Location needs consent_given") }
        let now = clock.now()
        let (id, place) = try await recording.record(
            app: app,
            user: user,
            latitude: b.latitude,
            longitude: b.longitude,
            accuracy: b.accuracy,
            altitude: b.altitude,
            source: source,
            now: now
        )
        return try context.json(
            [
                "location": LocationView(
                    id: id,
                    latitude: b.latitude,
                    longitude: b.longitude,
                    accuracy: b.accuracy,
                    geocoded: place,
                    timestamp: now
                )
            ],
            status: .created
        )
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
        let key = NearbyKey(app: app, user: user, radiusKm: radius)
        if let body = nearbyCache.value(for: key) { return context.json(encoded: body) }
        let ticket = nearbyCache.ticket(for: key)
        let now = clock.now()
        let found = try await db.withConnection { conn -> [LocationStore.NearbyContent]? in
            guard let (lat, lon) = try await locations.lastPoint(app: app, user: user, on: conn) else { return nil }
            return try await locations.nearby(app: app, lat: lat, lon: lon, radiusKm: radius, now: now, on: conn)
        }
        guard let found else {
            throw AppError(OfflineErrorCode.locationRequired, "Send a location update first (POST /location/update)")
        }
        struct Item: Encodable {
            var id: String, type: String, title: String, distanceKm: Double, metadata: JSONValue
            enum CodingKeys: String, CodingKey {
                case id, type, title
                case distanceKm = "distance_km"
                case metadata
            }
        }
        let items = found.map { r in
            Item(
                id: r.id,
                type: r.type,
                title: r.title,
                distanceKm: (r.distanceMeters / 10).rounded() / 100,
                metadata: (try? JSONDecoder().decode(JSONValue.self, from: Data(r.metadata.utf8))) ?? .object([:])
            )
        }
        let body = ByteBuffer(bytes: try JSON.encoder.encode(["content": items]))
        // Kept until a change is heard, and never past the first listed place's end of availability.
        nearbyCache.store(body, for: key, ticket: ticket, expires: found.compactMap(\.availableUntil).min())
        return context.json(encoded: body)
    }

    struct NearbyKey: CacheKey {
        var app: UUID, user: UUID, radiusKm: Double
        var scope: UUID { app }
        var subject: UUID? { user }
    }
}

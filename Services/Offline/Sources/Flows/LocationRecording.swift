import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-OFFLINE-3.4 a position recorded: the geolocation consent (held here, pushed by auth, else
/// asked of auth once) and the rate checked before any geocoding, then again under the user's
/// lock when the row is written, so a withdrawal that committed meanwhile wins. Auth's consent
/// facts land here too. The flow owns the transactions (#50).
struct LocationRecording: Sendable {
    let db: DatabasePool
    let locations: LocationStore
    let geocoder: PlaceLookup
    let http: CurlHTTPClient
    let authURL: String
    let credential: InternalCredential
    let logger: Logger

    /// Answers the new position's id and its place (nil when no geocoder answered).
    func record(
        app: UUID,
        user: UUID,
        latitude: Double,
        longitude: Double,
        accuracy: Double,
        altitude: Double?,
        source: String,
        now: Date
    ) async throws -> (UUID, Place?) {
        let refused = AppError(OfflineErrorCode.consentRequired, "Geolocation is not allowed in your privacy settings")
        // Consent and rate checked before geocoding (no lookup for a refused request), and
        // again under the lock when the row is written.
        let held = try await db.withConnection { conn in
            let held = try await locations.geolocationConsent(app: app, user: user, lock: false, on: conn)
            try await locations.rateCheck(app: app, user: user, now: now, on: conn)
            return held
        }
        let asked = held == nil ? try await askAuthForGeolocationConsent(app: app, user: user) : nil
        guard held ?? asked == true else { throw refused }
        let place = await geocoder.place(latitude: latitude, longitude: longitude)
        let id = UUID()
        try await db.withTransaction(logger: logger) { conn in
            try await locations.lockUser(app: app, user: user, on: conn)
            // A withdrawal that committed while the geocoder answered wins; one that commits
            // after this insert deletes the row with the others.
            guard try await locations.geolocationConsent(app: app, user: user, lock: true, on: conn) ?? asked == true else { throw refused }
            try await locations.rateCheck(app: app, user: user, now: now, on: conn)
            try await locations.insert(
                app: app,
                user: user,
                .init(
                    id: id,
                    latitude: latitude,
                    longitude: longitude,
                    accuracy: accuracy,
                    altitude: altitude,
                    source: source,
                    place: place,
                    at: now
                ),
                on: conn
            )
        }
        return (id, place)
    }

    /// Auth's geolocation consent, versioned: a withdrawal deletes the stored positions.
    func applyConsent(_ fact: ConsentFact) async throws -> FactOutcome {
        try await db.withTransaction(logger: logger) { try await locations.applyGeolocationConsent(fact, on: $0) }
    }

    /// Auth's geolocation consent for a user it never pushed a change of (a consent never
    /// changed is off; asked once per request, not stored: any later change arrives as a push).
    func askAuthForGeolocationConsent(app: UUID, user: UUID) async throws -> Bool {
        let url = authURL + InternalRoutes.consents.path(user: user, app: app)
        do {
            let r = try await http.send(ServiceKit.HTTPRequest(method: "GET", url: url, headers: credential.headers, timeout: .seconds(2)))
            guard r.isSuccess else { return false }
            return try r.decode(ConsentChange.self).geolocation
        } catch {
            throw AppError(.serviceUnavailable, "service_unavailable", "Cannot check the geolocation consent right now")
        }
    }
}

import Foundation
import Logging
import OfflineDomain
import ServiceKit

/// The place of a point (UC-OFF-4): the 24 h cache first, then the geocoder within the
/// deployment's one request per second. Any failure answers nil (seed 10a: the raw point is
/// stored without a place).
struct PlaceLookup: Sendable {
    let geocoder: Geocoder
    let store: GeocodeStore
    let clock: any WallClock
    let logger: Logger
    /// Longer than this in line for a slot, the request is not made (the answer would come too late).
    var maxWait: Duration = .seconds(3)

    static func key(_ x: Double) -> Double { (x * 100).rounded() / 100 }

    func place(latitude: Double, longitude: Double) async -> Place? {
        guard geocoder.isConfigured else { return nil }
        let (lat, lon) = (Self.key(latitude), Self.key(longitude))
        let now = clock.now()
        do {
            if let cached = try await store.cached(latKey: lat, lonKey: lon, since: now.addingTimeInterval(-86400)) { return cached }
            let wait = try await store.takeSlot()
            if wait > Double(maxWait.components.seconds) { return nil }
            if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) }
            guard let place = try await geocoder.reverse(latitude: latitude, longitude: longitude) else { return nil }
            try await store.save(place, latKey: lat, lonKey: lon, now: now)
            return place
        } catch {
            logger.warning("reverse geocoding failed", metadata: ["error": "\(error)"])
            return nil
        }
    }
}

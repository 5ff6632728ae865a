import Foundation
import Logging
import OfflineDomain
import ServiceKit

struct Place: Codable, Sendable, Equatable {
    var countryCode: String?
    var country: String?
    var city: String?
    enum CodingKeys: String, CodingKey {
        case countryCode = "country_code"
        case country, city
    }
}

/// Reverse geocoding through a Nominatim-compatible server (`GEOCODER_URL`) with an identifying
/// User-Agent. Only the protocol: the cache and the deployment's one-request-per-second slot are
/// `PlaceLookup`'s (Flows/), kept in Postgres by `GeocodeStore`.
struct Geocoder: Sendable {
    let baseURL: String?
    let userAgent: String
    let http: CurlHTTPClient

    var isConfigured: Bool { baseURL != nil }

    /// Nominatim's place for the point; nil when it names none (or answers anything but a place).
    func reverse(latitude: Double, longitude: Double) async throws -> Place? {
        guard let baseURL else { return nil }
        let url = "\(baseURL)/reverse?format=jsonv2&lat=\(latitude)&lon=\(longitude)&zoom=10&addressdetails=1"
        let response = try await http.send(
            HTTPRequest(
                method: "GET",
                url: url,
                headers: [("User-Agent", userAgent), ("Accept", "application/json")],
                timeout: .seconds(3)
            )
        )
        guard response.isSuccess, let obj = try JSONSerialization.jsonObject(with: response.body) as? [String: Any],
            let address = obj["address"] as? [String: Any]
        else { return nil }
        return Place(
            countryCode: (address["country_code"] as? String)?.uppercased(),
            country: address["country"] as? String,
            city: (address["city"] ?? address["town"] ?? address["village"] ?? address["municipality"]) as? String
        )
    }
}

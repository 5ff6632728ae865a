import AdsDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AdsService

/// Bad input on the ads routes the flow tests do not already feed it: a 4xx with the envelope,
/// never a 500.
final class AdsBadInputTests: XCTestCase {
    func testEveryRouteRefusesBadInputWithTheEnvelope() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            let unknown = UUID()
            let cases: [(HTTPRequest.Method, String, String?, Int, String?)] = [
                (.get, "/ads/available?ad_type=banner", nil, 422, "ad_type"),
                (.get, "/ads/available?ad_type=rewarded&country=FRA", nil, 422, "country"),
                (.post, "/ads/\(unknown)/impression", #"{"loaded":true,"shown":false}"#, 404, nil),
                (.post, "/ads/\(unknown)/impression", #"{"shown":false}"#, 400, "loaded"),
                (.post, "/ads/\(unknown)/complete", #"{"completed":true}"#, 400, "display_duration_ms"),
                (.get, "/campaigns/not-a-uuid", nil, 400, "id"),
                (.post, "/campaigns/\(unknown)", nil, 404, nil),
                (.post, "/campaigns/\(unknown)/claim-reward", nil, 404, nil),
                (.post, "/referral/redeem", #"{"code":"!!"}"#, 422, "code"),
                (.post, "/referral/redeem", #"{}"#, 400, "code"),
                (.post, "/ads/consent", #"{"consent_personalized_ads":"yes"}"#, 400, "consent_personalized_ads"),
            ]
            for (method, path, json, status, field) in cases {
                let r = try await h.call(method, path, user: user, json: json)
                XCTAssertEqual(r.status.code, status, "\(method) \(path): \(String(buffer: r.body))")
                let e = try r.envelope()
                if let field { XCTAssertEqual(e.extra["field"], .string(field), "\(method) \(path)") }
            }
            var foreign = try h.headers(user)
            foreign[.authorization] = "Bearer \(try h.token(user, app: UUID()))"
            let other = try await h.call(.post, "/ads/consent", json: #"{"is_under_age":false}"#, headers: foreign)
            XCTAssertEqual(other.status, .unauthorized)
            let big = try await h.call(.post, "/ads/consent", user: user, json: #"{"tcf_string":"\#(String(repeating: "A", count: 2_000_000))"}"#)
            XCTAssertEqual(big.status, .contentTooLarge)
            let consents = try await h.count("SELECT count(*)::int FROM ads.user_consent_ads WHERE user_id = '\(user)'")
            XCTAssertEqual(consents, 0)

            let adminCases: [(HTTPRequest.Method, String, String?, Int, String?)] = [
                (.post, "/admin/campaigns/\(unknown)/end", nil, 404, nil),
                (
                    .post, "/admin/campaigns",
                    #"{"name":"x","campaign_type":"raffle","reward":{"amount":1},"conditions":{},"ends_at":"2099-01-01T00:00:00Z"}"#,
                    422, "campaign_type"
                ),
                (
                    .post, "/admin/campaigns",
                    #"{"name":"x","campaign_type":"watch_ads","reward":{"amount":1},"conditions":{"min_ads_watched":1},"ends_at":"tomorrow"}"#, 400,
                    "ends_at"
                ),
                (.get, "/analytics/revenue?ad_type=banner", nil, 422, "ad_type"),
                (.get, "/analytics/revenue?format=xml", nil, 422, "format"),
                (.get, "/analytics/dashboard?end_date=2025-02-30", nil, 422, "end_date"),
            ]
            for (method, path, json, status, field) in adminCases {
                let r = try await h.call(method, path, json: json)
                XCTAssertEqual(r.status.code, status, "\(method) \(path): \(String(buffer: r.body))")
                if let field { XCTAssertEqual(try r.envelope().extra["field"], .string(field), "\(method) \(path)") }
            }
            var notAdmin = h.admin
            notAdmin[.authorization] = "Bearer \(try h.token(user))"
            let dashboard = try await h.call(.get, "/analytics/dashboard", headers: notAdmin)
            XCTAssertEqual(dashboard.status, .unauthorized)
        }
    }
}

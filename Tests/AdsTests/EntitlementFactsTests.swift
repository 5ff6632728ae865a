import AdsDomain
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AdsService

/// Ads holds each user's entitlement as subscription pushes it (#17): no call to subscription on
/// a request. A purchase and a refund delivered to one replica are in every replica's next
/// answer within a second; an older fact, a forged one and one about an erased user change nothing.
final class EntitlementFactsTests: XCTestCase {
    func testAPurchaseAndARefundReachEveryReplicaWithinASecond() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            try await h.withSecondReplica { second, runtime2 in
                @Sendable func reason(on client: any TestClientProtocol) async throws -> String? {
                    let r = try await client.execute(
                        uri: "/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits",
                        method: .get,
                        headers: try h.headers(user, country: "FR")
                    ) { $0 }
                    XCTAssertEqual(r.status, .ok, String(buffer: r.body))
                    return try r.json([String: JSONValue].self).string("reason")
                }
                func expect(on client: any TestClientProtocol, _ expected: String?, _ what: String = "") async throws {
                    let actual = try await reason(on: client)
                    XCTAssertEqual(actual, expected, what)
                }
                func eventually(on client: any TestClientProtocol, _ expected: String?, _ what: String) async throws {
                    let end = ContinuousClock.now + .seconds(1)
                    while try await reason(on: client) != expected {
                        guard ContinuousClock.now < end else { return XCTFail("\(what): reason still not \(expected ?? "nil") after 1 s") }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
                // Both replicas hold "free" (B's second read from memory).
                try await expect(on: h.client, nil)
                try await expect(on: second, nil)
                let hits = runtime2.cacheHits("ad_eligibility")
                try await expect(on: second, nil)
                XCTAssertEqual(runtime2.cacheHits("ad_eligibility"), hits + 1, "the entitlement is answered from memory")

                // The purchase reaches A (subscription's outbox); B stops showing ads within 1 s.
                let bought = try await SubscriptionFacts.push(
                    h.client,
                    app: h.app,
                    user: user,
                    premium: true,
                    version: 3,
                    validUntil: h.clock.now().addingTimeInterval(30 * 86400)
                )
                XCTAssertEqual(try bought.json(FactOutcome.self), FactOutcome(applied: true))
                try await eventually(on: second, "premium_user", "a purchase told to another replica")
                try await expect(on: h.client, "premium_user", "and on the replica told")

                // The refund reaches B; A shows ads again within 1 s.
                let refunded = try await SubscriptionFacts.push(second, app: h.app, user: user, premium: false, version: 4)
                XCTAssertEqual(try refunded.json(FactOutcome.self), FactOutcome(applied: true))
                try await eventually(on: h.client, nil, "a refund told to another replica")
                try await expect(on: second, nil)

                // The purchase's delivery, repeated or late, is older than the refund: nothing changes.
                let late = try await SubscriptionFacts.push(h.client, app: h.app, user: user, premium: true, version: 3)
                XCTAssertEqual(try late.json(FactOutcome.self), FactOutcome(applied: false, reason: "stale_version"))
                try await expect(on: h.client, nil)
                try await expect(on: second, nil)
            }
        }
    }

    func testPremiumEndsWithTheToldPeriodWithoutAnotherFact() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            _ = try await SubscriptionFacts.push(
                h.client,
                app: h.app,
                user: user,
                premium: true,
                version: 1,
                validUntil: h.clock.now().addingTimeInterval(120)
            )
            let reason8 = try await h.available(user).string("reason")
            XCTAssertEqual(reason8, "premium_user")
            let reason9 = try await h.available(user).string("reason")
            XCTAssertEqual(reason9, "premium_user", "held in memory")
            // The period ends before the expiry sweep's fact arrives: the held answer ends with it.
            h.clock.advance(by: 150)
            let reason10 = try await h.available(user).string("reason")
            XCTAssertNil(reason10)
            let (id, r) = try await h.request(user)
            XCTAssertNotNil(id, "ads are requested again: \(String(buffer: r.body))")
        }
    }

    func testOnlySubscriptionTellsAndBadFactsAreRefusedWithNothingStored() async throws {
        try await AdsHarness.run { h in
            let user = UUID()
            let rows = "SELECT count(*)::int FROM ads.entitlement_state WHERE user_id = '\(user.lowercasedString)'"
            func push(_ body: String, headers: HTTPFields = SubscriptionFacts.headers, app: UUID? = nil) async throws -> TestResponse {
                try await h.client.execute(
                    uri: "/internal/users/\(user.lowercasedString)/entitlement?app_id=\((app ?? h.app).lowercasedString)",
                    method: .put,
                    headers: headers,
                    body: ByteBuffer(string: body)
                ) { $0 }
            }
            let good = #"{"app_id":"\#(h.app)","user_id":"\#(user)","is_premium":true,"version":1}"#
            // Another service's credential, a forged one, none.
            var adsCredential = SubscriptionFacts.headers
            adsCredential[.authorization] = "Bearer local-internal-ads"
            adsCredential[.xServiceName] = "ads"
            let status11 = try await push(good, headers: adsCredential).status
            XCTAssertEqual(status11, .unauthorized, "ads' own credential is not accepted from outside")
            var offline = SubscriptionFacts.headers
            offline[.authorization] = "Bearer local-internal-offline"
            offline[.xServiceName] = "offline"
            let byOffline = try await push(good, headers: offline)
            XCTAssertEqual(byOffline.status, .forbidden)
            XCTAssertEqual(try byOffline.envelope().error, "forbidden")
            var forged = SubscriptionFacts.headers
            forged[.authorization] = "Bearer guessed"
            let status12 = try await push(good, headers: forged).status
            XCTAssertEqual(status12, .unauthorized)
            let status13 = try await push(good, headers: [.contentType: "application/json"]).status
            XCTAssertEqual(status13, .unauthorized)
            // Bad bodies: 4xx in the envelope, never a 500.
            for (body, field) in [
                (#"{"app_id":"\#(h.app)","user_id":"\#(user)","is_premium":"yes","version":1}"#, "is_premium"),
                (#"{"app_id":"\#(h.app)","user_id":"\#(user)","is_premium":true}"#, "version"),
                (#"{"app_id":"\#(h.app)","user_id":"\#(user)","is_premium":true,"version":0}"#, "version"),
                (#"{"app_id":"\#(h.app)","user_id":"\#(UUID())","is_premium":true,"version":1}"#, "user_id"),
                (#"{"app_id":"\#(h.app)","user_id":"\#(user)","is_premium":true,"version":1,"valid_until":"soon"}"#, "valid_until"),
            ] {
                let r = try await push(body)
                XCTAssertTrue((400..<500).contains(Int(r.status.code)), "\(field): \(r.status)")
                XCTAssertEqual(try r.envelope().extra["field"], .string(field), String(buffer: r.body))
            }
            // Another tenant named in the query than in the body.
            let crossTenant = try await push(good, app: UUID())
            XCTAssertTrue((400..<500).contains(Int(crossTenant.status.code)), "\(crossTenant.status)")
            let huge = try await push(
                #"{"app_id":"\#(h.app)","user_id":"\#(user)","is_premium":true,"version":1,"pad":""# + String(repeating: "x", count: 2 << 20) + #""}"#
            )
            XCTAssertEqual(huge.status, .contentTooLarge)
            let stored14 = try await h.count(rows)
            XCTAssertEqual(stored14, 0, "nothing stored")
            let status15 = try await push(good).status
            XCTAssertEqual(status15, .ok, "the same fact from subscription is taken")
            let stored16 = try await h.count(rows)
            XCTAssertEqual(stored16, 1)
        }
    }

    func testAnErasedUserTakesNoFact() async throws {
        try await AdsHarness.run { h in
            let user = UUID()
            _ = try await SubscriptionFacts.push(h.client, app: h.app, user: user, premium: true, version: 1)
            let erase = try await h.client.execute(
                uri: "/internal/users/\(user.lowercasedString)?app_id=\(h.app.lowercasedString)",
                method: .delete,
                headers: [.authorization: "Bearer local-internal-auth", .xServiceName: "auth"]
            ) { $0 }
            XCTAssertEqual(erase.status, .ok, String(buffer: erase.body))
            XCTAssertEqual(try erase.json(UserDataDeletion.self).deleted["entitlement"], .int(1), "the entitlement is erased with the user")
            let late = try await SubscriptionFacts.push(h.client, app: h.app, user: user, premium: true, version: 2)
            XCTAssertEqual(try late.json(FactOutcome.self), FactOutcome(applied: false, reason: "erased"))
            let stored17 = try await h.count("SELECT count(*)::int FROM ads.entitlement_state WHERE user_id = '\(user.lowercasedString)'")
            XCTAssertEqual(stored17, 0)
        }
    }
}

import AdsDomain
import Foundation
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AdsService

/// `GET /ads/available` reads each user's counters and consent from the replica's memory (#17);
/// a consent change and an ad view made through one replica are in the other's next answer
/// within a second, and in the user's own next answer on the replica that took them at once.
final class EligibilityCacheTests: XCTestCase {
    func testConsentAndAnAdViewOnOneReplicaReachTheOtherWithinASecond() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.withSecondReplica { second, runtime2 in
                @Sendable func availableOnB() async throws -> (Bool?, String?) {
                    let r = try await second.execute(
                        uri: "/ads/v1/ads/available?ad_type=rewarded&placement=earn_credits",
                        method: .get,
                        headers: try h.headers(user, country: "FR")
                    ) { $0 }
                    let body = try r.json([String: JSONValue].self)
                    return (body.bool("available"), body.string("reason"))
                }
                func eventually(_ expected: Bool, _ what: String) async throws {
                    let end = ContinuousClock.now + .seconds(1)
                    while try await availableOnB().0 != expected {
                        guard ContinuousClock.now < end else { return XCTFail("\(what): available still \(!expected) after 1 s") }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
                // B holds "no consent yet" (asked twice: the second from memory).
                let before = try await availableOnB()
                XCTAssertEqual(before.0, false, "\(before)")
                _ = try await availableOnB()
                XCTAssertEqual(runtime2.cacheHits("ad_eligibility"), 1, "the second read is answered from memory")

                try await h.consent(user)
                let own = try await h.available(user)
                XCTAssertEqual(own.bool("available"), true, "the user's next read on the replica that took the consent")
                try await eventually(true, "a consent given on another replica")

                // An ad view through A: B says cooldown within a second.
                let (id, r) = try await h.request(user)
                XCTAssertNotNil(id, String(buffer: r.body))
                try await eventually(false, "an ad requested on another replica")
                let cooled = try await availableOnB()
                XCTAssertEqual(cooled.1, "cooldown_active")
            }
        }
    }
}

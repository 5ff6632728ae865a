import Foundation
import ServiceKit
import XCTest

/// The rule every replica of ads and offline applies to what subscription told it.
final class EntitlementStateTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func testNothingToldIsFree() {
        XCTAssertFalse(EntitlementState.entitlement(nil, at: now).isPremium)
        XCTAssertEqual(EntitlementState.entitlement(nil, at: now).status, "free")
    }

    func testPremiumLastsUntilTheToldEndAndNotASecondMore() {
        let told = EntitlementState(isPremium: true, validUntil: now.addingTimeInterval(60), version: 3)
        XCTAssertTrue(EntitlementState.entitlement(told, at: now).isPremium)
        XCTAssertEqual(EntitlementState.entitlement(told, at: now).status, "premium")
        XCTAssertTrue(EntitlementState.entitlement(told, at: now.addingTimeInterval(59)).isPremium)
        XCTAssertFalse(EntitlementState.entitlement(told, at: now.addingTimeInterval(60)).isPremium, "the end itself is not premium")
        XCTAssertFalse(EntitlementState.entitlement(told, at: now.addingTimeInterval(3600)).isPremium)
    }

    func testARefundIsFreeWhateverTheDate() {
        let refunded = EntitlementState(isPremium: false, validUntil: now.addingTimeInterval(86400), version: 4)
        XCTAssertFalse(EntitlementState.entitlement(refunded, at: now).isPremium)
    }

    func testPremiumWithoutAnEndLastsUntilAFactEndsIt() {
        let open = EntitlementState(isPremium: true, validUntil: nil, version: 1)
        XCTAssertTrue(EntitlementState.entitlement(open, at: now.addingTimeInterval(10 * 365 * 86400)).isPremium)
    }
}

@testable import AdsService
import Foundation
import XCTest

/// The pure rules: the UTC day by arithmetic agrees with Foundation's calendar, and the
/// reward decision's thresholds.
final class AdRulesTests: XCTestCase {
    func testDayMatchesTheGregorianCalendarInUTC() {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX"); f.timeZone = TimeZone(identifier: "UTC"); f.dateFormat = "yyyy-MM-dd"
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let d = Date(timeIntervalSince1970: Double.random(in: -2_000_000_000...8_000_000_000, using: &generator))
            XCTAssertEqual(AdStore.day(d), f.string(from: d))
        }
        XCTAssertEqual(AdStore.day(Date(timeIntervalSince1970: 951_782_400)), "2000-02-29")
        XCTAssertEqual(AdStore.day(Date(timeIntervalSince1970: 86_399)), "1970-01-01")
    }

    func testRewardDecisionThresholds() {
        let t0 = Date(timeIntervalSince1970: 1_000_000)
        XCTAssertEqual(AdRules.minimumDisplayMilliseconds(adDurationSeconds: 30), 24_000)
        XCTAssertEqual(
            RewardDecision.decide(
                completed: true, displayMilliseconds: 24_000, adDurationSeconds: 30, verification: "client",
                requestedAt: t0, now: t0 + 30), .grant)
        XCTAssertEqual(
            RewardDecision.decide(
                completed: true, displayMilliseconds: 23_999, adDurationSeconds: 30, verification: "client",
                requestedAt: t0, now: t0 + 30), .tooShort(minimumMilliseconds: 24_000))
        XCTAssertEqual(
            RewardDecision.decide(
                completed: true, displayMilliseconds: 30_000, adDurationSeconds: 30, verification: "client",
                requestedAt: t0, now: t0 + 20), .implausibleDuration)
        XCTAssertEqual(
            RewardDecision.decide(
                completed: false, displayMilliseconds: 30_000, adDurationSeconds: 30, verification: "client",
                requestedAt: t0, now: t0 + 40), .notCompleted)
        XCTAssertEqual(
            RewardDecision.decide(
                completed: true, displayMilliseconds: 30_000, adDurationSeconds: 30, verification: "ssv",
                requestedAt: t0, now: t0 + 40), .awaitingVerification)
    }
}

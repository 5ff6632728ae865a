import AdsDomain
import Foundation
import XCTest

@testable import AdsService

/// The pure rules: the UTC day by arithmetic agrees with Foundation's calendar, and the
/// reward decision's thresholds.
final class AdRulesTests: XCTestCase {
    func testDayMatchesTheGregorianCalendarInUTC() {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd"
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let d = Date(timeIntervalSince1970: Double.random(in: -2_000_000_000...8_000_000_000, using: &generator))
            XCTAssertEqual(AdStore.day(d), f.string(from: d))
        }
        XCTAssertEqual(AdStore.day(Date(timeIntervalSince1970: 951_782_400)), "2000-02-29")
        XCTAssertEqual(AdStore.day(Date(timeIntervalSince1970: 86_399)), "1970-01-01")
    }

    /// The byte check of ASCII placements agrees with the Unicode rule it shortcuts, for every
    /// byte in every position; names in other scripts keep the Unicode rule.
    func testAPlacementIsCheckedOnItsBytesAsTheUnicodeRuleChecksIt() throws {
        func unicodeRule(_ s: String) -> Bool { s.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" } }
        for byte in UInt8(1)..<0x80 {
            for text in [String(UnicodeScalar(byte)), "a\(UnicodeScalar(byte))", "\(UnicodeScalar(byte))9"] {
                let accepted = (try? AdsController.placement(text)) != nil
                XCTAssertEqual(accepted, unicodeRule(text), "byte \(byte) in \(text.debugDescription)")
            }
        }
        XCTAssertEqual(try AdsController.placement("écran_accueil"), "écran_accueil")
        XCTAssertEqual(try AdsController.placement("جائزة-1"), "جائزة-1")
        XCTAssertNil(try? AdsController.placement("écran accueil"))
        XCTAssertNil(try? AdsController.placement(String(repeating: "a", count: 65)))
        XCTAssertEqual(try AdsController.placement(nil), "default")
    }

    func testRewardDecisionThresholds() {
        let t0 = Date(timeIntervalSince1970: 1_000_000)
        XCTAssertEqual(AdRules.minimumDisplayMilliseconds(adDurationSeconds: 30), 24_000)
        XCTAssertEqual(
            RewardDecision.decide(
                completed: true,
                displayMilliseconds: 24_000,
                adDurationSeconds: 30,
                verification: "client",
                requestedAt: t0,
                now: t0 + 30
            ),
            .grant
        )
        XCTAssertEqual(
            RewardDecision.decide(
                completed: true,
                displayMilliseconds: 23_999,
                adDurationSeconds: 30,
                verification: "client",
                requestedAt: t0,
                now: t0 + 30
            ),
            .tooShort(minimumMilliseconds: 24_000)
        )
        XCTAssertEqual(
            RewardDecision.decide(
                completed: true,
                displayMilliseconds: 30_000,
                adDurationSeconds: 30,
                verification: "client",
                requestedAt: t0,
                now: t0 + 20
            ),
            .implausibleDuration
        )
        XCTAssertEqual(
            RewardDecision.decide(
                completed: false,
                displayMilliseconds: 30_000,
                adDurationSeconds: 30,
                verification: "client",
                requestedAt: t0,
                now: t0 + 40
            ),
            .notCompleted
        )
        XCTAssertEqual(
            RewardDecision.decide(
                completed: true,
                displayMilliseconds: 30_000,
                adDurationSeconds: 30,
                verification: "ssv",
                requestedAt: t0,
                now: t0 + 40
            ),
            .awaitingVerification
        )
    }
}

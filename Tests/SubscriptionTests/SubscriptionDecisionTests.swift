import Foundation
import ServiceKit
import SubscriptionDomain
import XCTest

@testable import SubscriptionService

/// Subscription's decisions as functions of values (#36), a row per flow; no database.
final class SubscriptionDecisionTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// UC-SUB-2.2: who plays what.
    func testADeviceIsRenewedWithoutTheCountOnlyWellWithinItsWindow() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let since = AccessPolicy.renewableSince(now: now)
        // (seen this many seconds ago, renewed without the count)
        let rows: [(TimeInterval, Bool)] = [(0, true), (60, true), (14 * 60 - 1, true), (14 * 60, false), (15 * 60 - 1, false), (16 * 60, false)]
        for (ago, renewable) in rows {
            XCTAssertEqual(now.addingTimeInterval(-ago) > since, renewable, "seen \(ago) s ago")
        }
    }

    func testARememberedDeviceIsActiveFourteenMinutesAndWrittenAgainEachMinute() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        // (written this many seconds ago, surely active, write again)
        let rows: [(TimeInterval, Bool, Bool)] = [
            (0, true, false), (59, true, false), (60, true, true), (14 * 60 - 1, true, true), (14 * 60, false, false), (20 * 60, false, false),
        ]
        for (ago, active, rewrite) in rows {
            let r = AccessPolicy.remembered(written: now.addingTimeInterval(-ago), now: now)
            XCTAssertEqual(r.active, active, "written \(ago) s ago")
            XCTAssertEqual(r.rewrite, rewrite, "written \(ago) s ago")
        }
        // Spread per device: written again between 60 and 120 s, never later.
        let spread: [(TimeInterval, Double, Bool)] = [
            (89, 0.5, false), (90, 0.5, true), (119, 0.999, false), (120, 0.999, true), (120, 7, true), (60, -1, true),
        ]
        for (ago, by, rewrite) in spread {
            XCTAssertEqual(
                AccessPolicy.remembered(written: now.addingTimeInterval(-ago), now: now, spread: by).rewrite,
                rewrite,
                "\(ago) s, spread \(by)"
            )
        }
    }

    func testAccessPolicy() {
        let rows: [(ContentRule.Level, Bool, Bool, AccessPolicy.Via?)] = [
            (.free, false, false, .free), (.free, true, true, .free),
            (.premium, true, false, .subscription), (.premium, false, true, nil), (.premium, false, false, nil),
            (.freemium, true, true, .subscription), (.freemium, false, true, .credits), (.freemium, false, false, nil),
        ]
        for (level, subscribed, unlocked, expected) in rows {
            XCTAssertEqual(
                AccessPolicy.decide(level: level, hasSubscription: subscribed, hasUnlock: unlocked),
                expected,
                "\(level) subscribed=\(subscribed) unlocked=\(unlocked)"
            )
        }
    }

    /// Only trial, active and grace grant premium; a status the code does not know grants nothing.
    func testSubscriptionStatus() {
        let granting = SubscriptionStatus.allCases.filter(\.grantsAccess)
        XCTAssertEqual(granting, [.trial, .active, .gracePeriod])
        XCTAssertEqual(SubscriptionStatus(stored: "grace_period"), .gracePeriod)
        XCTAssertEqual(SubscriptionStatus(stored: "paused"), .expired)
        XCTAssertEqual(String(decoding: try JSONEncoder().encode(SubscriptionStatus.gracePeriod), as: UTF8.self), #""grace_period""#)
    }

    /// Google Play's subscriptionsv2 states onto ours (UC-SUB-2.4).
    func testGoogleStateMapping() {
        let later = now + 3600
        let earlier = now - 1
        let rows: [(String, Date?, SubscriptionStatus?, Bool?)] = [
            ("SUBSCRIPTION_STATE_ACTIVE", later, .active, true),
            ("SUBSCRIPTION_STATE_ACTIVE", earlier, .expired, true),
            ("SUBSCRIPTION_STATE_CANCELED", later, .active, false),
            ("SUBSCRIPTION_STATE_CANCELED", nil, .expired, false),
            ("SUBSCRIPTION_STATE_IN_GRACE_PERIOD", earlier, .gracePeriod, true),
            ("SUBSCRIPTION_STATE_ON_HOLD", later, .expired, false),
            ("SUBSCRIPTION_STATE_PAUSED", later, .expired, false),
            ("SUBSCRIPTION_STATE_EXPIRED", later, .expired, false),
            ("SUBSCRIPTION_STATE_PENDING", later, nil, nil),
            ("SOMETHING_NEW", later, nil, nil),
        ]
        for (state, expiry, status, autoRenew) in rows {
            let mapped = GoogleStateMapping.status(state, expiry: expiry, now: now)
            XCTAssertEqual(mapped?.status, status, state)
            XCTAssertEqual(mapped?.autoRenew, autoRenew, state)
        }
    }

    /// App Store Server Notifications v2 (and v1's names) onto what they do.
    func testAppleNotificationEffect() {
        let rows: [(String, String?, AppleNotificationEffect)] = [
            ("SUBSCRIBED", "INITIAL_BUY", .renewed), ("DID_RENEW", nil, .renewed), ("REFUND_REVERSED", nil, .renewed),
            ("DID_FAIL_TO_RENEW", "GRACE_PERIOD", .gracePeriod), ("DID_FAIL_TO_RENEW", nil, .billingRetry),
            ("EXPIRED", "VOLUNTARY", .expired), ("GRACE_PERIOD_EXPIRED", nil, .expired),
            ("REFUND", nil, .revoked), ("REVOKE", nil, .revoked),
            ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED", .autoRenew(true)),
            ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", .autoRenew(false)),
            ("TEST", nil, .none), ("PRICE_INCREASE", "PENDING", .none),
        ]
        for (type, subtype, effect) in rows {
            XCTAssertEqual(AppleNotificationEffect.of(type: type, subtype: subtype), effect, "\(type)/\(subtype ?? "-")")
        }
        XCTAssertTrue(AppleNotificationEffect.v2Type(ofV1: "CANCEL", autoRenewStatus: nil) == ("REFUND", nil))
        XCTAssertTrue(AppleNotificationEffect.v2Type(ofV1: "DID_RECOVER", autoRenewStatus: nil) == ("DID_RENEW", nil))
        XCTAssertTrue(
            AppleNotificationEffect.v2Type(ofV1: "DID_CHANGE_RENEWAL_STATUS", autoRenewStatus: "false") == (
                "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED"
            )
        )
    }

    /// A purchase presented again: refused when the store revoked it, extended only by a later period.
    func testPurchaseEffect() {
        let rows: [(PurchaseRules.KnownTransaction, Int64, SubscriptionStatus, Int64, PurchaseRules.Effect)] = [
            (.revoked, 9, .active, 1, .refuseRevoked),
            (.active, 9, .revoked, 1, .refuseRevoked),
            (.unknown, 2, .revoked, 1, .extend),
            (.active, 5, .expired, 1, .extend),
            (.active, 1, .active, 1, .keep),
        ]
        for (known, incoming, status, stored, effect) in rows {
            XCTAssertEqual(
                PurchaseRules.effect(transaction: known, incomingExpiresMS: incoming, subscriptionStatus: status, storedExpiresMS: stored),
                effect,
                "\(known) \(status) incoming=\(incoming) stored=\(stored)"
            )
        }
    }

    func testErrorCatalogue() {
        let codes = SubscriptionErrorCode.allCases.map(\.rawValue)
        XCTAssertEqual(Set(codes).count, codes.count)
        XCTAssertEqual(SubscriptionErrorCode.insufficientCredits.status.code, 402)
        XCTAssertEqual(
            AppError(.unauthorized, SubscriptionErrorCode.invalidNotification, "m").status,
            .unauthorized,
            "a site may answer another status"
        )
    }
}

import Foundation
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import TestSupport
import WireTypes
import XCTest

@testable import SubscriptionService

extension FakeAppStore {
    func sign(_ payload: String) throws -> String {
        let header = #"{"alg":"ES256","x5c":[\#(chainB64.map { "\"\($0)\"" }.joined(separator: ","))]}"#
        let input = Base64URLTest.encode(header) + "." + Base64URLTest.encode(payload)
        let sig = try leafKey.signature(for: Data(input.utf8))
        return input + "."
            + Data(sig.rawRepresentation).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    func notification(
        _ type: String,
        subtype: String? = nil,
        uuid: String = UUID().uuidString,
        transaction: String?,
        renewal: String? = nil,
        bundle: String = "com.quiz.app"
    ) throws -> String {
        var data = #""bundleId":"\#(bundle)","environment":"Sandbox""#
        if let transaction { data += #","signedTransactionInfo":"\#(transaction)""# }
        if let renewal { data += #","signedRenewalInfo":"\#(renewal)""# }
        let sub = subtype.map { #","subtype":"\#($0)""# } ?? ""
        return try sign(
            #"{"notificationType":"\#(type)"\#(sub),"notificationUUID":"\#(uuid)","data":{\#(data)},"signedDate":\#(Int(Date().timeIntervalSince1970 * 1000))}"#
        )
    }

    func renewal(graceEnd: Date) throws -> String {
        try sign(
            #"{"environment":"Sandbox","signedDate":\#(Int(Date().timeIntervalSince1970 * 1000)),"gracePeriodExpiresDate":\#(Int(graceEnd.timeIntervalSince1970 * 1000)),"autoRenewStatus":1}"#
        )
    }
}

/// App Store Server Notifications v2, cancellation (UC-SUB-2.3) and the expiry sweep.
final class StoreNotificationTests: XCTestCase {
    static func post(_ h: PurchaseTests.H, _ signed: String) async throws -> TestResponse {
        try await h.client.execute(
            uri: "/subscription/v1/webhooks/apple",
            method: .post,
            headers: [.contentType: "application/json"],
            body: ByteBuffer(string: #"{"signedPayload":"\#(signed)"}"#)
        ) { $0 }
    }

    struct Me: Decodable {
        struct S: Decodable {
            var status: String
            var auto_renew: Bool
            var end_date: Date
            var grace_period_end: Date?
            var days_remaining: Int?
            var billing_issue: Bool?
        }
        var subscription: S?
        var is_premium: Bool
        var warning: String?
        var days_remaining: Int?
    }
    static func me(_ h: PurchaseTests.H, _ user: UUID) async throws -> Me {
        try await h.client.execute(uri: "/subscription/v1/subscriptions/me", method: .get, headers: try h.headers(user)) { $0 }.json(Me.self)
    }

    func testRenewGraceAutoRenewRefundAndReplays() async throws {
        try await PurchaseTests.run { h in
            let user = UUID()
            let original = "7\(Int.random(in: 1_000_000...9_999_999))"
            _ = try await h.post("subscriptions/purchase", user, jws: try h.store.transaction(id: original, original: original, trial: false))
            // DID_RENEW, delivered ten times: one change.
            let renewedTx = try h.store.transaction(id: original + "-2", original: original, trial: false, expires: Date() + 37 * 86400)
            let renew = try h.store.notification("DID_RENEW", transaction: renewedTx)
            for i in 0..<10 {
                let r = try await Self.post(h, renew)
                XCTAssertEqual(r.status, .ok)
                XCTAssertTrue(String(buffer: r.body).contains(i == 0 ? "applied" : "duplicate"))
            }
            let renewals = try await h.scalar(
                "SELECT count(*)::int FROM subscription.subscription_events WHERE user_id = '\(user)' AND event_type = 'renewed'"
            )
            XCTAssertEqual(renewals, 1)
            var m = try await Self.me(h, user)
            XCTAssertGreaterThan(m.subscription!.end_date, Date() + 30 * 86400)

            // Billing fails with a grace period: still premium, with a warning.
            let grace = try h.store.notification(
                "DID_FAIL_TO_RENEW",
                subtype: "GRACE_PERIOD",
                transaction: renewedTx,
                renewal: try h.store.renewal(graceEnd: Date() + 40 * 86400)
            )
            _ = try await Self.post(h, grace)
            m = try await Self.me(h, user)
            XCTAssertEqual(m.subscription?.status, "grace_period")
            XCTAssertTrue(m.is_premium)
            XCTAssertEqual(m.warning, "billing_retry_in_progress", "seed 2.2 7b")
            XCTAssertTrue((40...41).contains(m.days_remaining ?? 0), "from the store's grace end date, not the 16-day fallback")
            XCTAssertEqual(m.subscription?.days_remaining, m.days_remaining, "seed 7b puts it inside the subscription")
            XCTAssertEqual(m.subscription?.billing_issue, true)
            XCTAssertNotNil(m.subscription?.grace_period_end)

            // The user turns auto-renew off in the store: access continues.
            _ = try await Self.post(h, try h.store.notification("DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", transaction: renewedTx))
            m = try await Self.me(h, user)
            XCTAssertEqual(m.subscription?.auto_renew, false)
            XCTAssertTrue(m.is_premium)

            // A refund removes access at once, and auth is told.
            _ = try await Self.post(h, try h.store.notification("REFUND", transaction: renewedTx))
            m = try await Self.me(h, user)
            XCTAssertFalse(m.is_premium)
            let free = try await h.scalar(
                "SELECT count(*)::int FROM subscription.outbox WHERE path LIKE '/internal/users/\(user.uuidString.lowercased())/status%' AND body->>'status' = 'free'"
            )
            XCTAssertEqual(free, 1)
            let stored = try await h.scalar(
                "SELECT count(*)::int FROM subscription.store_notifications WHERE original_transaction_id = '\(original)'"
            )
            XCTAssertEqual(stored, 4, "every notification is stored")
        }
    }

    func testForgedOrForeignNotificationsAreRefused() async throws {
        let foreign = try FakeAppStore()
        try await PurchaseTests.run { h in
            let tx = try h.store.transaction(id: "x", original: "x")
            let cases = [
                ("another root", try foreign.notification("REFUND", transaction: tx)),
                ("unknown bundle", try h.store.notification("REFUND", transaction: tx, bundle: "com.unknown")),
            ]
            for (name, signed) in cases {
                let r = try await Self.post(h, signed)
                XCTAssertEqual(r.status, .badRequest, name)
                XCTAssertEqual(try r.envelope().error, "invalid_notification", name)
            }
            let valid = try h.store.notification("TEST", transaction: nil)
            let parts = valid.split(separator: ".")
            let tampered =
                parts[0] + "."
                + Base64URLTest.encode(
                    #"{"notificationType":"REFUND","notificationUUID":"u","data":{"bundleId":"com.quiz.app","environment":"Sandbox"}}"#
                )
                + "." + parts[2]
            let forged = try await Self.post(h, String(tampered))
            XCTAssertEqual(forged.status, .badRequest)
            let test = try await Self.post(h, valid)
            XCTAssertEqual(test.status, .ok)
            XCTAssertTrue(String(buffer: test.body).contains("ignored"))
            let malformed = try await h.client.execute(
                uri: "/subscription/v1/webhooks/apple",
                method: .post,
                headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"payload":1}"#)
            ) { $0 }
            XCTAssertEqual(malformed.status, .badRequest)
        }
    }

    /// Apple's v1 table onto the v2 effects (DID_RECOVER moves the period like a renewal).
    func testVersionOneTypesMeanWhatApplesTableSays() {
        let cases: [(String, String?, AppleNotificationEffect)] = [
            ("CANCEL", nil, .revoked), ("REFUND", nil, .revoked), ("REVOKE", nil, .revoked),
            ("DID_RECOVER", nil, .renewed), ("INTERACTIVE_RENEWAL", nil, .renewed), ("RENEWAL", nil, .renewed),
            ("DID_RENEW", nil, .renewed), ("INITIAL_BUY", nil, .renewed), ("DID_FAIL_TO_RENEW", nil, .billingRetry),
            ("DID_CHANGE_RENEWAL_STATUS", "false", .autoRenew(false)), ("DID_CHANGE_RENEWAL_STATUS", "true", .autoRenew(true)),
            ("PRICE_INCREASE_CONSENT", nil, .none), ("CONSUMPTION_REQUEST", nil, .none),
        ]
        for (v1, autoRenew, effect) in cases {
            let (type, subtype) = AppleNotificationEffect.v2Type(ofV1: v1, autoRenewStatus: autoRenew)
            XCTAssertEqual(AppleNotificationEffect.of(type: type, subtype: subtype), effect, v1)
        }
    }

    func testVersionOneNotificationsWithTheSharedSecret() async throws {
        try await PurchaseTests.run { h in
            let user = UUID()
            let original = "4\(Int.random(in: 1_000_000...9_999_999))"
            _ = try await h.post("subscriptions/purchase", user, jws: try h.store.transaction(id: original, original: original, trial: false))
            let ms = Int(Date().timeIntervalSince1970 * 1000)
            func v1(_ type: String, password: String = "s3cret", autoRenew: String = "true", tx: String? = nil, days: Int = 7) -> String {
                #"{"notification_type":"\#(type)","password":"\#(password)","environment":"Sandbox","auto_renew_status":"\#(autoRenew)","unified_receipt":{"status":0,"latest_receipt_info":[{"product_id":"com.quiz.premium.annual","transaction_id":"\#(tx ?? original)","original_transaction_id":"\#(original)","purchase_date_ms":"\#(ms - 60000)","expires_date_ms":"\#(ms + 86_400_000 * days)"}]}}"#
            }
            func post(_ body: String) async throws -> TestResponse {
                try await h.client.execute(
                    uri: "/subscription/v1/webhooks/apple",
                    method: .post,
                    headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: body)
                ) { $0 }
            }
            let wrong = try await post(v1("CANCEL", password: "guess"))
            XCTAssertEqual(wrong.status, .unauthorized)
            let off = try await post(v1("DID_CHANGE_RENEWAL_STATUS", autoRenew: "false"))
            XCTAssertTrue(String(buffer: off.body).contains("applied"))
            var m = try await Self.me(h, user)
            XCTAssertEqual(m.subscription?.auto_renew, false)
            // Billing recovered (v1 DID_RECOVER, a new transaction): the period moves like a renewal.
            let recovered = try await post(v1("DID_RECOVER", tx: original + "9", days: 37))
            XCTAssertTrue(String(buffer: recovered.body).contains("applied"), String(buffer: recovered.body))
            let end = try await h.scalar(
                "SELECT extract(epoch FROM end_date)::int FROM subscription.subscriptions WHERE store_original_transaction_id = '\(original)'"
            )
            XCTAssertEqual(Double(end), Double(ms / 1000 + 37 * 86400), accuracy: 2, "the new period's end")
            // Apple's v1 refund is CANCEL: access ends at once; a replay changes nothing.
            let cancel = try await post(v1("CANCEL"))
            XCTAssertTrue(String(buffer: cancel.body).contains("applied"))
            let replay = try await post(v1("CANCEL"))
            XCTAssertTrue(String(buffer: replay.body).contains("duplicate"))
            m = try await Self.me(h, user)
            XCTAssertFalse(m.is_premium)
            let secrets = try await h.scalar("SELECT count(*)::int FROM subscription.store_notifications WHERE payload ? 'password'")
            XCTAssertEqual(secrets, 0, "the shared secret is not stored")
        }
    }

    func testCancelKeepsAccessToTheEndAndTheSweepExpires() async throws {
        try await PurchaseTests.run { h in
            let user = UUID()
            let none = try await h.client.execute(uri: "/subscription/v1/subscriptions/cancel", method: .post, headers: try h.headers(user)) { $0 }
            XCTAssertEqual(none.status, .notFound)
            let original = "8\(Int.random(in: 1_000_000...9_999_999))"
            _ = try await h.post("subscriptions/purchase", user, jws: try h.store.transaction(id: original, original: original, trial: false))
            let cancel = try await h.client.execute(uri: "/subscription/v1/subscriptions/cancel", method: .post, headers: try h.headers(user)) { $0 }
            XCTAssertEqual(cancel.status, .ok)
            XCTAssertTrue(String(buffer: cancel.body).contains("apps.apple.com"))
            var m = try await Self.me(h, user)
            XCTAssertTrue(m.is_premium, "access continues until the end of the period")
            // The sweep expires it after its end, without anyone asking.
            h.clock.advance(by: 8 * 86400)
            let runtime = TestEnvironment.runtime(.subscription, migrations: try SubscriptionService.migrations())
            let expired = try await withPostgres(runtime.db) { db in
                try await ExpirySweeper(store: SubscriptionStore(logger: runtime.logger), db: db, clock: h.clock, interval: .seconds(60)).sweep()
            }
            XCTAssertGreaterThanOrEqual(expired, 1)
            let status = try await h.scalar(
                "SELECT count(*)::int FROM subscription.subscriptions WHERE store_original_transaction_id = '\(original)' AND status = 'expired'"
            )
            XCTAssertEqual(status, 1)
            m = try await Self.me(h, user)
            XCTAssertFalse(m.is_premium)
        }
    }
}

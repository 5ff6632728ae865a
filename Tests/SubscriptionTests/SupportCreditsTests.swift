import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import SubscriptionDomain
import TestSupport
import WireTypes
import XCTest

@testable import SubscriptionService

/// #16: support grants and takes back credits with a reason, through the ledger: once per
/// Idempotency-Key, never below zero, in the user's history, export and timeline.
final class SupportCreditsTests: XCTestCase {
    static func admin(_ h: PurchaseTests.H, key: String? = nil) -> HTTPFields {
        var f: HTTPFields = [.xAppID: h.app.uuidString, .xAPIKey: "k", .contentType: "application/json", .authorization: "Bearer local-admin-token"]
        if let key { f[.idempotencyKey] = key }
        return f
    }

    static func post(_ h: PurchaseTests.H, _ user: UUID, _ body: String, key: String?) async throws -> TestResponse {
        try await h.client.execute(
            uri: "/subscription/v1/admin/users/\(user)/credits",
            method: .post,
            headers: admin(h, key: key),
            body: ByteBuffer(string: body)
        ) { $0 }
    }

    func testGrantAndTakeBackOnceWithAReasonNeverBelowZero() async throws {
        try await PurchaseTests.run { h in
            let user = UUID()
            let granted = try await Self.post(h, user, #"{"amount":5,"reason":"Lost progress after the 2.3 update"}"#, key: "ticket-1")
            XCTAssertEqual(granted.status, .created, String(buffer: granted.body))
            XCTAssertTrue(String(buffer: granted.body).contains(#""balance":5"#))
            let replay = try await Self.post(h, user, #"{"amount":5,"reason":"Lost progress after the 2.3 update"}"#, key: "ticket-1")
            XCTAssertEqual(replay.status, .ok)
            XCTAssertTrue(String(buffer: replay.body).contains(#""replayed":true"#))
            let reused = try await Self.post(h, user, #"{"amount":50,"reason":"x"}"#, key: "ticket-1")
            XCTAssertEqual(reused.status, .unprocessableContent)
            XCTAssertEqual(try reused.envelope().error, "idempotency_key_reused")
            let tooMuch = try await Self.post(h, user, #"{"amount":-10,"reason":"Chargeback"}"#, key: "ticket-2")
            XCTAssertEqual(tooMuch.status, .conflict)
            XCTAssertEqual(try tooMuch.envelope().error, "insufficient_credits")
            let taken = try await Self.post(h, user, #"{"amount":-3,"reason":"Granted twice by mistake"}"#, key: "ticket-3")
            XCTAssertEqual(taken.status, .created)

            for (body, key, status) in [
                (#"{"amount":1,"reason":"r"}"#, nil as String?, HTTPResponse.Status.badRequest),
                (#"{"amount":0,"reason":"r"}"#, "k-a", .unprocessableContent),
                (#"{"amount":1000000,"reason":"r"}"#, "k-b", .unprocessableContent),
                (#"{"amount":1,"reason":"  "}"#, "k-c", .unprocessableContent),
                (#"{"amount":"1","reason":"r"}"#, "k-d", .badRequest),
                (#"{"reason":"r"}"#, "k-e", .badRequest),
            ] {
                let r = try await Self.post(h, user, body, key: key)
                XCTAssertEqual(r.status, status, body)
                XCTAssertNotNil(try? r.envelope().error)
            }
            let noCredential = try await h.client.execute(
                uri: "/subscription/v1/admin/users/\(user)/credits",
                method: .get,
                headers: [.xAppID: h.app.uuidString, .xAPIKey: "k"]
            ) { $0 }
            XCTAssertEqual(noCredential.status, .unauthorized)
            let badID = try await h.client.execute(uri: "/subscription/v1/admin/users/not-a-uuid/credits", method: .get, headers: Self.admin(h)) {
                $0
            }
            XCTAssertEqual(badID.status, .unprocessableContent)

            // Two rows, the balance 2, in the user's own history, export and timeline with the reason.
            let shown = try await h.client.execute(uri: "/subscription/v1/admin/users/\(user)/credits", method: .get, headers: Self.admin(h)) { $0 }
            XCTAssertTrue(String(buffer: shown.body).contains(#""balance":2"#), String(buffer: shown.body))
            let history = try await h.client.execute(uri: "/subscription/v1/credits/transactions", method: .get, headers: try h.headers(user)) { $0 }
            XCTAssertEqual(String(buffer: history.body).components(separatedBy: #""source":"support""#).count - 1, 2, String(buffer: history.body))
            let internalHeaders: HTTPFields = [.authorization: "Bearer local-internal-auth", .xServiceName: "auth"]
            let export = try await h.client.execute(uri: "/internal/users/\(user)/export?app_id=\(h.app)", method: .get, headers: internalHeaders) {
                $0
            }
            XCTAssertTrue(String(buffer: export.body).contains("Granted twice by mistake"), "the reason is in the user's export")
            let timeline = try await h.client.execute(uri: "/internal/users/\(user)/timeline?app_id=\(h.app)", method: .get, headers: internalHeaders)
            { $0 }
            XCTAssertEqual(timeline.status, .ok)
            let events = try timeline.json(TimelineAnswer.self).events
            XCTAssertEqual(events.map(\.kind), ["credits.support", "credits.support"])
            XCTAssertEqual(events.first?.summary, "-3 (balance 2): Granted twice by mistake")
            let otherApp = try await h.client.execute(
                uri: "/internal/users/\(user)/timeline?app_id=\(UUID())",
                method: .get,
                headers: internalHeaders
            ) { $0 }
            XCTAssertEqual(try otherApp.json(TimelineAnswer.self).events.count, 0, "another app's timeline holds none of it")
        }
    }
}

/// #16: support grants premium for some days, or ends what it granted, with a reason: through
/// the subscription events, told to auth, ads and offline like a purchase, ended by the sweep.
final class SupportPremiumTests: XCTestCase {
    static func send(_ h: PurchaseTests.H, _ method: HTTPRequest.Method, _ user: UUID, _ body: String, key: String?) async throws -> TestResponse {
        try await h.client.execute(
            uri: "/subscription/v1/admin/users/\(user)/premium",
            method: method,
            headers: SupportCreditsTests.admin(h, key: key),
            body: ByteBuffer(string: body)
        ) { $0 }
    }

    func testGrantRevokeAndExpiryOfSupportPremium() async throws {
        try await PurchaseTests.run { h in
            let user = UUID()
            let granted = try await Self.send(h, .post, user, #"{"days":30,"reason":"Compensation for the outage"}"#, key: "ticket-9")
            XCTAssertEqual(granted.status, .created, String(buffer: granted.body))
            let me = try await StoreNotificationTests.me(h, user)
            XCTAssertTrue(me.is_premium)
            let facts = try await h.scalar(
                """
                SELECT count(*)::int FROM subscription.outbox WHERE path LIKE '/internal/users/\(user.lowercasedString)/%'
                  AND (body->>'is_premium' = 'true' OR body->>'status' = 'premium')
                """
            )
            XCTAssertEqual(facts, 3, "auth, ads and offline are told, as for a purchase")
            let replay = try await Self.send(h, .post, user, #"{"days":30,"reason":"Compensation for the outage"}"#, key: "ticket-9")
            XCTAssertEqual(replay.status, .ok)
            let other = try await Self.send(h, .post, UUID(), #"{"days":30,"reason":"x"}"#, key: "ticket-9")
            XCTAssertEqual(other.status, .unprocessableContent)
            let subs = try await h.scalar("SELECT count(*)::int FROM subscription.subscriptions WHERE app_id = '\(h.app)' AND store = 'support'")
            XCTAssertEqual(subs, 1, "one grant for the key")
            for (body, key, status) in [
                (#"{"days":0,"reason":"r"}"#, "k1" as String?, HTTPResponse.Status.unprocessableContent),
                (#"{"days":400,"reason":"r"}"#, "k2", .unprocessableContent),
                (#"{"days":3,"reason":""}"#, "k3", .unprocessableContent),
                (#"{"days":"3","reason":"r"}"#, "k4", .badRequest),
                (#"{"days":3,"reason":"r"}"#, nil, .badRequest),
            ] {
                let r = try await Self.send(h, .post, user, body, key: key)
                XCTAssertEqual(r.status, status, body)
                XCTAssertNotNil(try? r.envelope().error)
            }

            let revoked = try await Self.send(h, .delete, user, #"{"reason":"Granted to the wrong account"}"#, key: nil)
            XCTAssertEqual(revoked.status, .ok, String(buffer: revoked.body))
            let after = try await StoreNotificationTests.me(h, user)
            XCTAssertFalse(after.is_premium)
            let events = try await h.scalar(
                """
                SELECT count(*)::int FROM subscription.subscription_events WHERE user_id = '\(user)'
                  AND ((event_type = 'support_granted' AND event_data->>'reason' = 'Compensation for the outage')
                    OR (event_type = 'support_revoked' AND event_data->>'reason' = 'Granted to the wrong account'))
                """
            )
            XCTAssertEqual(events, 2)
            let again = try await Self.send(h, .delete, user, #"{"reason":"twice"}"#, key: nil)
            XCTAssertEqual(again.status, .notFound)
            XCTAssertEqual(try again.envelope().error, "no_support_premium")

            // A short grant ends with its period.
            let brief = UUID()
            _ = try await Self.send(h, .post, brief, #"{"days":1,"reason":"Trial extension"}"#, key: "ticket-10")
            let during = try await StoreNotificationTests.me(h, brief)
            XCTAssertTrue(during.is_premium)
            h.clock.advance(by: 2 * 86_400)
            let ended = try await StoreNotificationTests.me(h, brief)
            XCTAssertFalse(ended.is_premium)
        }
    }
}

import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import SubscriptionDomain
import TestSupport
import WireTypes
import XCTest

@testable import SubscriptionService

/// #47 what the console's Subscriptions page reads: the app's plans and its store events, newest
/// first, paged; another app's operator sees none of them; bad input is a 400 envelope.
final class SubscriptionsAdminTests: XCTestCase {
    struct Events: Decodable {
        struct E: Decodable {
            var id: UUID
            var store: String
            var notification_type: String
            var subtype: String?
            var original_transaction_id: String?
            var received_at: Date
            var result: String
        }
        var events: [E]
        var next_before: String?
    }
    struct Plans: Decodable {
        struct P: Decodable {
            var name: String
            var plan_type: String
            var price: Double
        }
        var plans: [P]
    }

    static func get<T: Decodable>(_ h: PurchaseTests.H, _ path: String, app: UUID? = nil, as: T.Type) async throws -> T {
        var headers = StoreSettingsTests.admin(h)
        if let app { headers[.xAppID] = app.uuidString }
        return try await h.client.execute(uri: "/subscription/v1/\(path)", method: .get, headers: headers) { r in
            XCTAssertEqual(r.status, .ok, String(buffer: r.body))
            return try r.json(T.self)
        }
    }

    func testTheConsoleReadsThePlansAndTheStoreEventsNewestFirstPaged() async throws {
        try await PurchaseTests.run { h in
            let plans = try await Self.get(h, "admin/plans", as: Plans.self)
            XCTAssertEqual(plans.plans.map(\.plan_type).sorted(), ["annual", "monthly"])

            // A purchase, then three notifications (one delivered twice: stored once).
            let original = "8\(Int.random(in: 1_000_000...9_999_999))"
            _ = try await h.post("subscriptions/purchase", UUID(), jws: try h.store.transaction(id: original, original: original, trial: false))
            let renewed = try h.store.transaction(id: original + "-2", original: original, trial: false, expires: Date() + 37 * 86400)
            let renew = try h.store.notification("DID_RENEW", transaction: renewed)
            for signed in [
                renew, renew, try h.store.notification("DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", transaction: renewed),
                try h.store.notification("TEST", transaction: nil),
            ] {
                let r = try await StoreNotificationTests.post(h, signed)
                XCTAssertEqual(r.status, .ok, String(buffer: r.body))
            }
            let all = try await Self.get(h, "admin/store-events", as: Events.self)
            XCTAssertEqual(all.events.count, 3, "a replayed notification is one event")
            XCTAssertNil(all.next_before, "one page holds them")
            XCTAssertEqual(all.events.map(\.received_at), all.events.map(\.received_at).sorted(by: >), "newest first")
            let renewal = try XCTUnwrap(all.events.first { $0.notification_type == "DID_RENEW" })
            XCTAssertEqual(renewal.store, "apple")
            XCTAssertEqual(renewal.original_transaction_id, original)
            XCTAssertEqual(renewal.result, "applied")
            XCTAssertEqual(all.events.first { $0.notification_type == "DID_CHANGE_RENEWAL_STATUS" }?.subtype, "AUTO_RENEW_DISABLED")

            // Paged one at a time: the same three, in the same order, each once.
            var paged: [UUID] = []
            var before: String?
            repeat {
                let q = "admin/store-events?limit=1" + (before.map { "&before=\($0)" } ?? "")
                let page = try await Self.get(h, q, as: Events.self)
                paged += page.events.map(\.id)
                before = page.next_before
            } while before != nil && paged.count < 10
            XCTAssertEqual(paged, all.events.map(\.id))

            // Another app's operator sees none of this app's plans or events.
            let other = try await Self.get(h, "admin/store-events", app: UUID(), as: Events.self)
            XCTAssertTrue(other.events.isEmpty)
            let otherPlans = try await Self.get(h, "admin/plans", app: UUID(), as: Plans.self)
            XCTAssertTrue(otherPlans.plans.isEmpty)
        }
    }

    /// A page's cursor names its last event's time to the exact microsecond the database keeps
    /// (the bound is built in SQL from that integer): a `Date` sent back could be a microsecond
    /// short, and events of the same microsecond (a frozen clock, a burst) were then skipped.
    func testTheCursorKeepsTheExactMicrosecond() {
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        for offset in Int64(0)..<20_000 {
            let micros = now + offset * 7919
            // As PostgresNIO hands a timestamptz back: microseconds since 2000 as a Double.
            let decoded = Date(timeIntervalSinceReferenceDate: Double(micros - 978_307_200_000_000) / 1_000_000)
            let cursor = StoreEventStore.Cursor(receivedAt: decoded, id: UUID())
            XCTAssertEqual(cursor.micros, micros)
            XCTAssertEqual(StoreEventStore.Cursor(cursor.description), cursor)
        }
    }

    func testBadInputIsRefusedWithTheEnvelope() async throws {
        try await PurchaseTests.run { h in
            for query in [
                "limit=0", "limit=101", "limit=ten", "before=yesterday", "before=12_not-a-uuid", "before=" + String(repeating: "1", count: 80),
                // A time past what the database can keep (and a bound built from it exactly).
                "before=9223372036854775807_9ca6c2e8-57c0-4b6f-b445-d33c4a81e00c", "before=9007199254740993_9ca6c2e8-57c0-4b6f-b445-d33c4a81e00c",
            ] {
                try await h.client.execute(uri: "/subscription/v1/admin/store-events?\(query)", method: .get, headers: StoreSettingsTests.admin(h)) {
                    r in
                    XCTAssertEqual(r.status, .unprocessableContent, query)
                    XCTAssertEqual(try r.envelope().error, "validation_error", query)
                }
            }
            // A player's token, or none, is not an operator's.
            for path in ["admin/plans", "admin/store-events"] {
                let user = try await h.client.execute(uri: "/subscription/v1/\(path)", method: .get, headers: try h.headers(UUID())) { $0.status }
                XCTAssertTrue([.unauthorized, .forbidden].contains(user), "\(path): \(user)")
                let none = try await h.client.execute(uri: "/subscription/v1/\(path)", method: .get, headers: StoreSettingsTests.admin(h, token: nil))
                {
                    $0.status
                }
                XCTAssertEqual(none, .unauthorized, path)
            }
        }
    }
}

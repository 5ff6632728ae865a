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

/// UC-SUB-2.2 access levels, the unlock options shown on the paywall, access logs and the
/// concurrent-device limit.
final class ContentAccessTests: XCTestCase {
    struct D: Decodable {
        struct O: Decodable {
            struct S: Decodable {
                var available: Bool
                var plans: [Plan]
            }
            struct C: Decodable {
                var cost: Int
                var duration_hours: Int
                var user_can_afford: Bool
                var user_balance: Int
            }
            var via_subscription: S?
            var via_credits: C?
        }
        var has_access: Bool
        var via: String?
        var unlock_options: O?
    }

    static func rules(_ h: PurchaseTests.H, _ prefix: String) async throws {
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
            try await db.query(
                """
                INSERT INTO subscription.content_rules (app_id, content_id, access_level) VALUES
                (\(h.app), \(prefix + "free"), 'free'), (\(h.app), \(prefix + "premium"), 'premium'), (\(h.app), \(prefix + "freemium"), 'freemium')
                """
            )
        }
    }

    static func get(_ h: PurchaseTests.H, _ user: UUID, _ content: String) async throws -> TestResponse {
        try await h.client.execute(uri: "/subscription/v1/content/\(content)", method: .get, headers: try h.headers(user)) { $0 }
    }

    static func check(_ h: PurchaseTests.H, _ user: UUID, _ content: String, device: String? = "phone-1") async throws -> TestResponse {
        var headers = try h.headers(user)
        if let device { headers[.xDeviceID] = device }
        return try await h.client.execute(uri: "/subscription/v1/content/\(content)/check-access", method: .post, headers: headers) { $0 }
    }

    func testLevelsOptionsAndLogs() async throws {
        try await PurchaseTests.run { h in
            let p = "c\(Int.random(in: 1000...9999))-"
            try await Self.rules(h, p)
            let user = UUID()
            let free = try await Self.get(h, user, p + "free").json(D.self)
            XCTAssertTrue(free.has_access)
            XCTAssertEqual(free.via, "free")
            XCTAssertNil(free.unlock_options)

            let premium = try await Self.get(h, user, p + "premium").json(D.self)
            XCTAssertFalse(premium.has_access)
            XCTAssertEqual(premium.unlock_options?.via_subscription?.plans.count, 2)
            XCTAssertNil(premium.unlock_options?.via_credits, "premium content cannot be bought with credits")
            let denied = try await Self.check(h, user, p + "premium")
            XCTAssertEqual(denied.status, .forbidden)
            XCTAssertEqual(try denied.envelope().error, "access_denied")

            // Freemium: shows the credit price against the balance, then opens after an unlock.
            _ = try await h.client.execute(
                uri: "/internal/credits/earn",
                method: .post,
                headers: [.authorization: "Bearer local-internal-ads", .xServiceName: "ads", .contentType: "application/json"],
                body: ByteBuffer(
                    string: #"{"user_id":"\#(user)","app_id":"\#(h.app)","amount":5,"source":"ad_reward","reference_id":"r-\#(UUID())"}"#
                )
            ) { $0 }
            let freemium = try await Self.get(h, user, p + "freemium").json(D.self)
            XCTAssertFalse(freemium.has_access)
            XCTAssertEqual(freemium.unlock_options?.via_credits?.cost, 3)
            XCTAssertEqual(freemium.unlock_options?.via_credits?.duration_hours, 24)
            XCTAssertEqual(freemium.unlock_options?.via_credits?.user_balance, 5)
            XCTAssertEqual(freemium.unlock_options?.via_credits?.user_can_afford, true)
            _ = try await h.client.execute(uri: "/subscription/v1/content/\(p)freemium/unlock", method: .post, headers: try h.headers(user)) { $0 }
            let opened = try await Self.check(h, user, p + "freemium")
            XCTAssertEqual(opened.status, .ok)
            XCTAssertTrue(String(buffer: opened.body).contains(#""via":"credits""#))

            // A subscription opens premium content.
            let original = "5\(Int.random(in: 1_000_000...9_999_999))"
            let bought = try await h.post("subscriptions/purchase", user, jws: try h.store.transaction(id: original, original: original))
            XCTAssertEqual(bought.status, .created)
            let nowPremium = try await Self.check(h, user, p + "premium")
            XCTAssertEqual(nowPremium.status, .ok)
            XCTAssertTrue(String(buffer: nowPremium.body).contains(#""via":"subscription""#))

            let logs = try await h.scalar("SELECT count(*)::int FROM subscription.access_logs WHERE user_id = '\(user)'")
            let refused = try await h.scalar("SELECT count(*)::int FROM subscription.access_logs WHERE user_id = '\(user)' AND NOT access_granted")
            XCTAssertEqual(logs, 3)
            XCTAssertEqual(refused, 1)
            // Each row as decided: the way in of a granted check, none for a refused one, the
            // user's status and the device (written through `log_access_decisions`).
            let rows = try await h.scalar(
                """
                SELECT count(*)::int FROM subscription.access_logs WHERE user_id = '\(user)' AND device_id = 'phone-1' AND (
                    (content_id = '\(p)freemium' AND access_granted AND via = 'credits' AND user_status = 'free')
                    OR (content_id = '\(p)premium' AND NOT access_granted AND via IS NULL AND user_status = 'free')
                    OR (content_id = '\(p)premium' AND access_granted AND via = 'subscription' AND user_status = 'premium'))
                """
            )
            XCTAssertEqual(rows, 3)
            let unknown = try await Self.get(h, user, "nope")
            XCTAssertEqual(unknown.status, .notFound)
        }
    }

    func testSixthDeviceIsRefusedUntilOneGoesQuiet() async throws {
        try await PurchaseTests.run { h in
            let p = "d\(Int.random(in: 1000...9999))-"
            try await Self.rules(h, p)
            let user = UUID()
            for i in 1...5 {
                let r = try await Self.check(h, user, p + "free", device: "device-\(i)")
                XCTAssertEqual(r.status, .ok, "device \(i)")
            }
            let again = try await Self.check(h, user, p + "free", device: "device-3")
            XCTAssertEqual(again.status, .ok, "a known device is not counted twice")
            let sixth = try await Self.check(h, user, p + "free", device: "device-6")
            XCTAssertEqual(sixth.status, .tooManyRequests)
            let e = try sixth.envelope()
            XCTAssertEqual(e.error, "concurrent_access_limit")
            XCTAssertEqual(e.extra["active_devices"], .int(5))
            // Two minutes on (past the 60-120 s after which the replica writes a remembered
            // device's sighting again) a known device is renewed without being counted again,
            // and the sixth is still refused.
            h.clock.advance(by: 2 * 60)
            let renewed = try await Self.check(h, user, p + "free", device: "device-2")
            XCTAssertEqual(renewed.status, .ok)
            // The sighting went with the decision (one write, #48): the device's last sighting is
            // the time of its last logged decision.
            let together = try await h.scalar(
                """
                SELECT count(*)::int FROM subscription.devices d WHERE d.user_id = '\(user)' AND d.device_id = 'device-2'
                AND d.last_seen = (SELECT max(timestamp) FROM subscription.access_logs l WHERE l.user_id = '\(user)' AND l.device_id = 'device-2')
                AND d.last_seen > d.first_seen
                """
            )
            XCTAssertEqual(together, 1)
            let still = try await Self.check(h, user, p + "free", device: "device-6")
            XCTAssertEqual(still.status, .tooManyRequests)
            h.clock.advance(by: 14 * 60)
            let later = try await Self.check(h, user, p + "free", device: "device-6")
            XCTAssertEqual(later.status, .ok)
            // The renewal moved device-2's last sighting on: 16 minutes after the others it is
            // still one of the five, with device-6 and three new ones; a tenth is refused.
            for i in 7...9 {
                let r = try await Self.check(h, user, p + "free", device: "device-\(i)")
                XCTAssertEqual(r.status, .ok, "device \(i)")
            }
            let tenth = try await Self.check(h, user, p + "free", device: "device-10")
            XCTAssertEqual(tenth.status, .tooManyRequests, "device-2 renewed at 2 min is still active at 16 min")
            // A device that went quiet comes back counted, not renewed: its place is taken.
            let quiet = try await Self.check(h, user, p + "free", device: "device-1")
            XCTAssertEqual(quiet.status, .tooManyRequests, "device-1, quiet since 0, is not renewed past the limit")
        }
    }

    /// A bad check changes nothing: a content that does not exist is a 404 that neither logs a
    /// decision nor counts the device, an oversized id is a 400 naming it, and this app's token
    /// under another app's headers is a 401.
    func testABadCheckLogsAndCountsNothing() async throws {
        try await PurchaseTests.run { h in
            let p = "b\(Int.random(in: 1000...9999))-"
            try await Self.rules(h, p)
            let user = UUID()
            let unknown = try await Self.check(h, user, p + "nope", device: "phone-9")
            XCTAssertEqual(unknown.status, .notFound)
            XCTAssertEqual(try unknown.envelope().error, "not_found")
            let long = try await Self.check(h, user, String(repeating: "c", count: 201))
            XCTAssertEqual(long.status, .badRequest)
            XCTAssertEqual(try long.envelope().extra["field"], .string("id"))
            var other = try h.headers(user)
            other[.xAppID] = UUID().uuidString
            other[.xDeviceID] = "phone-1"
            let foreign = try await h.client.execute(uri: "/subscription/v1/content/\(p)free/check-access", method: .post, headers: other) { $0 }
            XCTAssertEqual(foreign.status, .unauthorized, "this app's token under another app's headers")
            let logs = try await h.scalar("SELECT count(*)::int FROM subscription.access_logs WHERE user_id = '\(user)'")
            let devices = try await h.scalar("SELECT count(*)::int FROM subscription.devices WHERE user_id = '\(user)'")
            XCTAssertEqual(logs, 0)
            XCTAssertEqual(devices, 0, "no device counted by a check that was refused before its decision")
        }
    }

    /// #13: the device limit cannot be skipped by leaving the device out: a check without
    /// `X-Device-ID` (or with an empty or oversized one) is a 400 naming the header, and is
    /// neither logged nor counted.
    func testACheckWithoutItsDeviceIsRefused() async throws {
        try await PurchaseTests.run { h in
            let p = "x\(Int.random(in: 1000...9999))-"
            try await Self.rules(h, p)
            let user = UUID()
            for i in 1...5 { _ = try await Self.check(h, user, p + "free", device: "device-\(i)") }
            for device in [nil, "", "   ", String(repeating: "d", count: 201)] as [String?] {
                let r = try await Self.check(h, user, p + "free", device: device)
                XCTAssertEqual(r.status, .badRequest, "device \(String(describing: device?.prefix(8)))")
                let e = try r.envelope()
                XCTAssertEqual(e.error, "invalid_request")
                XCTAssertEqual(e.extra["field"], .string("X-Device-ID"))
            }
            let logs = try await h.scalar("SELECT count(*)::int FROM subscription.access_logs WHERE user_id = '\(user)'")
            XCTAssertEqual(logs, 5, "refused checks are not logged")
            let devices = try await h.scalar("SELECT count(*)::int FROM subscription.devices WHERE user_id = '\(user)'")
            XCTAssertEqual(devices, 5)
            let sixth = try await Self.check(h, user, p + "free", device: "device-6")
            XCTAssertEqual(sixth.status, .tooManyRequests)
        }
    }

    /// A replica that has not heard of an erasure still passes the user's token: the check's log
    /// row meets the erasure fence. The check is refused with the token's 401 and logs nothing;
    /// the other checks written in the same batch are answered and logged (the batch is retried
    /// row by row).
    func testAnErasedUsersCheckIsRefusedAndTheOthersInItsBatchAreLogged() async throws {
        try await PurchaseTests.run { h in
            let p = "e\(Int.random(in: 1000...9999))-"
            try await Self.rules(h, p)
            let erased = UUID()
            let before = try await Self.check(h, erased, p + "free")
            XCTAssertEqual(before.status, .ok)
            try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
                try await db.query(
                    """
                    WITH gone AS (DELETE FROM subscription.access_logs WHERE app_id = \(h.app) AND user_id = \(erased))
                    INSERT INTO subscription.session_state (app_id, user_id, version, session_epoch, state)
                    VALUES (\(h.app), \(erased), 9, 2147483647, 'erased')
                    """
                )
            }
            let others = (0..<24).map { _ in UUID() }
            let answers = try await withThrowingTaskGroup(of: (UUID, TestResponse).self) { group in
                for user in others + [erased] { group.addTask { (user, try await Self.check(h, user, p + "free")) } }
                return try await group.reduce(into: [UUID: TestResponse]()) { $0[$1.0] = $1.1 }
            }
            XCTAssertEqual(answers[erased]?.status, .unauthorized)
            XCTAssertEqual(try answers[erased]?.envelope().error, "invalid_token")
            for user in others { XCTAssertEqual(answers[user]?.status, .ok) }
            let logged = try await h.scalar(
                "SELECT count(*)::int FROM subscription.access_logs WHERE content_id = '\(p)free' AND user_id <> '\(erased)'"
            )
            XCTAssertEqual(logged, others.count)
            let kept = try await h.scalar("SELECT count(*)::int FROM subscription.access_logs WHERE user_id = '\(erased)'")
            XCTAssertEqual(kept, 0, "nothing logged for the erased user")
        }
    }
}

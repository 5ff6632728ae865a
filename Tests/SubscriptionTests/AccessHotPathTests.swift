import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import ServiceKit
import SubscriptionDomain
import TestSupport
import WireTypes
import XCTest

@testable import SubscriptionService

/// #35 the two hot paths read from memory: the credit balance (never stale to the spender,
/// changed on every replica within a second) and the content check (the 5-device rule exact
/// under concurrency, every answered decision logged through the group commit).
final class AccessHotPathTests: XCTestCase {
    static func earn(_ h: PurchaseTests.H, _ user: UUID, _ amount: Int) async throws {
        let r = try await h.client.execute(
            uri: "/internal/credits/earn",
            method: .post,
            headers: [.authorization: "Bearer local-internal-ads", .xServiceName: "ads", .contentType: "application/json"],
            body: ByteBuffer(
                string: #"{"user_id":"\#(user)","app_id":"\#(h.app)","amount":\#(amount),"source":"ad_reward","reference_id":"r-\#(UUID())"}"#
            )
        ) { $0 }
        XCTAssertEqual(r.status, .ok, String(buffer: r.body))
    }

    static func balance(_ h: PurchaseTests.H, _ user: UUID) async throws -> Int {
        let r = try await h.client.execute(uri: "/subscription/v1/credits/balance", method: .get, headers: try h.headers(user)) { $0 }
        XCTAssertEqual(r.status, .ok)
        return try r.json([String: Int].self)["balance"] ?? -1
    }

    static func eventually(_ h: PurchaseTests.H, _ user: UUID, balance: Int, _ what: String) async throws {
        let end = ContinuousClock.now + .seconds(1)
        while try await Self.balance(h, user) != balance {
            guard ContinuousClock.now < end else { return XCTFail("\(what): the balance is not \(balance) after 1 s") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func testTheBalanceIsNeverStaleToTheSpenderAndReachesTheOtherReplicaWithinASecond() async throws {
        try await StatusCacheTests.runTwo { a, b, runtimeB in
            let p = "b\(Int.random(in: 1000...9999))-"
            try await ContentAccessTests.rules(a, p)
            let user = UUID()
            try await Self.earn(a, user, 5)
            // Both replicas hold 5 (B's second read from memory).
            let seenA = try await Self.balance(a, user)
            let seenB = try await Self.balance(b, user)
            XCTAssertEqual(seenA, 5)
            XCTAssertEqual(seenB, 5)
            let before = runtimeB.cacheHits("credit_balance")
            _ = try await Self.balance(b, user)
            XCTAssertEqual(runtimeB.cacheHits("credit_balance"), before + 1, "the second read is answered from memory")

            // The spend on A, with reads of the same user racing it there: the spender's next
            // read on A is the new balance, at once.
            let racing = Task { for _ in 0..<30 { _ = try? await Self.balance(a, user) } }
            let spent = try await a.client.execute(uri: "/subscription/v1/content/\(p)freemium/unlock", method: .post, headers: try a.headers(user)) {
                $0
            }
            XCTAssertEqual(spent.status, .ok, String(buffer: spent.body))
            let own = try await Self.balance(a, user)
            XCTAssertEqual(own, 2, "the spender's next read on the replica that took the spend")
            await racing.value
            let settled = try await Self.balance(a, user)
            XCTAssertEqual(settled, 2, "a read that raced the spend is not kept")
            try await Self.eventually(b, user, balance: 2, "a spend on another replica")

            // A reward credited on B reaches A within a second; the check's paywall shows it.
            try await Self.earn(b, user, 4)
            try await Self.eventually(a, user, balance: 6, "a reward on another replica")
            let paywall = try await ContentAccessTests.get(a, user, p + "freemium")
            XCTAssertEqual(paywall.status, .ok)
        }
    }

    /// Seconds since the epoch of the device's `last_seen`, as the database holds it.
    static func lastSeen(_ user: UUID, _ device: String) async throws -> Int {
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db in
            let rows = try await db.query(
                "SELECT extract(epoch FROM last_seen)::bigint::int FROM subscription.devices WHERE user_id = \(user) AND device_id = \(device)"
            )
            for try await t in rows.decode(Int.self) { return t }
            return -1
        }
    }

    /// A device a replica wrote as seen is admitted from its memory while it is surely active
    /// (14 minutes), its `last_seen` moved on after 60-120 s; the memory never admits past the
    /// limit: once it has gone quiet, five new devices on the other replica take its place and
    /// it is refused.
    func testARememberedDeviceIsAdmittedFromMemoryOnlyWhileSurelyActive() async throws {
        try await StatusCacheTests.runTwo { a, b, runtimeB in
            let p = "m\(Int.random(in: 1000...9999))-"
            try await ContentAccessTests.rules(a, p)
            let user = UUID()
            let first = try await ContentAccessTests.check(b, user, p + "free", device: "tablet")
            XCTAssertEqual(first.status, .ok, String(buffer: first.body))
            let written = try await Self.lastSeen(user, "tablet")
            let hits = runtimeB.cacheHits("device_seen")
            for _ in 0..<3 {
                let again = try await ContentAccessTests.check(b, user, p + "free", device: "tablet")
                XCTAssertEqual(again.status, .ok)
            }
            XCTAssertEqual(runtimeB.cacheHits("device_seen"), hits + 3, "admitted from memory")
            let unchanged = try await Self.lastSeen(user, "tablet")
            XCTAssertEqual(unchanged, written, "not written again within the minute")
            b.clock.advance(by: 120)
            let later = try await ContentAccessTests.check(b, user, p + "free", device: "tablet")
            XCTAssertEqual(later.status, .ok)
            let moved = try await Self.lastSeen(user, "tablet")
            XCTAssertEqual(moved - written, 120, "written again after its minute (and its spread, under a minute more)")

            b.clock.advance(by: 16 * 60)
            for i in 1...5 {
                let r = try await ContentAccessTests.check(a, user, p + "free", device: "phone-\(i)")
                XCTAssertEqual(r.status, .ok, "phone-\(i)")
            }
            let back = try await ContentAccessTests.check(b, user, p + "free", device: "tablet")
            XCTAssertEqual(back.status, .tooManyRequests, "quiet for 16 minutes, its place taken")
        }
    }

    /// 20 first checks at once from 20 devices of one account, half on each replica: exactly
    /// 5 are admitted, the other 15 refused with 429; the 5 are the devices recorded.
    func testTwentyParallelFirstCallsFromTwentyDevicesAdmitExactlyFive() async throws {
        try await StatusCacheTests.runTwo { a, b, _ in
            let p = "v\(Int.random(in: 1000...9999))-"
            try await ContentAccessTests.rules(a, p)
            let user = UUID()
            let statuses = try await withThrowingTaskGroup(of: (String, HTTPResponse.Status).self) { group in
                for i in 0..<20 {
                    group.addTask {
                        let r = try await ContentAccessTests.check(i % 2 == 0 ? a : b, user, p + "free", device: "device-\(i)")
                        return ("device-\(i)", r.status)
                    }
                }
                var out: [(String, HTTPResponse.Status)] = []
                for try await s in group { out.append(s) }
                return out
            }
            let admitted = statuses.filter { $0.1 == .ok }.map(\.0)
            XCTAssertEqual(admitted.count, 5, "\(statuses)")
            XCTAssertEqual(statuses.filter { $0.1 == .tooManyRequests }.count, 15)
            let devices = try await a.scalar("SELECT count(*)::int FROM subscription.devices WHERE user_id = '\(user)'")
            XCTAssertEqual(devices, 5)
            // An admitted device is admitted again (from memory), a refused one still refused.
            for device in admitted {
                let again = try await ContentAccessTests.check(a, user, p + "free", device: device)
                XCTAssertEqual(again.status, .ok, device)
            }
            guard let refused = statuses.first(where: { $0.1 == .tooManyRequests })?.0 else { return XCTFail("no device refused") }
            let still = try await ContentAccessTests.check(b, user, p + "free", device: refused)
            XCTAssertEqual(still.status, .tooManyRequests)
        }
    }

    /// Checks answered at once by the hundred: every answered decision (granted or refused) is
    /// in the access log, once; none is answered before its row is stored.
    func testEveryAnsweredDecisionIsLoggedOnce() async throws {
        try await PurchaseTests.run { h in
            let p = "g\(Int.random(in: 1000...9999))-"
            try await ContentAccessTests.rules(h, p)
            let users = (0..<40).map { _ in UUID() }
            let answered = try await withThrowingTaskGroup(of: Int.self) { group in
                for (i, user) in users.enumerated() {
                    for k in 0..<5 {
                        group.addTask {
                            let r = try await ContentAccessTests.check(h, user, p + (k % 2 == 0 ? "free" : "premium"), device: "phone-\(i % 3)")
                            return r.status == .ok || r.status == .forbidden ? 1 : 0
                        }
                    }
                }
                var n = 0
                for try await one in group { n += one }
                return n
            }
            XCTAssertEqual(answered, 200)
            let list = users.map { "'\($0)'" }.joined(separator: ",")
            let logged = try await h.scalar("SELECT count(*)::int FROM subscription.access_logs WHERE user_id IN (\(list))")
            let refused = try await h.scalar("SELECT count(*)::int FROM subscription.access_logs WHERE user_id IN (\(list)) AND NOT access_granted")
            XCTAssertEqual(logged, 200)
            XCTAssertEqual(refused, 80, "each premium check refused and logged")
        }
    }

    /// A content rule changed by the operator is the next check's rule (on every replica
    /// within a second): the rule is held in memory only until its change is heard.
    func testAChangedContentRuleIsTheNextChecksRule() async throws {
        try await StatusCacheTests.runTwo { a, b, _ in
            let p = "r\(Int.random(in: 1000...9999))-"
            try await ContentAccessTests.rules(a, p)
            let user = UUID()
            for h in [a, b] {
                let open = try await ContentAccessTests.check(h, user, p + "free")
                XCTAssertEqual(open.status, .ok)
            }
            _ = try await a.scalar(
                "WITH u AS (UPDATE subscription.content_rules SET access_level = 'premium' WHERE content_id = '\(p)free' RETURNING 1) SELECT count(*)::int FROM u"
            )
            for h in [a, b] {
                let end = ContinuousClock.now + .seconds(1)
                while try await ContentAccessTests.check(h, user, p + "free").status != .forbidden {
                    guard ContinuousClock.now < end else { return XCTFail("the old rule is still applied after 1 s") }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
        }
    }
}

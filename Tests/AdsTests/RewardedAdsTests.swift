import AdsDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import ServiceLifecycle
import TestSupport
import WireTypes
import XCTest

@testable import AdsService

/// UC-ADS-4.1: eligibility, the request, the completion that earns one credit through the
/// outbox, and every alternate flow.
final class RewardedAdsTests: XCTestCase {
    func testMainFlowEarnsOneCreditAtSubscription() async throws {
        try await AdsHarness.run { h in
            try await h.provider("unity", priority: 2)
            try await h.provider("admob", priority: 1)
            let user = UUID()
            try await h.consent(user)
            let a = try await h.available(user)
            XCTAssertEqual(a.bool("available"), true)
            XCTAssertTrue(a.isNull("reason"))
            XCTAssertEqual(a.int("cooldown_seconds"), 0)
            XCTAssertTrue(a.isNull("next_available_at"))

            let (id, r) = try await h.request(user)
            let id1 = try XCTUnwrap(id)
            let body = try r.json([String: JSONValue].self)
            XCTAssertEqual(body.string("provider"), "admob")
            XCTAssertEqual(body.string("ad_unit_id"), "ca-app-pub-1/admob-rewarded")
            XCTAssertEqual(body.bool("can_show"), true)
            XCTAssertEqual(body.bool("test_mode"), false)
            XCTAssertEqual(body.bool("personalized"), true)

            for shown in [false, true] {
                let i = try await h.call(.post, "/ads/\(id1)/impression", user: user, json: #"{"loaded":true,"shown":\#(shown),"load_time_ms":1200}"#)
                XCTAssertEqual(i.status, .ok)
            }
            h.clock.advance(by: 31)
            let c = try await h.complete(user, id1)
            XCTAssertEqual(c.status, .ok)
            let done = try c.json([String: JSONValue].self)
            XCTAssertEqual(done.bool("reward_granted"), true)
            XCTAssertEqual(done.object("reward")?.int("amount"), 1)
            XCTAssertEqual(done.object("reward")?.string("type"), "credits")
            XCTAssertEqual(done.int("new_balance"), 1)
            XCTAssertEqual(done.string("reward_status"), "granted")
            XCTAssertEqual(h.upstream.balance(h.app, user), 1)
            let earned = h.upstream.references.withLock { Array($0.values) }
            XCTAssertEqual(earned.map(\.referenceID), [id1.uuidString.lowercased()])
            XCTAssertEqual(earned.map(\.source), ["ad_reward"])

            // 3c: the 30 s cooldown now runs.
            let after = try await h.available(user)
            XCTAssertEqual(after.bool("available"), false)
            XCTAssertEqual(after.string("reason"), "cooldown_active")
            XCTAssertEqual(after.int("cooldown_seconds"), 30)
            XCTAssertNotNil(after.string("next_available_at"))
            let refused = try await h.request(user).1
            XCTAssertEqual(refused.status, .tooManyRequests)
            XCTAssertEqual(try refused.envelope().error, "cooldown_active")
            XCTAssertEqual(refused.headers[.retryAfter], "30")
            h.clock.advance(by: 30)
            let again = try await h.available(user)
            XCTAssertEqual(again.bool("available"), true)
            let views = try await h.count("SELECT count(*)::int FROM ads.ad_views WHERE reward_granted AND ad_request_id = '\(id1)'")
            XCTAssertEqual(views, 1)
        }
    }

    func testDailyLimitOfTenThenNextDay() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            for _ in 0..<10 {
                let done = try await h.watch(user)
                XCTAssertEqual(done.bool("reward_granted"), true)
            }
            XCTAssertEqual(h.upstream.balance(h.app, user), 10)
            h.clock.advance(by: 60)
            let a = try await h.available(user)
            XCTAssertEqual(a.bool("available"), false)
            XCTAssertEqual(a.string("reason"), "daily_limit_reached")
            XCTAssertTrue(a.isNull("cooldown_seconds"))
            XCTAssertEqual(a.string("next_available_at"), JSON.iso8601(AdRules.nextDay(after: h.clock.now())))
            let r = try await h.request(user).1
            XCTAssertEqual(r.status, .tooManyRequests)
            XCTAssertEqual(try r.envelope().error, "daily_limit_reached")
            // Midnight UTC resets the counters.
            h.clock.set(AdRules.nextDay(after: h.clock.now()).addingTimeInterval(1))
            let tomorrow = try await h.available(user)
            XCTAssertEqual(tomorrow.bool("available"), true)
            let next = try await h.watch(user)
            XCTAssertEqual(next.bool("reward_granted"), true)
            XCTAssertEqual(h.upstream.balance(h.app, user), 11)
        }
    }

    func testClosedEarlyTooShortAndImplausibleEarnNothing() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            // 18a: closed before the end: nothing, and a 15 s cooldown.
            let (id, _) = try await h.request(user)
            h.clock.advance(by: 10)
            let c = try await h.complete(user, try XCTUnwrap(id), completed: false, ms: 9000).json([String: JSONValue].self)
            XCTAssertEqual(c.bool("reward_granted"), false)
            XCTAssertEqual(c.string("reason"), "not_completed")
            XCTAssertEqual(c.int("cooldown_seconds"), 15)
            let a = try await h.available(user)
            XCTAssertEqual(a.string("reason"), "cooldown_active")
            XCTAssertEqual(a.int("cooldown_seconds"), 15)
            h.clock.advance(by: 16)
            // 21a: under 80 % of the 30 s ad (24 s).
            let (id2, _) = try await h.request(user)
            h.clock.advance(by: 31)
            let short = try await h.complete(user, try XCTUnwrap(id2), ms: 23_999).json([String: JSONValue].self)
            XCTAssertEqual(short.bool("reward_granted"), false)
            XCTAssertEqual(short.string("reason"), "display_too_short")
            // More display time than has passed since the request.
            let (id3, _) = try await h.request(user)
            h.clock.advance(by: 10)
            let fast = try await h.complete(user, try XCTUnwrap(id3), ms: 30_000).json([String: JSONValue].self)
            XCTAssertEqual(fast.bool("reward_granted"), false)
            XCTAssertEqual(fast.string("reason"), "implausible_duration")
            XCTAssertEqual(h.upstream.earnCalls.withLock { $0 }, 0)
            let recorded = try await h.count("SELECT count(*)::int FROM ads.ad_views WHERE user_id = '\(user)' AND NOT reward_granted")
            XCTAssertEqual(recorded, 3)
        }
    }

    func testCompletingTwiceGrantsOnce() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            let (id, _) = try await h.request(user)
            h.clock.advance(by: 31)
            let first = try await h.complete(user, try XCTUnwrap(id)).json([String: JSONValue].self)
            let second = try await h.complete(user, try XCTUnwrap(id)).json([String: JSONValue].self)
            XCTAssertEqual(first.bool("reward_granted"), true)
            XCTAssertEqual(second.bool("reward_granted"), true)
            XCTAssertEqual(second.int("new_balance"), 1)
            XCTAssertEqual(h.upstream.balance(h.app, user), 1)
            XCTAssertEqual(h.upstream.earnCalls.withLock { $0 }, 1)
            let rewards = try await h.count("SELECT count(*)::int FROM ads.pending_rewards WHERE user_id = '\(user)'")
            XCTAssertEqual(rewards, 1)
        }
    }

    /// Seed 21c: subscription failing or slow: the answer says pending, the outbox delivers
    /// later, exactly once.
    func testSubscriptionFailingOrSlowLeavesTheRewardPendingThenDelivered() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            h.upstream.mode.withLock { $0 = .failing }
            let failed = try await h.watch(user)
            XCTAssertEqual(failed.bool("reward_granted"), true)
            XCTAssertEqual(failed.string("reward_status"), "pending")
            XCTAssertNil(failed.int("new_balance"))
            h.clock.advance(by: 31)
            h.upstream.mode.withLock { $0 = .slow(.seconds(3)) }
            let slow = try await h.watch(user)
            XCTAssertEqual(slow.string("reward_status"), "pending")
            h.upstream.mode.withLock { $0 = .up }
            try await Task.sleep(for: .seconds(3))
            var rounds = 0
            while try await h.pendingRewards() > 0 && rounds < 100 {
                try await h.runtime.outboxWorker.deliverBatch()
                try await Task.sleep(for: .milliseconds(200))
                rounds += 1
            }
            XCTAssertEqual(h.upstream.balance(h.app, user), 2)
            XCTAssertEqual(h.upstream.totalCredited(app: h.app), 2)
        }
    }

    /// With subscription down, 1,000 completed rewarded views (100 users × the daily 10); when
    /// it comes back, exactly 1,000 credits arrive.
    func testThousandViewsWhileSubscriptionIsDownArriveExactlyOnce() async throws {
        try await AdsHarness.run(startUpstream: false) { h in
            try await h.provider()
            let users = (0..<100).map { _ in UUID() }
            for u in users { try await h.consent(u) }
            for _ in 0..<10 {
                h.clock.advance(by: 31)
                let ids = try await withThrowingTaskGroup(of: (UUID, UUID?).self) { group in
                    for u in users {
                        group.addTask {
                            let (id, r) = try await h.request(u)
                            if id == nil { XCTFail(String(buffer: r.body)) }
                            return (u, id)
                        }
                    }
                    return try await group.reduce(into: [(UUID, UUID?)]()) { $0.append($1) }
                }
                h.clock.advance(by: 31)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (u, id) in ids {
                        group.addTask {
                            let r = try await h.complete(u, try XCTUnwrap(id)).json([String: JSONValue].self)
                            XCTAssertEqual(r.string("reward_status"), "pending")
                        }
                    }
                    try await group.waitForAll()
                }
            }
            let pending = try await h.pendingRewards()
            XCTAssertEqual(pending, 1000)
            // Subscription comes back on the same address.
            let server = ServiceGroup(configuration: .init(services: [h.upstream.application()], logger: TestEnvironment.logger))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await server.run() }
                try await AdsHarness.waitForPort(h.upstream.port)
                try await h.runtime.db.query("UPDATE ads.outbox SET next_attempt_at = now()", logger: TestEnvironment.logger)
                var rounds = 0
                while try await h.pendingRewards() > 0 && rounds < 200 {
                    try await h.runtime.outboxWorker.deliverBatch()
                    rounds += 1
                }
                try await stopLocalServer(server, in: &group)
            }
            XCTAssertEqual(h.upstream.totalCredited(app: h.app), 1000)
            let perUser = h.upstream.references.withLock { refs in
                Dictionary(grouping: refs.values.filter { $0.appID == h.app }, by: \.userID).mapValues { $0.reduce(0) { $0 + $1.amount } }
            }
            XCTAssertEqual(perUser.count, 100)
            XCTAssertEqual(Set(perUser.values), [10])
            XCTAssertEqual(Set(users.map { h.upstream.balance(h.app, $0) }), [10])
        }
    }

    /// 50 parallel available + request + complete cycles for one user: one passes the 30 s
    /// cooldown; across rounds the daily cap of 10 holds.
    func testParallelCyclesNeverExceedTheCap() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            @Sendable func cycles(_ n: Int) async throws -> Int {
                let ids = try await withThrowingTaskGroup(of: UUID?.self) { group in
                    for _ in 0..<n {
                        group.addTask {
                            _ = try await h.available(user)
                            return try await h.request(user).0
                        }
                    }
                    return try await group.reduce(into: [UUID]()) { if let id = $1 { $0.append(id) } }
                }
                h.clock.advance(by: 31)
                var granted = 0
                for id in ids where try await h.complete(user, id).json([String: JSONValue].self).bool("reward_granted") == true { granted += 1 }
                h.clock.advance(by: 31)
                return granted
            }
            let first = try await cycles(50)
            XCTAssertEqual(first, 1)
            var total = 1
            for _ in 0..<12 { total += try await cycles(5) }
            XCTAssertEqual(total, 10)
            XCTAssertEqual(h.upstream.balance(h.app, user), 10)
            let counted = try await h.count("SELECT rewarded_views FROM ads.user_ad_limits WHERE user_id = '\(user)'")
            XCTAssertEqual(counted, 10)
        }
    }

    func testPremiumUsersGetNoAdsAndConsentIsRequiredInTheEU() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let premium = UUID()
            try await h.makePremium(premium)
            try await h.consent(premium)
            let p = try await h.available(premium)
            XCTAssertEqual(p.bool("available"), false)
            XCTAssertEqual(p.string("reason"), "premium_user")
            let pr = try await h.request(premium).1
            XCTAssertEqual(pr.status, .forbidden)
            XCTAssertEqual(try pr.envelope().error, "ads_disabled_premium")

            // No consent yet, region unknown or in the EU: consent first.
            let fresh = UUID()
            let a = try await h.available(fresh)
            XCTAssertEqual(a.string("reason"), "consent_required")
            let r = try await h.request(fresh).1
            XCTAssertEqual(r.status, .forbidden)
            XCTAssertEqual(try r.envelope().error, "consent_required")
            // 2a: outside the EU consent is implicit.
            let us = try await h.call(.get, "/ads/available?ad_type=rewarded&country=US", user: fresh).json([String: JSONValue].self)
            XCTAssertEqual(us.bool("available"), true)
            // 7b: refusing personalisation still allows (non-personalised) rewarded ads.
            try await h.consent(fresh, personalized: false)
            let (id, resp) = try await h.request(fresh)
            XCTAssertNotNil(id)
            XCTAssertEqual(try resp.json([String: JSONValue].self).bool("personalized"), false)
        }
    }

    func testNoProviderUnknownRequestAndBadInput() async throws {
        try await AdsHarness.run { h in
            let user = UUID()
            try await h.consent(user)
            let none = try await h.request(user).1
            XCTAssertEqual(none.status, .serviceUnavailable)
            XCTAssertEqual(try none.envelope().error, "no_ad_provider")
            try await h.provider()
            let cases: [(String, String, HTTPResponse.Status, String?)] = [
                ("/ads/request", #"{"ad_type":"banner"}"#, .unprocessableContent, "ad_type"),
                ("/ads/request", #"{"ad_type":5}"#, .badRequest, "ad_type"),
                ("/ads/request", #"{"placement":"x"}"#, .badRequest, "ad_type"),
                ("/ads/request", #"{"ad_type":"rewarded","placement":"<script>"}"#, .unprocessableContent, "placement"),
                ("/ads/\(UUID())/complete", #"{"completed":true,"display_duration_ms":30000}"#, .notFound, nil),
                ("/ads/not-a-uuid/complete", #"{"completed":true,"display_duration_ms":30000}"#, .badRequest, "id"),
                ("/ads/\(UUID())/impression", #"{"loaded":"yes","shown":false}"#, .badRequest, "loaded"),
            ]
            for (path, json, status, field) in cases {
                let r = try await h.call(.post, path, user: user, json: json)
                XCTAssertEqual(r.status, status, "\(path) \(json): \(String(buffer: r.body))")
                if let field { XCTAssertEqual(try r.envelope().extra["field"], .string(field), json) }
            }
            let (id, _) = try await h.request(user)
            let id1 = try XCTUnwrap(id)
            let negative = try await h.complete(user, id1, ms: -1)
            XCTAssertEqual(negative.status, .unprocessableContent)
            let shownNotLoaded = try await h.call(.post, "/ads/\(id1)/impression", user: user, json: #"{"loaded":false,"shown":true}"#)
            XCTAssertEqual(shownNotLoaded.status, .unprocessableContent)
            // Another user cannot complete it; another tenant's token is refused.
            let other = try await h.complete(UUID(), id1, impression: false)
            XCTAssertEqual(other.status, .notFound)
            var foreign = try h.headers(user)
            foreign[.authorization] = "Bearer \(try h.token(user, app: UUID()))"
            let t = try await h.call(.get, "/ads/available?ad_type=rewarded", headers: foreign)
            XCTAssertEqual(t.status, .unauthorized)
            let missing = try await h.call(.get, "/ads/available", user: user)
            XCTAssertEqual(missing.status, .badRequest)
            let big = try await h.call(
                .post,
                "/ads/request",
                user: user,
                json: #"{"ad_type":"rewarded","placement":"\#(String(repeating: "a", count: 3_000_000))"}"#
            )
            XCTAssertEqual(big.status, .contentTooLarge)
            // An hour later the request can no longer be completed.
            h.clock.advance(by: 3700)
            let late = try await h.complete(user, id1)
            XCTAssertEqual(late.status, .gone)
            XCTAssertEqual(try late.envelope().error, "ad_request_expired")
        }
    }
}

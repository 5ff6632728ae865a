import AdsDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AdsService

/// #13: what a client in the attacker's hands cannot take from the ads service, each written
/// as the attack and asserting the refusal and that nothing changed.
final class HostileClientAdsTests: XCTestCase {
    /// No impression, no reward: `complete` for an ad never reported on screen earns nothing and
    /// counts for nothing (rewarded and interstitial alike).
    func testACompletionWithoutAnImpressionEarnsNothing() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            let (rid, _) = try await h.request(user)
            let id = try XCTUnwrap(rid)
            h.clock.advance(by: 31)
            let bare = try await h.complete(user, id, impression: false)
            XCTAssertEqual(bare.status, .conflict)
            XCTAssertEqual(try bare.envelope().error, "ad_not_shown")
            // Loaded but never on screen is not shown either.
            let loaded = try await h.call(.post, "/ads/\(id)/impression", user: user, json: #"{"loaded":true,"shown":false}"#)
            XCTAssertEqual(loaded.status, .ok)
            let stillBare = try await h.complete(user, id, impression: false)
            XCTAssertEqual(stillBare.status, .conflict)
            for sql in [
                "SELECT count(*)::int FROM ads.pending_rewards WHERE user_id = '\(user)'",
                "SELECT count(*)::int FROM ads.ad_views WHERE ad_request_id = '\(id)'",
                "SELECT count(*)::int FROM ads.ad_requests WHERE id = '\(id)' AND completed_at IS NOT NULL",
            ] {
                let n = try await h.count(sql)
                XCTAssertEqual(n, 0, sql)
            }
            XCTAssertEqual(h.upstream.balance(h.app, user), 0)
            // Shown, then completed: the credit.
            let done = try await h.complete(user, id).json([String: JSONValue].self)
            XCTAssertEqual(done.bool("reward_granted"), true)
            XCTAssertEqual(h.upstream.balance(h.app, user), 1)

            // Interstitial: not counted without its impression.
            h.clock.advance(by: 200)
            let (iid, ir) = try await h.request(user, "interstitial", placement: "post_quiz")
            let inter = try XCTUnwrap(iid, String(buffer: ir.body))
            h.clock.advance(by: 6)
            let i = try await h.complete(user, inter, ms: 6000, impression: false)
            XCTAssertEqual(i.status, .conflict)
            let views = try await h.count("SELECT count(*)::int FROM ads.ad_views WHERE ad_request_id = '\(inter)'")
            XCTAssertEqual(views, 0)
        }
    }

    /// Client-reported revenue is bounded by the provider's eCPM estimate and flagged above it:
    /// one call cannot move a tenant's revenue by $1,000.
    func testClientRevenueIsBoundedByTheProvidersEstimate() async throws {
        try await AdsHarness.run { h in
            try await h.provider("admob", ecpm: 10)
            let user = UUID()
            try await h.consent(user)
            _ = try await h.watch(user, revenue: 1000)
            _ = try await h.watch(user, revenue: 0.04)
            let capped = try await h.count(
                """
                SELECT count(*)::int FROM ads.ad_views WHERE user_id = '\(user)' AND revenue_source = 'client_capped' AND revenue_usd = 0.1
                """
            )
            XCTAssertEqual(capped, 1, "counted at 10 × the $10 eCPM per impression, and flagged")
            let kept = try await h.count(
                """
                SELECT count(*)::int FROM ads.ad_views WHERE user_id = '\(user)' AND revenue_source = 'client' AND revenue_usd = 0.04
                """
            )
            XCTAssertEqual(kept, 1)
            _ = try await h.call(.post, "/analytics/refresh")
            let day = AdStore.day(h.clock.now())
            let report = try await h.call(.get, "/analytics/revenue?start_date=\(day)&end_date=\(day)").json([String: JSONValue].self)
            XCTAssertLessThanOrEqual(try XCTUnwrap(report.double("total_revenue")), 0.14 + 0.0001)
            XCTAssertEqual(AdRules.clientRevenue(5, ecpmEstimateUSD: nil).counted, AdRules.clientRevenueDefaultCeiling)
            XCTAssertEqual(AdRules.clientRevenue(nil, ecpmEstimateUSD: 10).counted, nil)
            XCTAssertEqual(AdRules.clientRevenue(0.01, ecpmEstimateUSD: 10).flagged, false)
        }
    }

    /// COPPA: once under age, the bare flag cannot clear it; only a birth date making the user
    /// 13 or older does.
    func testUnderAgeSticksUntilABirthDateSaysOtherwise() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let child = UUID()
            try await h.consent(child, personalized: true, underAge: true)
            let rows = try await h.count("SELECT count(*)::int FROM ads.user_consent_ads WHERE user_id = '\(child)'")
            let cleared = try await h.call(.post, "/ads/consent", user: child, json: #"{"is_under_age":false,"consent_personalized_ads":true}"#)
            XCTAssertEqual(cleared.status, .forbidden)
            XCTAssertEqual(try cleared.envelope().error, "age_verification_required")
            XCTAssertEqual(try cleared.envelope().extra["field"], .string("birth_date"))
            let after = try await h.count("SELECT count(*)::int FROM ads.user_consent_ads WHERE user_id = '\(child)'")
            XCTAssertEqual(after, rows, "nothing written")
            var a = try await h.available(child)
            XCTAssertEqual(a.string("reason"), "under_age")
            // Other fields still change; the child stays a child.
            let att = try await h.call(.post, "/ads/consent", user: child, json: #"{"att_status":"denied"}"#)
            XCTAssertEqual(att.status, .ok)
            // A birth date that makes him 10: still under age, whatever the flag says.
            let calendar = Calendar(identifier: .gregorian)
            func birth(yearsAgo: Int) -> String {
                let d = calendar.date(byAdding: .year, value: -yearsAgo, to: h.clock.now())!.addingTimeInterval(-86400 * 2)
                return String(JSON.iso8601(d).prefix(10))
            }
            let ten = try await h.call(.post, "/ads/consent", user: child, json: #"{"is_under_age":false,"birth_date":"\#(birth(yearsAgo: 10))"}"#)
            XCTAssertEqual(ten.status, .ok)
            XCTAssertEqual(try ten.json([String: JSONValue].self).object("consent")?.bool("is_under_age"), true)
            for bad in ["2020-02-30", "yesterday", "1800-01-01", String(JSON.iso8601(h.clock.now() + 86400 * 3).prefix(10))] {
                let r = try await h.call(.post, "/ads/consent", user: child, json: #"{"birth_date":"\#(bad)"}"#)
                XCTAssertEqual(r.status, .unprocessableContent, bad)
                XCTAssertEqual(try r.envelope().extra["field"], .string("birth_date"), bad)
            }
            a = try await h.available(child)
            XCTAssertEqual(a.string("reason"), "under_age")
            // The age gate with a birth date 20 years ago clears it.
            let adult = try await h.call(
                .post,
                "/ads/consent",
                user: child,
                json: #"{"birth_date":"\#(birth(yearsAgo: 20))","consent_personalized_ads":true}"#
            )
            XCTAssertEqual(adult.status, .ok, String(buffer: adult.body))
            a = try await h.available(child)
            XCTAssertEqual(a.bool("available"), true)
            // And a user who was never a child can still say so with the flag.
            let other = UUID()
            try await h.consent(other)
            let claimed = try await h.call(.post, "/ads/consent", user: other, json: #"{"is_under_age":true}"#)
            XCTAssertEqual(try claimed.json([String: JSONValue].self).object("consent")?.bool("is_under_age"), true)
        }
    }

    func testAgeGateRule() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)  // 2027-01-15
        let thirteenToday = AgeGate.parse("2014-01-15")!
        XCTAssertEqual(AgeGate.decide(previous: true, claimed: false, birth: nil, now: now), .birthDateRequired)
        XCTAssertEqual(AgeGate.decide(previous: true, claimed: nil, birth: nil, now: now), .underAge(true))
        XCTAssertEqual(AgeGate.decide(previous: false, claimed: true, birth: nil, now: now), .underAge(true))
        XCTAssertEqual(AgeGate.decide(previous: true, claimed: false, birth: thirteenToday, now: now), .underAge(false))
        XCTAssertEqual(AgeGate.decide(previous: false, claimed: false, birth: AgeGate.parse("2014-01-16")!, now: now), .underAge(true))
        XCTAssertEqual(AgeGate.decide(previous: false, claimed: nil, birth: AgeGate.parse("2030-01-01")!, now: now), .implausibleBirthDate)
        XCTAssertNil(AgeGate.parse("2023-02-29"))
        XCTAssertNotNil(AgeGate.parse("2024-02-29"))
    }

    /// A campaign that has not begun says so, with its start.
    func testACampaignNotStartedSaysWhenItStarts() async throws {
        try await AdsHarness.run { h in
            let starts = h.clock.now().addingTimeInterval(2 * 86400)
            let r = try await h.call(
                .post,
                "/admin/campaigns",
                json: """
                    {"name":"Bientôt","campaign_type":"streak_bonus","reward":{"type":"credits","amount":5},"conditions":{"streak_days":2},
                     "starts_at":"\(JSON.iso8601(starts))","ends_at":"\(JSON.iso8601(starts + 7 * 86400))"}
                    """
            )
            XCTAssertEqual(r.status, .created, String(buffer: r.body))
            let id = try XCTUnwrap(try r.json([String: JSONValue].self).string("id"))
            let user = UUID()
            for path in ["/campaigns/\(id)", "/campaigns/\(id)/claim-reward"] {
                let e = try await h.call(.post, path, user: user)
                XCTAssertEqual(e.status, .badRequest, path)
                XCTAssertEqual(try e.envelope().error, "campaign_not_started", path)
                XCTAssertEqual(try e.envelope().extra["starts_at"], .string(JSON.iso8601(starts)), path)
            }
            let rows = try await h.count("SELECT count(*)::int FROM ads.campaign_participations WHERE user_id = '\(user)'")
            XCTAssertEqual(rows, 0)
        }
    }

    /// A replayed `complete` or `claim-reward` answers the truth now: a credit that landed after
    /// the first (pending) answer is `granted` with its `new_balance`.
    func testReplaysAnswerTheCreditAsItIsNow() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            // Subscription slower than the delivery timeout: the first answer is pending, but
            // the credit lands.
            h.upstream.mode.withLock { $0 = .slow(.seconds(2)) }
            h.clock.advance(by: 31)
            let (rid, _) = try await h.request(user)
            let id = try XCTUnwrap(rid)
            h.clock.advance(by: 31)
            let first = try await h.complete(user, id).json([String: JSONValue].self)
            XCTAssertEqual(first.string("reward_status"), "pending")
            h.upstream.mode.withLock { $0 = .up }
            try await Task.sleep(for: .seconds(2.5))
            XCTAssertEqual(h.upstream.balance(h.app, user), 1, "the credit landed")
            let replay = try await h.complete(user, id, impression: false).json([String: JSONValue].self)
            XCTAssertEqual(replay.string("reward_status"), "granted")
            XCTAssertEqual(replay.int("new_balance"), 1)
            XCTAssertEqual(h.upstream.balance(h.app, user), 1, "asking again credits nothing twice")
            let delivered = try await h.count(
                "SELECT count(*)::int FROM ads.outbox WHERE status = 'delivered' AND body->>'reference_id' = '\(id.uuidString.lowercased())'"
            )
            XCTAssertEqual(delivered, 1)

            // Subscription down at the claim, delivered by the worker later: the second claim is
            // the seed's already_claimed, with the truth.
            let campaign = try await CampaignsAndAnalyticsTests.createCampaign(
                h,
                type: "watch_ads",
                condition: "min_ads_watched",
                required: 1,
                amount: 5
            )
            _ = try await h.watch(user)
            h.upstream.mode.withLock { $0 = .failing }
            let claim = try await h.call(.post, "/campaigns/\(campaign)/claim-reward", user: user).json([String: JSONValue].self)
            XCTAssertEqual(claim.string("reward_status"), "pending")
            h.upstream.mode.withLock { $0 = .up }
            var rounds = 0
            while try await h.pendingRewards() > 0 && rounds < 50 {
                try await h.runtime.outboxWorker.deliverBatch()
                try await Task.sleep(for: .milliseconds(200))
                rounds += 1
            }
            let again = try await h.call(.post, "/campaigns/\(campaign)/claim-reward", user: user)
            XCTAssertEqual(again.status, .badRequest)
            let e = try again.envelope()
            XCTAssertEqual(e.error, "already_claimed")
            XCTAssertEqual(e.extra["reward_status"], .string("granted"))
            XCTAssertEqual(e.extra["new_balance"], .int(h.upstream.balance(h.app, user)))
            XCTAssertEqual(h.upstream.balance(h.app, user), 7)
        }
    }
}

import AdsDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AdsService

/// UC-ADS-4.4 campaigns (watch ads, streak, referral; claims) and UC-ADS-4.5 revenue analytics.
final class CampaignsAndAnalyticsTests: XCTestCase {
    static func createCampaign(
        _ h: AdsHarness,
        type: String,
        condition: String,
        required: Int,
        amount: Int,
        days: Double = 7,
        placement: String? = nil
    ) async throws -> UUID {
        let ends = JSON.iso8601(h.clock.now().addingTimeInterval(days * 86400))
        let starts = JSON.iso8601(h.clock.now().addingTimeInterval(-60))
        let placementPart = placement.map { #","placement":"\#($0)""# } ?? ""
        let r = try await h.call(
            .post,
            "/admin/campaigns",
            json: """
                {"name":"Semaine Bonus","description":"Regardez \(required) pubs, gagnez \(amount) crédits !","campaign_type":"\(type)",
                 "reward":{"type":"credits","amount":\(amount)},"conditions":{"\(condition)":\(required)\(placementPart)},
                 "starts_at":"\(starts)","ends_at":"\(ends)"}
                """
        )
        XCTAssertEqual(r.status, .created, String(buffer: r.body))
        return UUID(uuidString: try r.json([String: JSONValue].self).string("id") ?? "")!
    }

    func testWatchAdsCampaignCountsServerSideAndClaimsOnce() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            let id = try await Self.createCampaign(h, type: "watch_ads", condition: "min_ads_watched", required: 3, amount: 10)
            let other = try await Self.createCampaign(
                h,
                type: "watch_ads",
                condition: "min_ads_watched",
                required: 2,
                amount: 5,
                placement: "unlock_content"
            )
            let active = try await h.call(.get, "/campaigns/active", user: user).json([String: [[String: JSONValue]]].self)["campaigns"] ?? []
            XCTAssertEqual(active.count, 2)
            let mine = try XCTUnwrap(active.first { $0.string("id") == id.lowercasedString })
            XCTAssertEqual(mine.object("progress")?.int("current"), 0)
            XCTAssertEqual(mine.object("progress")?.int("required"), 3)
            XCTAssertEqual(mine.object("reward")?.int("amount"), 10)
            XCTAssertEqual(mine.object("conditions")?.int("min_ads_watched"), 3)

            // Claiming early is refused; the client cannot push progress.
            let early = try await h.call(.post, "/campaigns/\(id)/claim-reward", user: user)
            XCTAssertEqual(early.status, .badRequest)
            XCTAssertEqual(try early.envelope().error, "campaign_not_completed")
            let pushed = try await h.call(.post, "/campaigns/\(id)", user: user, json: #"{"progress":3}"#).json([String: JSONValue].self)
            XCTAssertEqual(pushed.int("progress"), 0)

            for expected in 1...3 {
                _ = try await h.watch(user)
                let p = try await h.call(.post, "/campaigns/\(id)", user: user).json([String: JSONValue].self)
                XCTAssertEqual(p.int("progress"), expected)
                XCTAssertEqual(p.bool("completed"), expected == 3)
                XCTAssertEqual(p.bool("can_claim_reward"), expected == 3)
            }
            // 12a: views at another placement do not count for the placement-bound campaign.
            let o = try await h.call(.get, "/campaigns/\(other)", user: user).json([String: JSONValue].self)
            XCTAssertEqual(o.object("progress")?.int("current"), 0)

            let claim = try await h.call(.post, "/campaigns/\(id)/claim-reward", user: user)
            XCTAssertEqual(claim.status, .ok, String(buffer: claim.body))
            let c = try claim.json([String: JSONValue].self)
            XCTAssertEqual(c.bool("claimed"), true)
            XCTAssertEqual(c.object("reward")?.int("amount"), 10)
            XCTAssertEqual(c.int("new_balance"), 13)
            let promo = h.upstream.references.withLock { $0.values.filter { $0.source == "promo" } }
            XCTAssertEqual(promo.map(\.amount), [10])
            XCTAssertEqual(promo.first?.referenceID, "campaign:\(id.uuidString.lowercased()):\(user.uuidString.lowercased())")
            // 23a: once.
            let again = try await h.call(.post, "/campaigns/\(id)/claim-reward", user: user)
            XCTAssertEqual(again.status, .badRequest)
            XCTAssertEqual(try again.envelope().error, "already_claimed")
            XCTAssertEqual(h.upstream.balance(h.app, user), 13)
        }
    }

    func testExpiredCampaignKeepsProgressButPaysNothing() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            let id = try await Self.createCampaign(h, type: "watch_ads", condition: "min_ads_watched", required: 5, amount: 10, days: 0.01)
            _ = try await h.watch(user)
            _ = try await h.watch(user)
            h.clock.advance(by: 3600)
            let claim = try await h.call(.post, "/campaigns/\(id)/claim-reward", user: user)
            XCTAssertEqual(claim.status, .badRequest)
            let e = try claim.envelope()
            XCTAssertEqual(e.error, "campaign_expired")
            XCTAssertEqual(e.extra["progress"], .int(2))
            let active = try await h.call(.get, "/campaigns/active", user: user).json([String: [[String: JSONValue]]].self)["campaigns"] ?? []
            XCTAssertFalse(active.contains { $0.string("id") == id.lowercasedString })
            let shown = try await h.call(.get, "/campaigns/\(id)", user: user).json([String: JSONValue].self)
            XCTAssertEqual(shown.string("status"), "expired")
            XCTAssertEqual(shown.object("progress")?.int("current"), 2)
            // Admin ends a running one: it stops at once.
            let running = try await Self.createCampaign(h, type: "watch_ads", condition: "min_ads_watched", required: 1, amount: 1)
            let ended = try await h.call(.post, "/admin/campaigns/\(running)/end")
            XCTAssertEqual(ended.status, .ok)
            let gone = try await h.call(.get, "/campaigns/active", user: user).json([String: [[String: JSONValue]]].self)["campaigns"] ?? []
            XCTAssertFalse(gone.contains { $0.string("id") == running.lowercasedString })
            let unknown = try await h.call(.get, "/campaigns/\(UUID())", user: user)
            XCTAssertEqual(unknown.status, .notFound)
        }
    }

    func testStreakCountsConsecutiveDays() async throws {
        try await AdsHarness.run { h in
            let user = UUID()
            let id = try await Self.createCampaign(h, type: "streak_bonus", condition: "streak_days", required: 3, amount: 20, days: 30)
            func checkIn() async throws -> Int? {
                try await h.call(.post, "/campaigns/\(id)", user: user).json([String: JSONValue].self).int("progress")
            }
            let v1 = try await checkIn()
            XCTAssertEqual(v1, 1)
            let v2 = try await checkIn()
            XCTAssertEqual(v2, 1, "twice a day counts once")
            h.clock.advance(by: 86400)
            let v3 = try await checkIn()
            XCTAssertEqual(v3, 2)
            h.clock.advance(by: 2 * 86400)
            let v4 = try await checkIn()
            XCTAssertEqual(v4, 1, "a missed day restarts the streak")
            h.clock.advance(by: 86400)
            _ = try await checkIn()
            h.clock.advance(by: 86400)
            let done = try await h.call(.post, "/campaigns/\(id)", user: user).json([String: JSONValue].self)
            XCTAssertEqual(done.int("progress"), 3)
            XCTAssertEqual(done.bool("can_claim_reward"), true)
            let claim = try await h.call(.post, "/campaigns/\(id)/claim-reward", user: user).json([String: JSONValue].self)
            XCTAssertEqual(claim.int("new_balance"), 20)
        }
    }

    func testReferralCodesRedeemedByOthers() async throws {
        try await AdsHarness.run { h in
            let referrer = UUID()
            let id = try await Self.createCampaign(h, type: "referral", condition: "referrals_count", required: 2, amount: 50, days: 30)
            let code = try await h.call(.get, "/referral/code", user: referrer).json([String: String].self)["code"] ?? ""
            XCTAssertEqual(code.count, 8)
            let same = try await h.call(.get, "/referral/code", user: referrer).json([String: String].self)["code"]
            XCTAssertEqual(same, code)
            let own = try await h.call(.post, "/referral/redeem", user: referrer, json: #"{"code":"\#(code)"}"#)
            XCTAssertEqual(try own.envelope().error, "own_referral_code")
            let friend = UUID()
            let v5 = try await h.call(.post, "/referral/redeem", user: friend, json: #"{"code":"\#(code.lowercased())"}"#).status
            XCTAssertEqual(v5, .ok)
            let twice = try await h.call(.post, "/referral/redeem", user: friend, json: #"{"code":"\#(code)"}"#)
            XCTAssertEqual(twice.status, .conflict)
            let unknown = try await h.call(.post, "/referral/redeem", user: friend, json: #"{"code":"ZZZZZZZZ"}"#)
            XCTAssertEqual(unknown.status, .notFound)
            // #13: a friend who never played does not count ("install and play", 4.4).
            var p = try await h.call(.post, "/campaigns/\(id)", user: referrer).json([String: JSONValue].self)
            XCTAssertEqual(p.int("progress"), 0, "redeeming alone counts for nothing")
            let idle = UUID()
            let redeemedIdle = try await h.call(.post, "/referral/redeem", user: idle, json: #"{"code":"\#(code)"}"#).json([String: JSONValue].self)
            XCTAssertEqual(redeemedIdle.bool("counted"), false)
            XCTAssertEqual(redeemedIdle.string("counts_after"), "first_rewarded_view")
            p = try await h.call(.post, "/campaigns/\(id)", user: referrer).json([String: JSONValue].self)
            XCTAssertEqual(p.int("progress"), 0)
            // The first friend plays (a rewarded view the server grants): his referral counts, once.
            try await h.provider()
            try await h.consent(friend)
            _ = try await h.watch(friend)
            _ = try await h.watch(friend)
            p = try await h.call(.post, "/campaigns/\(id)", user: referrer).json([String: JSONValue].self)
            XCTAssertEqual(p.int("progress"), 1, "one friend, counted once however many ads he watches")
            // A friend who had already played counts at redemption.
            let player = UUID()
            try await h.consent(player)
            _ = try await h.watch(player)
            let redeemedPlayer = try await h.call(.post, "/referral/redeem", user: player, json: #"{"code":"\#(code)"}"#).json(
                [String: JSONValue].self
            )
            XCTAssertEqual(redeemedPlayer.bool("counted"), true)
            p = try await h.call(.post, "/campaigns/\(id)", user: referrer).json([String: JSONValue].self)
            XCTAssertEqual(p.int("progress"), 2)
            XCTAssertEqual(p.bool("can_claim_reward"), true)
        }
    }

    func testAdminRoutesNeedTheAdminCredentialAndValidInput() async throws {
        try await AdsHarness.run { h in
            var userHeaders = try h.headers(UUID())
            let r = try await h.call(.get, "/analytics/revenue", headers: userHeaders)
            XCTAssertEqual(r.status, .unauthorized)
            XCTAssertEqual(try r.envelope().error, "invalid_admin_credential")
            userHeaders[.authorization] = "Bearer wrong"
            let v7 = try await h.call(.put, "/admin/providers/admob", json: "{}", headers: userHeaders).status
            XCTAssertEqual(v7, .unauthorized)
            let cases: [(String, String, String)] = [
                ("/admin/providers/AdMob!", "{}", "name"),
                ("/admin/providers/admob", #"{"verification":"trust-me"}"#, "verification"),
                ("/admin/providers/admob", #"{"ad_duration_seconds":0}"#, "ad_duration_seconds"),
            ]
            for (path, json, field) in cases {
                let bad = try await h.call(.put, path, json: json)
                XCTAssertEqual(bad.status, .unprocessableContent, json)
                XCTAssertEqual(try bad.envelope().extra["field"], .string(field))
            }
            let badCampaign = try await h.call(
                .post,
                "/admin/campaigns",
                json: """
                    {"name":"x","campaign_type":"watch_ads","reward":{"amount":5},"conditions":{"streak_days":3},"ends_at":"2099-01-01T00:00:00Z"}
                    """
            )
            XCTAssertEqual(try badCampaign.envelope().extra["field"], .string("conditions.min_ads_watched"))
            let badDate = try await h.call(.get, "/analytics/revenue?start_date=2025-13-01")
            XCTAssertEqual(badDate.status, .unprocessableContent)
            let reversed = try await h.call(.get, "/analytics/revenue?start_date=2025-11-30&end_date=2025-11-01")
            XCTAssertEqual(reversed.status, .unprocessableContent)
        }
    }

    func testRevenueReportFromDailyAggregatesWithEstimatesCSVAndDashboard() async throws {
        try await AdsHarness.run { h in
            try await h.provider("admob", priority: 1, ecpm: 10)
            try await h.provider("unity", priority: 2, ecpm: 8)
            let user = UUID()
            let second = UUID()
            try await h.consent(user)
            try await h.consent(second)
            let day1 = AdStore.day(h.clock.now())
            _ = try await h.watch(user, revenue: 0.03)
            _ = try await h.watch(user, revenue: 0.05)
            _ = try await h.watch(second)  // no revenue figure: estimated
            // An abandoned request with no view, and an interstitial.
            h.clock.advance(by: 31)
            let abandoned = try await h.request(second).0
            XCTAssertNotNil(abandoned)
            h.clock.advance(by: 200)
            let (inter, _) = try await h.request(user, "interstitial", placement: "post_quiz")
            h.clock.advance(by: 6)
            _ = try await h.complete(user, try XCTUnwrap(inter), ms: 6000, revenue: 0.01)
            h.clock.advance(by: 86400)
            let day2 = AdStore.day(h.clock.now())
            _ = try await h.watch(user, revenue: 0.02)

            // The report reads aggregates only: nothing until the job has run.
            let before = try await h.call(.get, "/analytics/revenue?start_date=\(day1)&end_date=\(day2)").json([String: JSONValue].self)
            XCTAssertEqual(before.int("total_impressions"), 0)
            let refreshed = try await h.call(.post, "/analytics/refresh")
            XCTAssertEqual(refreshed.status, .ok)
            let r = try await h.call(.get, "/analytics/revenue?start_date=\(day1)&end_date=\(day2)")
            XCTAssertEqual(r.status, .ok)
            let report = try r.json([String: JSONValue].self)
            XCTAssertEqual(report.int("total_impressions"), 5)
            XCTAssertEqual(report.int("total_requests"), 6)
            XCTAssertEqual(report.int("total_completions"), 5)
            // Measured rewarded eCPM at admob: (0.03+0.05+0.02)/3 views × 1000 = 33.33; the view
            // without revenue is valued at it.
            let estimated = try XCTUnwrap(report.double("estimated_revenue"))
            XCTAssertEqual(estimated, 0.0333, accuracy: 0.0001)
            XCTAssertEqual(report.bool("estimated"), true)
            XCTAssertEqual(try XCTUnwrap(report.double("total_revenue")), 0.11 + 0.0333, accuracy: 0.0001)
            XCTAssertEqual(try XCTUnwrap(report.double("avg_ecpm")), (0.11 + 0.0333) / 5 * 1000, accuracy: 0.05)
            XCTAssertEqual(try XCTUnwrap(report.double("fill_rate")), 5.0 / 6.0, accuracy: 0.0001)
            guard case .array(let byDate)? = report["by_date"] else { return XCTFail("by_date") }
            XCTAssertEqual(byDate.count, 2)
            if case .object(let newest) = byDate[0] {
                XCTAssertEqual(newest.string("date"), day2)
                XCTAssertEqual(newest.int("impressions"), 1)
            }
            XCTAssertEqual(report.object("by_type")?.object("rewarded")?.int("impressions"), 4)
            XCTAssertEqual(report.object("by_type")?.object("interstitial")?.int("impressions"), 1)
            XCTAssertEqual(try XCTUnwrap(report.object("by_type")?.object("rewarded")?.double("completion_rate")), 1.0, accuracy: 0.0001)
            XCTAssertEqual(report.object("by_provider")?.object("admob")?.int("impressions"), 5)
            XCTAssertNotNil(report.object("by_placement")?.object("post_quiz"))

            let filtered = try await h.call(.get, "/analytics/revenue?start_date=\(day1)&end_date=\(day2)&ad_type=interstitial&placement=post_quiz")
                .json([String: JSONValue].self)
            XCTAssertEqual(filtered.int("total_impressions"), 1)
            XCTAssertEqual(try XCTUnwrap(filtered.double("total_revenue")), 0.01, accuracy: 1e-6)
            let none = try await h.call(.get, "/analytics/revenue?start_date=\(day1)&end_date=\(day2)&provider=unity").json([String: JSONValue].self)
            XCTAssertEqual(none.int("total_impressions"), 0)

            let csv = try await h.call(.get, "/analytics/revenue?start_date=\(day1)&end_date=\(day2)&format=csv")
            XCTAssertEqual(csv.headers[.contentType], "text/csv; charset=utf-8")
            let lines = String(buffer: csv.body).split(separator: "\n")
            XCTAssertEqual(
                lines.first,
                "date,ad_type,provider,placement,requests,impressions,clicks,completions,revenue_usd,estimated_revenue_usd,ecpm"
            )
            XCTAssertEqual(lines.count, 1 + 3)
            XCTAssertTrue(lines.contains { $0.hasPrefix("\(day1),interstitial,admob,post_quiz,1,1,0,1,0.010000,0.000000,") })

            let html = try await h.call(.get, "/analytics/dashboard?start_date=\(day1)&end_date=\(day2)")
            XCTAssertEqual(html.status, .ok)
            let page = String(buffer: html.body)
            XCTAssertTrue(page.contains("<svg"))
            XCTAssertTrue(page.contains("By provider"))
            XCTAssertTrue(page.contains("estimated"))
            XCTAssertFalse(page.contains("http://") || page.contains("https://") || page.contains("<script"), "no external assets")
            try Self.screenshot(page)

            // Two years later the detail goes (4.5: 2 years of detailed data); the report does not change.
            // (Other tests' rows share the database, so the counts are of this test's users.)
            let users = "'\(user)', '\(second)'"
            let purge = { @Sendable (batch: Int) in
                try await StatsStore(logger: h.runtime.logger).purgeDetail(
                    before: h.clock.now().addingTimeInterval(-StatsStore.detailRetention),
                    db: h.runtime.db,
                    batch: batch
                )
            }
            _ = try await purge(5000)
            let kept = try await h.count("SELECT count(*)::int FROM ads.ad_requests WHERE user_id IN (\(users))")
            XCTAssertEqual(kept, 6, "nothing is two years old yet")
            h.clock.advance(by: StatsStore.detailRetention + 86400)
            let removed = try await purge(2)
            XCTAssertGreaterThanOrEqual(removed, 6, "in batches of 2")
            let requests = try await h.count("SELECT count(*)::int FROM ads.ad_requests WHERE user_id IN (\(users))")
            let views = try await h.count("SELECT count(*)::int FROM ads.ad_views WHERE user_id IN (\(users))")
            XCTAssertEqual(requests + views, 0)
            _ = try await h.call(.post, "/analytics/refresh")
            let after = try await h.call(.get, "/analytics/revenue?start_date=\(day1)&end_date=\(day2)").json([String: JSONValue].self)
            XCTAssertEqual(after.int("total_impressions"), 5)
            XCTAssertEqual(try XCTUnwrap(after.double("total_revenue")), 0.11 + 0.0333, accuracy: 0.0001)
        }
    }

    /// Renders the dashboard in headless Chromium (Debian's chromium-headless-shell, installed by
    /// `make test`) and checks a real picture came out: a PNG of the window's size with both the
    /// chart's blue and the page's white in it.
    static func screenshot(_ html: String) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ads-dashboard-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let page = dir.appendingPathComponent("dashboard.html")
        let png = dir.appendingPathComponent("dashboard.png")
        try html.write(to: page, atomically: true, encoding: .utf8)
        let shot = try ChildProcess(
            "/usr/bin/chromium-headless-shell",
            ["--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1000,900", "--screenshot=\(png.path)", page.absoluteString]
        ).wait()
        XCTAssertEqual(shot.status, 0)
        let data = try Data(contentsOf: png)
        XCTAssertEqual(Array(data.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        // IHDR: width and height, big-endian, at bytes 16..23.
        let width = data[16..<20].reduce(0) { $0 << 8 | Int($1) }
        let height = data[20..<24].reduce(0) { $0 << 8 | Int($1) }
        XCTAssertEqual(width, 1000)
        XCTAssertEqual(height, 900)
        XCTAssertGreaterThan(data.count, 10_000, "a blank page compresses to far less")
        let keep = ProcessInfo.processInfo.environment["DATA_DIR"].map { URL(fileURLWithPath: $0).appendingPathComponent("ads-dashboard.png") }
        if let keep {
            try? FileManager.default.removeItem(at: keep)
            try? FileManager.default.copyItem(at: png, to: keep)
        }
    }

    func testUserDataExportAndDeletion() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            _ = try await h.watch(user)
            _ = try await h.call(.get, "/referral/code", user: user)
            let headers: HTTPFields = [.authorization: "Bearer local-internal-auth", .xServiceName: "auth"]
            let export = try await h.client.execute(uri: "/internal/users/\(user)/export?app_id=\(h.app)", method: .get, headers: headers) { $0 }
            let doc = try export.json(UserDataExport.self)
            XCTAssertEqual(doc.service, "ads")
            for section in ["ad_consents", "ad_views", "ad_limits", "rewards", "referrals"] {
                guard case .array(let rows)? = doc.sections[section] else {
                    XCTFail(section)
                    continue
                }
                XCTAssertEqual(rows.count, 1, section)
            }
            let deleted = try await h.client.execute(uri: "/internal/users/\(user)?app_id=\(h.app)", method: .delete, headers: headers) { $0 }
            XCTAssertEqual(deleted.status, .ok)
            let left = try await h.count(
                """
                SELECT ((SELECT count(*) FROM ads.user_consent_ads WHERE user_id = '\(user)') + (SELECT count(*) FROM ads.ad_views WHERE user_id = '\(user)')
                 + (SELECT count(*) FROM ads.user_ad_limits WHERE user_id = '\(user)') + (SELECT count(*) FROM ads.referral_codes WHERE user_id = '\(user)')
                 + (SELECT count(*) FROM ads.ad_requests WHERE user_id = '\(user)') + (SELECT count(*) FROM ads.pending_rewards WHERE user_id = '\(user)'))::int
                """
            )
            XCTAssertEqual(left, 0)
            let anonymousViews = try await h.count("SELECT count(*)::int FROM ads.ad_views WHERE app_id = '\(h.app)' AND user_id IS NULL")
            XCTAssertEqual(anonymousViews, 1, "the view stays for the revenue figures, without the user")
        }
    }
}

import AdsDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AdsService

/// #31 the experiment's decisions, without a database.
final class CampaignExperimentRulesTests: XCTestCase {
    static let ab = [
        CampaignVariant(key: "A", weight: 50, rewardAmount: 20, required: 5, conditions: .object([:]), holdout: false),
        CampaignVariant(key: "B", weight: 50, rewardAmount: 30, required: 7, conditions: .object([:]), holdout: false),
    ]

    func testTenThousandUsersSplitFiftyFiftyWithinTwoPercentAndKeepTheirBucket() {
        let app = UUID()
        var counts: [String: Int] = [:]
        var users: [UUID] = []
        for _ in 0..<10_000 {
            let user = UUID()
            users.append(user)
            counts[CampaignExperiment.pick(Self.ab, bucket: CampaignExperiment.bucket(salt: "s1", app: app, user: user)).key, default: 0] += 1
        }
        XCTAssertEqual(Double(counts["A"] ?? 0), 5000, accuracy: 200, "\(counts)")
        XCTAssertEqual(Double(counts["B"] ?? 0), 5000, accuracy: 200, "\(counts)")
        // The same inputs give the same bucket (every replica, every restart).
        for user in users.prefix(100) {
            XCTAssertEqual(CampaignExperiment.bucket(salt: "s1", app: app, user: user), CampaignExperiment.bucket(salt: "s1", app: app, user: user))
        }
        // Another campaign (salt) splits independently.
        let same = users.prefix(1000).filter {
            CampaignExperiment.bucket(salt: "s1", app: app, user: $0) / 5000 == CampaignExperiment.bucket(salt: "s2", app: app, user: $0) / 5000
        }.count
        XCTAssertEqual(Double(same), 500, accuracy: 80)
    }

    /// The reference: statsmodels 0.14 `proportions_ztest([150, 120], [1000, 1000])` and
    /// `confint_proportions_2indep(150, 1000, 120, 1000, method="wald")`; scipy `chisquare`.
    func testStatisticsMatchAStatisticsLibrary() throws {
        let c = try XCTUnwrap(CampaignExperiment.compare(successA: 120, totalA: 1000, successB: 150, totalB: 1000))
        XCTAssertEqual(c.difference, 0.03, accuracy: 1e-12)
        XCTAssertEqual(c.z, 1.9630498076, accuracy: 1e-8)
        XCTAssertEqual(c.pValue, 0.0496403869, accuracy: 1e-8)
        XCTAssertEqual(c.ciLow, 0.0000760288, accuracy: 1e-8)
        XCTAssertEqual(c.ciHigh, 0.0599239712, accuracy: 1e-8)
        XCTAssertNil(CampaignExperiment.compare(successA: 0, totalA: 0, successB: 1, totalB: 2))

        let skewed = try XCTUnwrap(CampaignExperiment.sampleRatio(observed: [5300, 4700], weights: [50, 50]))
        XCTAssertEqual(skewed.chiSquare, 36, accuracy: 1e-9)
        XCTAssertEqual(skewed.pValue, 1.9731752900753933e-09, accuracy: 1e-12)
        let fine = try XCTUnwrap(CampaignExperiment.sampleRatio(observed: [5020, 4980], weights: [50, 50]))
        XCTAssertEqual(fine.pValue, 0.6891565167793516, accuracy: 1e-9)
        let three = try XCTUnwrap(CampaignExperiment.sampleRatio(observed: [3000, 3000, 4000], weights: [25, 25, 50]))
        XCTAssertEqual(three.chiSquare, 400, accuracy: 1e-9)
        XCTAssertLessThan(three.pValue, 1e-80)
    }

    func testBadVariantsAreRefusedByField() {
        typealias V = CampaignExperiment.VariantInput
        func v(_ key: String, _ weight: Int, amount: Int? = nil, conditions: [String: JSONValue]? = nil, holdout: Bool? = nil) -> V {
            V(key: key, weight: weight, reward: amount.map { .init(type: nil, amount: $0) }, conditions: conditions, holdout: holdout)
        }
        let rows: [(String, [V], String)] = [
            ("weights not summing to 100", [v("A", 50), v("B", 40)], "variants"),
            ("duplicate keys", [v("A", 50), v("A", 50)], "variants[1].key"),
            ("more than 10", (0..<11).map { v("V\($0)", $0 == 0 ? 90 : 1) }, "variants"),
            ("a single variant", [v("A", 100)], "variants"),
            ("a bad key", [v("a b", 50), v("B", 50)], "variants[0].key"),
            ("a reward of 0", [v("A", 50, amount: 0), v("B", 50)], "variants[0].reward.amount"),
            ("another condition", [v("A", 50, conditions: ["streak_days": .int(3)]), v("B", 50)], "variants[0].conditions.streak_days"),
            ("only a holdout has weight", [v("A", 0), v("H", 100, holdout: true)], "variants"),
        ]
        for (name, input, field) in rows {
            XCTAssertThrowsError(
                try CampaignExperiment.variants(input, type: .watchAds, reward: 10, required: 5, conditions: ["min_ads_watched": .int(5)]),
                name
            ) { e in
                guard case .string(let f)? = (e as? AppError)?.extra["field"] else { return XCTFail("\(name): \(e)") }
                XCTAssertEqual(f, field, name)
            }
        }
        let ok = try? CampaignExperiment.variants(
            [v("A", 50), v("B", 50, amount: 30, conditions: ["min_ads_watched": .int(7)])],
            type: .watchAds,
            reward: 20,
            required: 5,
            conditions: ["min_ads_watched": .int(5)]
        )
        XCTAssertEqual(ok?.map(\.rewardAmount), [20, 30])
        XCTAssertEqual(ok?.map(\.required), [5, 7])
    }

    func testAnEditMayNotMoveAssignedUsers() {
        let onlyA = [Self.ab[0], CampaignVariant(key: "C", weight: 50, rewardAmount: 5, required: 5, conditions: .object([:]), holdout: false)]
        XCTAssertThrowsError(try CampaignExperiment.checkEdit(old: Self.ab, new: onlyA, assigned: ["A": 3, "B": 2])) {
            XCTAssertEqual(($0 as? AppError)?.code, "variant_has_users")
        }
        XCTAssertNoThrow(try CampaignExperiment.checkEdit(old: Self.ab, new: onlyA, assigned: ["A": 3]), "B has nobody: it may go")
        var reweighted = Self.ab
        reweighted[0].weight = 80
        reweighted[1].weight = 20
        XCTAssertNoThrow(try CampaignExperiment.checkEdit(old: Self.ab, new: reweighted, assigned: ["A": 3, "B": 2]))
    }

    func testReminderThreshold() {
        for (progress, required, due) in [(3, 5, true), (2, 5, false), (4, 5, true), (5, 5, false), (0, 1, true), (1, 3, false), (2, 3, true)] {
            XCTAssertEqual(CampaignExperiment.remindable(progress: progress, required: required), due, "\(progress)/\(required)")
        }
    }
}

/// #31 through the ads service's routes and its database.
final class CampaignExperimentTests: XCTestCase {
    static func create(_ h: AdsHarness, variants: String, days: Double = 7, required: Int = 3) async throws -> TestResponse {
        let ends = JSON.iso8601(h.clock.now().addingTimeInterval(days * 86400))
        let starts = JSON.iso8601(h.clock.now().addingTimeInterval(-60))
        return try await h.call(
            .post,
            "/admin/campaigns",
            json: """
                {"name":"Semaine A/B","campaign_type":"watch_ads","reward":{"type":"credits","amount":20},"conditions":{"min_ads_watched":\(required)},
                 "starts_at":"\(starts)","ends_at":"\(ends)","variants":\(variants)}
                """
        )
    }

    static let ab =
        #"[{"key":"A","weight":50,"reward":{"amount":20}},{"key":"B","weight":50,"reward":{"amount":30},"conditions":{"min_ads_watched":2}}]"#

    static func listed(_ h: AdsHarness, _ user: UUID) async throws -> [[String: JSONValue]] {
        try await h.call(.get, "/campaigns/active", user: user).json([String: [[String: JSONValue]]].self)["campaigns"] ?? []
    }

    func testUsersSeeAndArePaidTheirVariantAndKeepIt() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let created = try await Self.create(h, variants: Self.ab)
            XCTAssertEqual(created.status, .created, String(buffer: created.body))
            let id = try XCTUnwrap(UUID(uuidString: try created.json([String: JSONValue].self).string("id") ?? ""))
            // Users until one of each variant.
            var byVariant: [String: UUID] = [:]
            var seen: [UUID: String] = [:]
            while byVariant.count < 2 {
                let user = UUID()
                let list = try await Self.listed(h, user)
                let mine = try XCTUnwrap(list.first { $0.string("id") == id.lowercasedString })
                let key = try XCTUnwrap(mine.string("variant"))
                XCTAssertEqual(mine.object("reward")?.int("amount"), key == "A" ? 20 : 30, "only the variant's reward is shown")
                XCTAssertEqual(mine.object("progress")?.int("required"), key == "A" ? 3 : 2, "and its goal")
                byVariant[key] = byVariant[key] ?? user
                seen[user] = key
            }
            // Listing again, opening it, or an edit of the weights never moves anyone.
            let edit = try await h.call(
                .patch,
                "/admin/campaigns/\(id)",
                json:
                    #"{"variants":[{"key":"A","weight":100,"reward":{"amount":20}},{"key":"B","weight":0,"reward":{"amount":30},"conditions":{"min_ads_watched":2}}]}"#
            )
            XCTAssertEqual(edit.status, .ok, String(buffer: edit.body))
            for (user, key) in seen {
                let again = try await Self.listed(h, user).first { $0.string("id") == id.lowercasedString }
                XCTAssertEqual(again?.string("variant"), key)
                let opened = try await h.call(.get, "/campaigns/\(id)", user: user).json([String: JSONValue].self)
                XCTAssertEqual(opened.string("variant"), key)
            }
            // New users follow the new weights.
            for _ in 0..<5 {
                do {
                    let value = try await Self.listed(h, UUID()).first { $0.string("id") == id.lowercasedString }?.string("variant")
                    XCTAssertEqual(value, "A")
                }
            }
            // Another replica gives the same answer.
            let assigned = seen
            try await h.withSecondReplica { second, _ in
                for (user, key) in assigned {
                    let r = try await second.execute(uri: "/ads/v1/campaigns/\(id)", method: .get, headers: try h.headers(user)) { $0 }
                    XCTAssertEqual(try r.json([String: JSONValue].self).string("variant"), key)
                }
            }
            // B's user completes after 2 views and is paid B's 30 credits.
            let b = try XCTUnwrap(byVariant["B"])
            try await h.consent(b)
            for _ in 0..<2 { _ = try await h.watch(b) }
            let claim = try await h.call(.post, "/campaigns/\(id)/claim-reward", user: b)
            XCTAssertEqual(claim.status, .ok, String(buffer: claim.body))
            XCTAssertEqual(try claim.json([String: JSONValue].self).object("reward")?.int("amount"), 30)
            XCTAssertEqual(h.upstream.references.withLock { $0.values.filter { $0.source == "promo" }.map(\.amount) }, [30])
            // Exposure once per user however often it is listed; the results come from the rows.
            let results = try await h.call(.get, "/admin/campaigns/\(id)/results").json([String: JSONValue].self)
            guard case .array(let variants)? = results["variants"] else { return XCTFail("\(results)") }
            let rowB = try XCTUnwrap(variants.first { if case .object(let o) = $0 { o["key"] == .string("B") } else { false } })
            guard case .object(let vB) = rowB else { return XCTFail() }
            let usersB = seen.values.filter { $0 == "B" }.count
            XCTAssertEqual(vB["assigned"], .int(usersB))
            XCTAssertEqual(vB["exposed"], .int(usersB))
            XCTAssertEqual(vB["completed"], .int(1))
            XCTAssertEqual(vB["claimed"], .int(1))
            XCTAssertEqual(vB["credits_granted"], .int(30))
            XCTAssertNotNil(vB["versus_first"])
            let csv = try await h.call(.get, "/admin/campaigns/\(id)/results?format=csv")
            XCTAssertEqual(csv.headers[.contentType], "text/csv; charset=utf-8")
            XCTAssertTrue(String(buffer: csv.body).hasPrefix("variant,weight,holdout,"))
            // The dashboard shows the experiment beside the revenue.
            let dashboard = String(buffer: try await h.call(.get, "/analytics/dashboard").body)
            XCTAssertTrue(dashboard.contains("<h3>Semaine A/B</h3>"), dashboard)
            let usersInB = seen.values.filter { $0 == "B" }.count
            XCTAssertTrue(dashboard.contains("<tr><td>B</td><td>0 %</td><td>\(usersInB)</td>"), dashboard)
            // A user cannot reach the results; another tenant cannot find the campaign.
            do {
                let value = try await h.call(.get, "/admin/campaigns/\(id)/results", user: b).status
                XCTAssertEqual(value, .unauthorized)
            }
            var other = h.admin
            other[.xAppID] = UUID().uuidString
            do {
                let value = try await h.call(.get, "/admin/campaigns/\(id)/results", headers: other).status
                XCTAssertEqual(value, .notFound)
            }
        }
    }

    func testAHoldoutIsNotShownAndOnlyCounted() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let created = try await Self.create(h, variants: #"[{"key":"A","weight":50},{"key":"H","weight":50,"holdout":true}]"#)
            let id = try XCTUnwrap(UUID(uuidString: try created.json([String: JSONValue].self).string("id") ?? ""))
            var holdout: UUID?
            var shown = 0
            for _ in 0..<40 {
                let user = UUID()
                if try await Self.listed(h, user).contains(where: { $0.string("id") == id.lowercasedString }) {
                    shown += 1
                } else {
                    holdout = holdout ?? user
                }
            }
            let user = try XCTUnwrap(holdout)
            do {
                let value = try await h.call(.get, "/campaigns/\(id)", user: user).status
                XCTAssertEqual(value, .notFound)
            }
            try await h.consent(user)
            _ = try await h.watch(user)
            do {
                let value = try await h.count("SELECT count(*)::int FROM ads.campaign_participations WHERE campaign_id = '\(id)'")
                XCTAssertEqual(
                    value,
                    0,
                    "a holdout user's views do not count"
                )
            }
            let results = try await h.call(.get, "/admin/campaigns/\(id)/results").json([String: JSONValue].self)
            guard case .array(let rows)? = results["variants"], rows.count == 2, case .object(let a) = rows[0], case .object(let hold) = rows[1]
            else {
                return XCTFail("\(results)")
            }
            XCTAssertEqual(a["exposed"], .int(shown))
            XCTAssertEqual(hold["exposed"], .int(40 - shown), "holdout users are counted as exposed: what they would have seen")
            XCTAssertEqual(hold["holdout"], .bool(true))
        }
    }

    func testBadEditsChangeNothing() async throws {
        try await AdsHarness.run { h in
            let before = try await h.count("SELECT count(*)::int FROM ads.freemium_campaigns")
            for (variants, field) in [
                (#"[{"key":"A","weight":50},{"key":"B","weight":40}]"#, "variants"),
                (#"[{"key":"A","weight":50},{"key":"A","weight":50}]"#, "variants[1].key"),
                (#"[{"key":"A","weight":"half"},{"key":"B","weight":50}]"#, "variants[0].weight"),
            ] {
                let r = try await Self.create(h, variants: variants)
                XCTAssertTrue([400, 422].contains(Int(r.status.code)), String(buffer: r.body))
                XCTAssertEqual(try r.envelope().extra["field"], .string(field), variants)
            }
            do {
                let value = try await h.count("SELECT count(*)::int FROM ads.freemium_campaigns")
                XCTAssertEqual(value, before, "nothing was created")
            }
            let created = try await Self.create(h, variants: Self.ab)
            let id = try XCTUnwrap(UUID(uuidString: try created.json([String: JSONValue].self).string("id") ?? ""))
            var users: [String: Int] = [:]
            while (users["B"] ?? 0) == 0 {
                let key = try await Self.listed(h, UUID()).first { $0.string("id") == id.lowercasedString }?.string("variant") ?? "?"
                users[key, default: 0] += 1
            }
            // Removing B, which has users: refused, and the name in the same edit is not applied.
            let removal = try await h.call(
                .patch,
                "/admin/campaigns/\(id)",
                json: #"{"name":"Renamed","variants":[{"key":"A","weight":50},{"key":"C","weight":50}]}"#
            )
            XCTAssertEqual(removal.status, .conflict, String(buffer: removal.body))
            XCTAssertEqual(try removal.envelope().error, "variant_has_users")
            do {
                let value = try await h.count("SELECT count(*)::int FROM ads.freemium_campaigns WHERE id = '\(id)' AND name = 'Semaine A/B'")
                XCTAssertEqual(value, 1)
            }
            do {
                let value = try await h.count(
                    "SELECT count(*)::int FROM ads.campaign_variants WHERE campaign_id = '\(id)' AND key IN ('A','B') AND weight = 50"
                )
                XCTAssertEqual(value, 2)
            }
            do {
                let value = try await h.call(.patch, "/admin/campaigns/\(UUID())", json: #"{"name":"x"}"#).status
                XCTAssertEqual(value, .notFound)
            }
        }
    }

    /// #45: the create answers the campaign as `GET /admin/campaigns/{id}` shows it, variants and
    /// all (they were missing from the create's answer); each field of the edit alone changes
    /// that field only and answers the same body as the next GET; the list pages and carries it.
    func testTheCreateAndEveryEditAnswerTheCampaignAsGetShowsIt() async throws {
        try await AdsHarness.run { h in
            let created = try await Self.create(h, variants: Self.ab)
            XCTAssertEqual(created.status, .created, String(buffer: created.body))
            let body = try created.json([String: JSONValue].self)
            let id = try XCTUnwrap(body.string("id"))
            let variants = body.array("variants")
            XCTAssertEqual(variants.count, 2, "the create's answer has its variants: \(body)")
            XCTAssertEqual(variants.last?.int("reward_amount"), 30)
            XCTAssertEqual(variants.last?.int("required"), 2)
            let shown = try await h.call(.get, "/admin/campaigns/\(id)")
            XCTAssertEqual(shown.status, .ok, String(buffer: shown.body))
            XCTAssertEqual(try shown.json([String: JSONValue].self), body, "the create answers what GET shows")
            // One spelling out (lower-case), both taken in.
            XCTAssertEqual(id, id.lowercased())
            let upper = try await h.call(.get, "/admin/campaigns/\(id.uppercased())")
            XCTAssertEqual(try upper.json([String: JSONValue].self), body)
            let ends = JSON.iso8601(h.clock.now().addingTimeInterval(3 * 86400))
            let edits: [(String, String, JSONValue)] = [
                (#"{"name":"Renamed"}"#, "name", .string("Renamed")),
                (#"{"description":"Only the text"}"#, "description", .string("Only the text")),
                (#"{"ends_at":"\#(ends)"}"#, "ends_at", .string(ends)),
            ]
            var expected = body
            for (edit, field, value) in edits {
                let r = try await h.call(.patch, "/admin/campaigns/\(id)", json: edit)
                XCTAssertEqual(r.status, .ok, "\(edit): \(String(buffer: r.body))")
                expected[field] = value
                let answered = try r.json([String: JSONValue].self)
                XCTAssertEqual(answered, expected, edit)
                let again = try await h.call(.get, "/admin/campaigns/\(id)")
                XCTAssertEqual(try again.json([String: JSONValue].self), answered, edit)
            }
            let page = try await h.call(.get, "/admin/campaigns?limit=1")
            XCTAssertEqual(page.status, .ok)
            let listed = try page.json([String: JSONValue].self)
            guard case .array(let campaigns)? = listed["campaigns"] else { return XCTFail("\(listed)") }
            XCTAssertEqual(campaigns.count, 1)
            XCTAssertEqual(listed["limit"], .int(1))
            for bad in ["limit=0", "limit=101", "limit=x", "offset=-1"] {
                let r = try await h.call(.get, "/admin/campaigns?\(bad)")
                XCTAssertEqual(r.status, .unprocessableContent, bad)
            }
            // Another app's operator: unknown, nothing listed, nothing changed.
            var other = h.admin
            other[.xAppID] = UUID().uuidString
            do {
                let value = try await h.call(.get, "/admin/campaigns/\(id)", headers: other).status
                XCTAssertEqual(value, .notFound)
            }
            do {
                let value = try await h.call(.patch, "/admin/campaigns/\(id)", json: #"{"name":"Theirs"}"#, headers: other).status
                XCTAssertEqual(value, .notFound)
            }
            let theirs = try await h.call(.get, "/admin/campaigns", headers: other).json([String: JSONValue].self)
            XCTAssertEqual(theirs.array("campaigns").count, 0)
            do {
                let value = try await h.call(.get, "/admin/campaigns/\(id)").json([String: JSONValue].self)
                XCTAssertEqual(value, expected)
            }
            do {
                let value = try await h.call(.get, "/admin/campaigns/\(UUID())").status
                XCTAssertEqual(value, .notFound)
            }
            do {
                let value = try await h.call(.get, "/admin/campaigns/not-a-uuid").status
                XCTAssertEqual(value, .badRequest)
            }
            do {
                let value = try await h.call(.get, "/admin/campaigns/\(id)", user: UUID()).status
                XCTAssertEqual(value, .unauthorized)
            }
        }
    }

    func testTheReminderIsDueOnceADayBeforeTheEnd() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let created = try await Self.create(h, variants: #"[{"key":"A","weight":50},{"key":"B","weight":50}]"#, days: 1.5, required: 3)
            let id = try XCTUnwrap(UUID(uuidString: try created.json([String: JSONValue].self).string("id") ?? ""))
            let close = UUID()
            let far = UUID()
            for user in [close, far] { try await h.consent(user) }
            for _ in 0..<2 { _ = try await h.watch(close) }  // 2 of 3: one step short
            _ = try await h.watch(far)  // 1 of 3: neither
            let reminders = CampaignReminders(
                campaigns: CampaignStore(logger: h.runtime.logger),
                db: h.runtime.db,
                clock: h.clock,
                interval: .seconds(30),
                logger: h.runtime.logger
            )
            do {
                let value = try await reminders.runOnce()
                XCTAssertEqual(value, 0, "not yet: more than a day left")
            }
            h.clock.advance(by: 0.6 * 86400)
            // Two replicas sweeping at once: one reminder.
            async let one = reminders.runOnce()
            async let two = reminders.runOnce()
            let total = try await one + two
            XCTAssertEqual(total, 1)
            do {
                let value = try await reminders.runOnce()
                XCTAssertEqual(value, 0, "once per user and campaign")
            }
            let key = "campaign-reminder:\(id.uuidString.lowercased()):\(close.uuidString.lowercased())"
            do {
                let value = try await h.count(
                    """
                    SELECT count(*)::int FROM ads.outbox WHERE target_service = 'auth' AND body->>'key' = '\(key)' AND body->>'kind' = 'campaign_reminder'
                      AND path LIKE '/internal/users/\(close.uuidString.lowercased())/notifications%' AND body->'data'->>'remaining' = '1'
                    """
                )
                XCTAssertEqual(value, 1)
            }
            do {
                let value = try await h.count("SELECT count(*)::int FROM ads.campaign_reminders WHERE user_id = '\(far)'")
                XCTAssertEqual(value, 0)
            }
        }
    }
}

import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import OfflineDomain
import PostgresNIO
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import OfflineService

/// UC-OFFLINE-3.3 (queue and execution), 3.5 (conflicts) and 3.4 (locations, nearby content).
final class SyncAndLocationTests: XCTestCase {
    static func queue(
        _ h: OfflineHarness,
        _ user: UUID,
        id: String,
        type: String = "answer_submit",
        priority: Int? = nil,
        payload: String = #"{"quiz_id":"quiz_123","score":8,"question_5":2,"timestamp":"local"}"#
    ) async throws -> TestResponse {
        let p = priority.map { #","priority":\#($0)"# } ?? ""
        return try await h.call(
            .post,
            "/sync/queue",
            user: user,
            json: """
                {"client_action_id":"\(id)","action_type":"\(type)","entity_type":"quiz_completion","entity_id":"quiz_123","payload":\(payload)\(p)}
                """
        )
    }

    static func execute(_ h: OfflineHarness, _ user: UUID) async throws -> [String: JSONValue] {
        let r = try await h.call(.post, "/sync/execute", user: user)
        XCTAssertEqual(r.status, .accepted)
        let id = try h.obj(r).string("job_id") ?? ""
        try await h.drainJobs()
        return try h.obj(try await h.call(.get, "/sync/execute/\(id)", user: user))
    }

    /// The same client_action_id twice reaches the upstream once, even when the upstream
    /// fails the first delivery.
    func testQueuedTwiceReachesUpstreamOnceDespiteAFailedFirstDelivery() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            let first = try await Self.queue(h, user, id: "answer-1")
            XCTAssertEqual(first.status, .created)
            let body = try h.obj(first)
            XCTAssertEqual(body.object("queue_item")?.int("priority"), 5)
            XCTAssertEqual(body.int("position"), 1)
            let replay = try await Self.queue(h, user, id: "answer-1")
            XCTAssertEqual(replay.status, .ok)
            XCTAssertEqual(try h.obj(replay).bool("replayed"), true)
            XCTAssertEqual(try h.obj(replay).object("queue_item")?.string("id"), body.object("queue_item")?.string("id"))
            h.upstream.syncMode.withLock { $0 = .failFirst(1) }
            let result = try await Self.execute(h, user)
            XCTAssertEqual(result.string("status"), "completed")
            XCTAssertEqual(result.int("items_to_process"), 1)
            XCTAssertEqual(result.int("succeeded"), 1)
            XCTAssertEqual(h.upstream.attempts.withLock { $0 }, ["answer-1", "answer-1"], "one failure, one retry after 2 s")
            XCTAssertEqual(h.upstream.applied.withLock { $0.count }, 1)
            // Queued again after it was sent: still the first answer, nothing new upstream.
            let late = try await Self.queue(h, user, id: "answer-1")
            XCTAssertEqual(try h.obj(late).object("queue_item")?.string("status"), "success")
            _ = try await Self.execute(h, user)
            XCTAssertEqual(h.upstream.applied.withLock { $0.count }, 1)
        }
    }

    func testPriorityOrderRejectionsAndGivingUp() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            _ = try await Self.queue(h, user, id: "other-1", type: "achievement_unlock")
            _ = try await Self.queue(h, user, id: "progress-1", type: "progress_save")
            _ = try await Self.queue(h, user, id: "answer-2", type: "answer_submit")
            let list = try h.obj(try await h.call(.get, "/sync/queue", user: user)).array("actions")
            XCTAssertEqual(list.map { $0.int("priority") }, [5, 7, 10])
            h.upstream.syncMode.withLock { $0 = .reject }
            let rejected = try await Self.execute(h, user)
            XCTAssertEqual(rejected.int("failed"), 3, "a 4xx fails the action and does not block the others")
            XCTAssertEqual(h.upstream.attempts.withLock { $0 }, ["answer-2", "progress-1", "other-1"], "priority, then age")
            let failed = try h.obj(try await h.call(.get, "/sync/queue", user: user)).array("actions")
            XCTAssertTrue(failed.allSatisfy { $0.string("status") == "failed" && ($0.string("last_error") ?? "").contains("422") })
            // Bad input.
            for (json, field) in [
                (#"{"action_type":"x","entity_type":"e","entity_id":"1","payload":{}}"#, "client_action_id"),
                (#"{"client_action_id":"c","action_type":"x","entity_type":"e","entity_id":"1","payload":[]}"#, "payload"),
                (#"{"client_action_id":"c","action_type":"x","entity_type":"e","entity_id":"1","payload":{},"priority":11}"#, "priority"),
            ] {
                let bad = try await h.call(.post, "/sync/queue", user: user, json: json)
                XCTAssertTrue([400, 422].contains(bad.status.code))
                XCTAssertEqual(try bad.envelope().extra["field"], .string(field), json)
            }
        }
    }

    /// Seed 004 (3c.1), #13: a guest has no cloud save: queueing or sending is 403
    /// `guest_no_cloud_save` with how to create an account, and nothing is stored; downloads stay open.
    func testGuestsHaveNoCloudSave() async throws {
        try await OfflineHarness.run { h in
            let guest = UUID()
            var headers = h.admin
            headers[.authorization] = "Bearer \(try h.token(guest, guest: true))"
            let queued = try await h.call(
                .post,
                "/sync/queue",
                json: """
                    {"client_action_id":"g-1","action_type":"answer_submit","entity_type":"question","entity_id":"q1","payload":{"a":1}}
                    """,
                headers: headers
            )
            XCTAssertEqual(queued.status, .forbidden)
            let e = try queued.envelope()
            XCTAssertEqual(e.error, "guest_no_cloud_save")
            XCTAssertEqual(e.extra["can_link"], .bool(true))
            XCTAssertNotNil(e.extra["how"])
            let sent = try await h.call(.post, "/sync/execute", headers: headers)
            XCTAssertEqual(sent.status, .forbidden)
            let rows = try await h.count("SELECT count(*)::int FROM offline.sync_queue WHERE user_id = '\(guest)'")
            XCTAssertEqual(rows, 0, "nothing stored")
            let catalogue = try await h.call(.get, "/categories/downloaded", headers: headers)
            XCTAssertEqual(catalogue.status, .ok, "downloads stay open to guests")
            // The same user with an account token (after linking): saved.
            let saved = try await h.call(
                .post,
                "/sync/queue",
                user: guest,
                json: """
                    {"client_action_id":"g-1","action_type":"answer_submit","entity_type":"question","entity_id":"q1","payload":{"a":1}}
                    """
            )
            XCTAssertEqual(saved.status, .created)
        }
    }

    func testFullQueueDropsTheOldestExpendableActionNeverAnAnswer() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            _ = try await Self.queue(h, user, id: "ping-0", type: "stats_ping")
            for i in 1..<100 { _ = try await Self.queue(h, user, id: "a-\(i)") }
            let next = try h.obj(try await Self.queue(h, user, id: "a-100"))
            XCTAssertEqual(next.string("dropped_client_action_id"), "ping-0")
            let full = try await Self.queue(h, user, id: "a-101")
            XCTAssertEqual(full.status, .tooManyRequests)
            XCTAssertEqual(try full.envelope().error, "sync_queue_full")
        }
    }

    func testConflictsManualResolutionMergeSkipAndAutomaticStrategies() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            _ = try await h.call(.patch, "/sync/profile", user: user, json: #"{"conflict_strategy":"manual"}"#)
            h.upstream.syncMode.withLock { $0 = .conflict }
            _ = try await Self.queue(h, user, id: "c-1")
            _ = try await Self.queue(h, user, id: "c-2")
            let r = try await Self.execute(h, user)
            XCTAssertEqual(r.int("conflicts"), 2)
            let conflicts = try h.obj(try await h.call(.get, "/sync/conflicts", user: user)).array("conflicts")
            XCTAssertEqual(conflicts.count, 2)
            XCTAssertEqual(conflicts[0].object("server_data")?.int("score"), 7)
            XCTAssertEqual(conflicts[0].object("local_data")?.int("score"), 8)
            let first = conflicts[0].string("id")!
            let second = conflicts[1].string("id")!

            // Skip at most 3 times.
            for n in 1...3 {
                let s = try h.obj(try await h.call(.post, "/sync/conflicts/\(first)/resolve", user: user, json: #"{"resolution":"skip"}"#))
                XCTAssertEqual(s.int("skip_count"), n)
            }
            let fourth = try await h.call(.post, "/sync/conflicts/\(first)/resolve", user: user, json: #"{"resolution":"skip"}"#)
            XCTAssertEqual(try fourth.envelope().error, "skip_limit_reached")

            let local = try h.obj(try await h.call(.post, "/sync/conflicts/\(first)/resolve", user: user, json: #"{"resolution":"local_wins"}"#))
            XCTAssertEqual(local.bool("resolved"), true)
            XCTAssertEqual(local.object("final_data")?.int("score"), 8)
            let sent = h.upstream.applied.withLock { $0.filter { $0.key.hasSuffix(":local_wins") } }
            XCTAssertEqual(sent.count, 1)
            XCTAssertEqual(sent.values.first?.contains(#""resolution":"local_wins""#), true, "the local version was sent")
            let merged = try h.obj(
                try await h.call(
                    .post,
                    "/sync/conflicts/\(second)/resolve",
                    user: user,
                    json: #"{"resolution":"merge","merge_data":{"question_5":"local","score":"server","timestamp":"local"}}"#
                )
            )
            XCTAssertEqual(merged.object("final_data")?.int("score"), 7)
            XCTAssertEqual(merged.object("final_data")?.int("question_5"), 2)
            XCTAssertEqual(merged.object("final_data")?.string("timestamp"), "local")
            let twice = try await h.call(.post, "/sync/conflicts/\(second)/resolve", user: user, json: #"{"resolution":"server_wins"}"#)
            XCTAssertEqual(twice.status, .conflict)
            let bad = try await h.call(.post, "/sync/conflicts/\(UUID())/resolve", user: user, json: #"{"resolution":"coin"}"#)
            XCTAssertEqual(bad.status, .unprocessableContent)
            let unknown = try await h.call(.post, "/sync/conflicts/\(UUID())/resolve", user: user, json: #"{"resolution":"server_wins"}"#)
            XCTAssertEqual(unknown.status, .notFound)

            // server_wins (the default) resolves at once; a week-old manual conflict too.
            let other = UUID()
            _ = try await Self.queue(h, other, id: "d-1")
            _ = try await Self.execute(h, other)
            let open = try h.obj(try await h.call(.get, "/sync/conflicts", user: other)).array("conflicts")
            XCTAssertEqual(open.count, 0)
            let auto = try await h.count("SELECT count(*)::int FROM offline.sync_conflicts WHERE user_id = '\(other)' AND resolution = 'server_wins'")
            XCTAssertEqual(auto, 1)
            _ = try await Self.queue(h, user, id: "c-3")
            _ = try await Self.execute(h, user)
            h.clock.advance(by: 8 * 86400)
            _ = try await h.maintenance().runOnce()
            let remaining = try h.obj(try await h.call(.get, "/sync/conflicts", user: user)).array("conflicts")
            XCTAssertEqual(remaining.count, 0)
        }
    }

    /// With no upstream configured (the local stack), accepted actions land in this service's
    /// append-only table, once.
    func testWithoutUpstreamActionsAreRecordedLocallyOnce() async throws {
        try await OfflineHarness.run(syncUpstream: false) { h in
            let user = UUID()
            _ = try await Self.queue(h, user, id: "local-1")
            let r = try await Self.execute(h, user)
            XCTAssertEqual(r.int("succeeded"), 1)
            let n = try await h.count("SELECT count(*)::int FROM offline.sync_applied_actions WHERE user_id = '\(user)'")
            XCTAssertEqual(n, 1)
        }
    }

    // MARK: locations

    static func locate(
        _ h: OfflineHarness,
        _ user: UUID,
        lat: Double = 48.8566,
        lon: Double = 2.3522,
        accuracy: Double = 15,
        consent: Bool = true
    ) async throws -> TestResponse {
        try await h.call(
            .post,
            "/location/update",
            user: user,
            json: """
                {"latitude":\(lat),"longitude":\(lon),"accuracy":\(accuracy),"altitude":35.0,"source":"gps","consent_given":\(consent)}
                """
        )
    }

    func testLocationConsentRateGeocodingAndNearbyContent() async throws {
        try await OfflineHarness.run { h in
            // The cache is shared by every app (a place is a place): start from an empty one.
            try await h.runtime.db.query("DELETE FROM offline.geocode_cache", logger: h.runtime.logger)
            let user = UUID()
            let noConsent = try await Self.locate(h, user, consent: false)
            XCTAssertEqual(noConsent.status, .forbidden)
            let notAtAuth = try await Self.locate(h, user)
            XCTAssertEqual(notAtAuth.status, .forbidden)
            XCTAssertEqual(try notAtAuth.envelope().error, "consent_required")
            h.upstream.geolocationConsent.withLock { _ = $0.insert(user) }
            let coarse = try await Self.locate(h, user, accuracy: 1500)
            XCTAssertEqual(try coarse.envelope().extra["field"], .string("accuracy"))
            let off = try await Self.locate(h, user, lat: 91)
            XCTAssertEqual(try off.envelope().extra["field"], .string("latitude"))

            let ok = try await Self.locate(h, user)
            XCTAssertEqual(ok.status, .created, String(buffer: ok.body))
            let loc = try XCTUnwrap(try h.obj(ok).object("location"))
            XCTAssertEqual(loc.object("geocoded")?.string("country_code"), "FR")
            XCTAssertEqual(loc.object("geocoded")?.string("city"), "Paris")
            XCTAssertTrue(h.upstream.userAgents.withLock { $0 }.allSatisfy { $0.hasPrefix("app-backend-offline/") })
            let tooSoon = try await Self.locate(h, user)
            XCTAssertEqual(tooSoon.status, .tooManyRequests)
            XCTAssertEqual(try tooSoon.envelope().extra["retry_after"], .int(900))
            // Cached 24 h on rounded coordinates: no second call for a point 100 m away.
            h.clock.advance(by: 16 * 60)
            _ = try await Self.locate(h, user, lat: 48.8567, lon: 2.3521)
            XCTAssertEqual(h.upstream.geocodeCalls.withLock { $0 }, 1)
            // 10a: the geocoder fails: the raw point is kept, the place is null.
            h.upstream.geoMode.withLock { $0 = .failing }
            h.clock.advance(by: 16 * 60)
            let failed = try h.obj(try await Self.locate(h, user, lat: 45.764, lon: 4.8357))
            XCTAssertEqual(failed.object("location")?["geocoded"], .null)

            // Nearby: seed content around Paris and far away.
            for (id, lat, lon) in [("eiffel", 48.8584, 2.2945), ("versailles", 48.8049, 2.1204), ("lyon", 45.764, 4.8357), ("tokyo", 35.68, 139.69)] {
                let r = try await h.call(
                    .put,
                    "/admin/location-content/\(id)",
                    json: #"{"title":"\#(id)","latitude":\#(lat),"longitude":\#(lon),"metadata":{"difficulty":2}}"#
                )
                XCTAssertEqual(r.status, .ok)
            }
            _ = try await h.call(
                .put,
                "/admin/location-content/gone",
                json: #"{"title":"gone","latitude":48.85,"longitude":2.35,"available_until":"2020-01-01T00:00:00Z"}"#
            )
            h.clock.advance(by: 16 * 60)
            _ = try await Self.locate(h, user)
            let near = try h.obj(try await h.call(.get, "/location/nearby-content?radius_km=50", user: user)).array("content")
            XCTAssertEqual(near.map { $0.string("id") }, ["eiffel", "versailles"], "nearest first, expired skipped, Lyon out of range")
            XCTAssertEqual(try XCTUnwrap(near.first?.double("distance_km")), 4.3, accuracy: 0.3)
            let wide = try h.obj(try await h.call(.get, "/location/nearby-content?radius_km=200", user: user)).array("content")
            XCTAssertEqual(wide.count, 2)
            let tooWide = try await h.call(.get, "/location/nearby-content?radius_km=500", user: user)
            XCTAssertEqual(try tooWide.envelope().extra["field"], .string("radius_km"))
            let nowhere = try await h.call(.get, "/location/nearby-content", user: UUID())
            XCTAssertEqual(try nowhere.envelope().error, "location_required")

            // Consent withdrawn at auth: the locations go.
            let body = try JSON.encoder.encode(ConsentFact(appID: h.app, userID: user, consent: "geolocation", value: false, version: 1))
            let withdrawn = try await h.client.execute(
                uri: "/internal/users/\(user)/consents/geolocation?app_id=\(h.app)",
                method: .put,
                headers: [.authorization: "Bearer local-internal-auth", .xServiceName: "auth", .contentType: "application/json"],
                body: ByteBuffer(data: body)
            ) { $0 }
            XCTAssertEqual(withdrawn.status, .ok)
            let left = try await h.count("SELECT count(*)::int FROM offline.user_locations WHERE user_id = '\(user)'")
            XCTAssertEqual(left, 0)
            h.clock.advance(by: 16 * 60)
            let afterWithdrawal = try await Self.locate(h, user)
            XCTAssertEqual(afterWithdrawal.status, .forbidden)
        }
    }

    func testSlowGeocoderIsWaitedForAndOldLocationsAreAnonymised() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            h.upstream.geolocationConsent.withLock { _ = $0.insert(user) }
            h.upstream.geoMode.withLock { $0 = .slow(.seconds(4)) }
            try await h.runtime.db.query("DELETE FROM offline.geocode_cache", logger: h.runtime.logger)
            let slow = try h.obj(try await Self.locate(h, user, lat: 43.2965, lon: 5.3698))
            XCTAssertEqual(slow.object("location")?["geocoded"], .null, "a geocoder slower than its 3 s timeout leaves the place empty")
            XCTAssertEqual(h.upstream.geocodeCalls.withLock { $0 }, 1, "the geocoder was asked (and was too slow)")
            let stored = try await h.count("SELECT count(*)::int FROM offline.user_locations WHERE user_id = '\(user)' AND country_code IS NULL")
            XCTAssertEqual(stored, 1, "the raw point is kept (10a)")
            h.clock.advance(by: 91 * 86400)
            let report = try await h.maintenance().runOnce()
            XCTAssertGreaterThanOrEqual(report.anonymized, 1)
            let linked = try await h.count("SELECT count(*)::int FROM offline.user_locations WHERE user_id = '\(user)'")
            XCTAssertEqual(linked, 0)
        }
    }

    /// The nearby query uses the GiST index (checked on a table big enough for the planner).
    func testNearbyQueryPlanIsAnIndexScan() async throws {
        try await OfflineHarness.run { h in
            try await h.runtime.db.query(
                """
                INSERT INTO offline.location_based_content (app_id, id, title, location)
                SELECT \(h.app), 'p' || g, 'p' || g, ST_SetSRID(ST_MakePoint(random() * 360 - 180, random() * 170 - 85), 4326)::geography
                FROM generate_series(1, 20000) g
                """,
                logger: h.runtime.logger
            )
            try await h.runtime.db.query("ANALYZE offline.location_based_content", logger: h.runtime.logger)
            var plan = ""
            let q = LocationStore.nearbyQuery(app: h.app, lat: 48.85, lon: 2.35, radiusKm: 50, now: Date())
            var explain = PostgresQuery(unsafeSQL: "EXPLAIN " + q.sql)
            explain.binds = q.binds
            for try await line in try await h.runtime.db.query(explain, logger: h.runtime.logger).decode(String.self) { plan += line + "\n" }
            XCTAssertTrue(plan.contains("location_based_content_geo"), plan)
            XCTAssertTrue(plan.contains("Index Scan") || plan.contains("Bitmap Index Scan"), plan)
        }
    }
}

import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineDomain
import PostgresNIO
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import OfflineService

/// #14: the offline engine's failure modes, each as the case that broke it.
final class OfflineEngineTests: XCTestCase {
    static func execute(_ h: OfflineHarness, _ user: UUID) async throws -> UUID {
        let r = try await h.call(.post, "/sync/execute", user: user)
        XCTAssertEqual(r.status, .accepted, String(buffer: r.body))
        return try XCTUnwrap(UUID(uuidString: try h.obj(r).string("job_id") ?? ""))
    }

    /// 1 and 2: a failed delivery's retry is the sync job scheduled again (no worker slot held
    /// while it waits), due 2 s (±20 %) after the failure, not after the attempt's start.
    func testARetryIsAScheduledJobCountedFromTheFailure() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            _ = try await SyncAndLocationTests.queue(h, user, id: "slow-1")
            h.upstream.syncMode.withLock { $0 = .slow(.seconds(4)) }  // the harness's upstream timeout is 2 s
            let job = try await Self.execute(h, user)
            _ = try await h.worker.runOnce()
            let failedAt = Date()
            let running = try await h.count(
                "SELECT count(*)::int FROM offline.jobs WHERE kind = 'sync_execute' AND status = 'running' AND id > \(h.firstJob)"
            )
            XCTAssertEqual(running, 0, "nothing holds a worker slot while the retry waits")
            let scheduled = try await h.count(
                """
                SELECT count(*)::int FROM offline.jobs WHERE kind = 'sync_execute' AND status = 'pending' AND id > \(h.firstJob)
                AND payload->>'job_id' = '\(job.lowercasedString)' AND run_at > now() + interval '1 second'
                """
            )
            XCTAssertEqual(scheduled, 1, "the job runs again when the retry is due")
            var retryAt = Date.distantPast
            for try await d in try await h.runtime.db.query(
                """
                SELECT next_retry_at FROM offline.sync_queue WHERE user_id = \(user) AND client_action_id = 'slow-1'
                """,
                logger: h.runtime.logger
            ).decode(Date.self) { retryAt = d }
            XCTAssertGreaterThanOrEqual(retryAt.timeIntervalSince(failedAt), 1.2, "2 s (-20 %) after the timeout, not after the attempt began")
            XCTAssertLessThanOrEqual(retryAt.timeIntervalSince(failedAt), 2.5)
            let status = try h.obj(try await h.call(.get, "/sync/execute/\(job)", user: user))
            XCTAssertEqual(status.string("status"), "processing")
            h.upstream.syncMode.withLock { $0 = .up }
            try await h.drainJobs()
            let done = try h.obj(try await h.call(.get, "/sync/execute/\(job)", user: user))
            XCTAssertEqual(done.string("status"), "completed")
            XCTAssertEqual((done.int("succeeded") ?? 0) + (done.int("duplicates") ?? 0), 1, "the late first delivery and the retry: applied once")
            XCTAssertEqual(OfflineRules.retryDelay(afterAttempt: 5), 32)
            XCTAssertEqual(OfflineRules.maxActionAttempts, 6, "the first try and five retries: 2, 4, 8, 16, 32 s")
        }
    }

    /// 3: two users (and two tenants) reusing one client_action_id each reach the game server
    /// (the key names tenant and user); every call is signed, and a forgery would be refused.
    func testUpstreamCallsNameTheirUserAndAreSigned() async throws {
        try await OfflineHarness.run { h in
            let alice = UUID()
            let bob = UUID()
            for user in [alice, bob] {
                _ = try await SyncAndLocationTests.queue(h, user, id: "shared-1")
                _ = try await Self.execute(h, user)
            }
            try await h.drainJobs()
            XCTAssertEqual(h.upstream.applied.withLock { $0.count }, 2, "neither user's action was taken for the other's")
            let keys = h.upstream.keys.withLock { $0 }
            XCTAssertTrue(keys.contains("\(h.app.uuidString.lowercased()):\(alice.uuidString.lowercased()):shared-1"), "\(keys)")
            XCTAssertTrue(keys.contains("\(h.app.uuidString.lowercased()):\(bob.uuidString.lowercased()):shared-1"), "\(keys)")
            XCTAssertEqual(h.upstream.forged.withLock { $0 }, 0, "every call verified with the tenant's secret")
            let applied = try await h.count(
                "SELECT count(*)::int FROM offline.sync_queue WHERE client_action_id = 'shared-1' AND status = 'success' AND app_id = '\(h.app)'"
            )
            XCTAssertEqual(applied, 2)
            // The receiver's rule: another tenant's secret, a changed body or an old timestamp fail.
            let signer = SyncSignature(key: FakeOfflineUpstreams.signingKey)
            let body = Data(#"{"a":1}"#.utf8)
            let header = signer.header(app: h.app, body: body, at: Date())
            XCTAssertTrue(FakeOfflineUpstreams.signatureValid(header, body: body, app: h.app.uuidString))
            XCTAssertFalse(FakeOfflineUpstreams.signatureValid(header, body: body, app: UUID().uuidString))
            XCTAssertFalse(FakeOfflineUpstreams.signatureValid(header, body: Data(#"{"a":2}"#.utf8), app: h.app.uuidString))
            XCTAssertFalse(
                FakeOfflineUpstreams.signatureValid(signer.header(app: h.app, body: body, at: Date() - 600), body: body, app: h.app.uuidString)
            )
            XCTAssertTrue(SyncSignature.verify(header: header, body: body, secret: signer.secret(app: h.app), now: Date()))
            XCTAssertNotEqual(signer.secret(app: h.app), signer.secret(app: UUID()))
        }
    }

    /// 8: an answer is never dropped from a full queue, whatever priority the app gave it.
    func testAnAnswerQueuedAtLowPriorityIsNeverDropped() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            _ = try await SyncAndLocationTests.queue(h, user, id: "answer-low", type: "answer_submit", priority: 10)
            for i in 1..<100 { _ = try await SyncAndLocationTests.queue(h, user, id: "a-\(i)") }
            let full = try await SyncAndLocationTests.queue(h, user, id: "ping", type: "stats_ping")
            XCTAssertEqual(full.status, .tooManyRequests)
            let kept = try await h.count(
                "SELECT count(*)::int FROM offline.sync_queue WHERE user_id = '\(user)' AND client_action_id = 'answer-low' AND status = 'pending'"
            )
            XCTAssertEqual(kept, 1)
            XCTAssertFalse(OfflineRules.isDroppable(actionType: "answer_submit", priority: 10))
            XCTAssertFalse(OfflineRules.isDroppable(actionType: "progress_save", priority: 10))
            XCTAssertTrue(OfflineRules.isDroppable(actionType: "stats_ping", priority: 10))
            XCTAssertFalse(OfflineRules.isDroppable(actionType: "stats_ping", priority: 7))
        }
    }

    /// 4: after tombstones are purged, a copy made now is up to date now.
    func testACopyMadeAfterAPurgeIsUpToDate() async throws {
        try await OfflineHarness.run { h in
            try await h.category("fresh", items: 5)
            _ = try await h.call(.post, "/admin/categories/fresh/items", json: #"{"delete":["fresh-0004"]}"#)
            try await h.runtime.db.query(
                "UPDATE offline.content_items SET deleted_at = now() - interval '31 days' WHERE app_id = \(h.app) AND id = 'fresh-0004'",
                logger: h.runtime.logger
            )
            let maintenance = h.maintenance()
            let report = try await maintenance.runOnce()
            XCTAssertGreaterThanOrEqual(report.tombstoneApps, 1)
            let user = UUID()
            _ = try await h.startDownload(user, ["fresh"])
            try await h.drainJobs()
            let check = try h.obj(try await h.call(.get, "/categories/fresh/check-updates", user: user))
            XCTAssertEqual(check.bool("full_download_required"), false)
            XCTAssertEqual(check.bool("has_updates"), false)
            let refresh = try await h.call(.post, "/categories/fresh/refresh", user: user)
            XCTAssertEqual(refresh.status, .ok, String(buffer: refresh.body))
        }
    }

    /// 5: refresh respects the FREE limits: items the copy did not take are not added by an
    /// update, new items beyond 50 are reported, not stored.
    func testRefreshKeepsTheLimits() async throws {
        try await OfflineHarness.run { h in
            try await h.category("big", items: 60)
            let user = UUID()
            _ = try await h.startDownload(user, ["big"])
            try await h.drainJobs()
            var copy = try await h.count("SELECT count(*)::int FROM offline.offline_items WHERE user_id = '\(user)'")
            XCTAssertEqual(copy, 50)
            // Items 50-59 (not in the copy) change, and two new ones arrive.
            let changed =
                (50..<60).map { #"{"id":"big-\#(String(format: "%04d", $0))","data":{"question":"changed \#($0)"}}"# }
                + [#"{"id":"big-0100","data":{"q":"new"}}"#, #"{"id":"big-0101","data":{"q":"new"}}"#]
            _ = try await h.call(.post, "/admin/categories/big/items", json: #"{"upsert":[\#(changed.joined(separator: ","))]}"#)
            let r = try await h.call(.post, "/categories/big/refresh", user: user)
            XCTAssertEqual(r.status, .ok, String(buffer: r.body))
            let body = try h.obj(r)
            copy = try await h.count("SELECT count(*)::int FROM offline.offline_items WHERE user_id = '\(user)'")
            XCTAssertEqual(copy, 50, "the copy never grows past 50 items")
            XCTAssertEqual(body.array("not_applied").count, 12)
            XCTAssertTrue(body.array("not_applied").allSatisfy { $0.string("reason") == "item_limit" })
            let listed = try h.obj(try await h.call(.get, "/categories/downloaded", user: user)).array("categories").first
            XCTAssertEqual(listed?.int("item_count"), 50)
            // The rule, storage included.
            var budget = CopyBudget(itemCount: 49, usedBytes: 49_990_000, limits: .free)
            XCTAssertEqual(budget.admit(newSize: 20_000, oldSize: nil), .storageLimit)
            XCTAssertNil(budget.admit(newSize: 5_000, oldSize: nil))
            XCTAssertEqual(budget.admit(newSize: 1, oldSize: nil), .itemLimit)
            XCTAssertNil(budget.admit(newSize: 4_000, oldSize: 5_000), "a shrinking update always fits")
            XCTAssertEqual(budget.usedBytes, 49_994_000)
        }
    }

    /// 6: a paused partial download is visible, counted and deletable; deleting cancels what
    /// the job would still add, so resuming cannot report an empty copy complete.
    func testPausedPartialDownloadsAreVisibleAndDeletingCancelsThem() async throws {
        try await OfflineHarness.run { h in
            try await h.category("half", items: 150)
            let user = UUID()
            let job = try await h.startDownload(user, ["half"], premium: true)
            _ = try await DownloadJob.batch(job, h.downloadDeps)
            _ = try await h.call(.post, "/categories/download/\(job)/pause", user: user)
            let listed = try h.obj(try await h.call(.get, "/categories/downloaded", user: user)).array("categories")
            XCTAssertEqual(listed.first?.string("category_id"), "half")
            XCTAssertEqual(listed.first?.bool("complete"), false)
            XCTAssertEqual(listed.first?.int("item_count"), 100)
            let suggestions = try h.obj(try await h.call(.get, "/storage/suggestions", user: user)).array("suggestions")
            XCTAssertTrue(suggestions.contains { $0.string("category_id") == "half" })
            let deleted = try await h.call(.delete, "/categories", user: user)
            XCTAssertEqual(deleted.status, .ok)
            XCTAssertGreaterThan(try XCTUnwrap(try h.obj(deleted).double("space_freed_mb")), 0)
            let resumed = try await h.call(.post, "/categories/download/\(job)/resume", user: user)
            XCTAssertEqual(resumed.status, .conflict)
            XCTAssertEqual(try resumed.envelope().extra["status"], .string("cancelled"))
            try await h.drainJobs()
            let left = try await h.count("SELECT count(*)::int FROM offline.offline_items WHERE user_id = '\(user)'")
            XCTAssertEqual(left, 0)
            let rows = try await h.count("SELECT count(*)::int FROM offline.offline_categories WHERE user_id = '\(user)'")
            XCTAssertEqual(rows, 0, "no category reported complete with 0 items")
            // A paused job that stored nothing yet: its category can be deleted (and freed) too.
            let second = try await h.startDownload(user, ["half"])
            _ = try await h.call(.post, "/categories/download/\(second)/pause", user: user)
            let one = try await h.call(.delete, "/categories/half", user: user)
            XCTAssertEqual(one.status, .ok, String(buffer: one.body))
            let status = try h.obj(try await h.call(.get, "/categories/download/\(second)", user: user))
            XCTAssertEqual(status.string("status"), "cancelled")
        }
    }

    /// 7: nearby content is ordered by the distance it reports (WGS84), not the sphere's.
    func testNearbyIsOrderedByTheReportedDistance() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            h.upstream.geolocationConsent.withLock { _ = $0.insert(user) }
            // From (0, 0): due north 0.9045° is 100.01 km on the spheroid (100.58 on the sphere);
            // due east 0.899° is 100.08 km on the spheroid (99.96 on the sphere).
            for (id, lat, lon) in [("north", 0.9045, 0.0), ("east", 0.0, 0.899)] {
                let r = try await h.call(
                    .put,
                    "/admin/location-content/\(id)-\(h.app.uuidString.prefix(8))",
                    json: #"{"title":"\#(id)","latitude":\#(lat),"longitude":\#(lon)}"#
                )
                XCTAssertEqual(r.status, .ok)
            }
            let located = try await SyncAndLocationTests.locate(h, user, lat: 0, lon: 0)
            XCTAssertEqual(located.status, .created, String(buffer: located.body))
            let near = try h.obj(try await h.call(.get, "/location/nearby-content?radius_km=150", user: user)).array("content")
            XCTAssertEqual(near.map { $0.string("title") }, ["north", "east"])
            let d = near.compactMap { $0.double("distance_km") }
            XCTAssertEqual(d, d.sorted(), "listed in the order of the distances shown")
        }
    }
}

/// #16: an app's own upstreams and signing secret, set at run time through `/admin/sync-upstream`.
final class UpstreamSettingsTests: XCTestCase {
    /// Waits until the worker's copy (told by the change feed only) has the app's version.
    static func heard(_ h: OfflineHarness, version: Int64) async throws {
        let end = ContinuousClock.now + .seconds(1)
        while try await h.upstreamTenants.value(for: h.app)?.version != version {
            guard ContinuousClock.now < end else { return XCTFail("the worker did not hear version \(version) within 1 s") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func testAnAppsOwnUpstreamAndRotatedSecretAreUsedWithoutARestart() async throws {
        try await OfflineHarness.run { h in
            let shown = try h.obj(try await h.call(.get, "/admin/sync-upstream"))
            XCTAssertEqual(shown.bool("is_default"), true)
            XCTAssertEqual(shown.int("secret_version"), 1)

            let own = #"{"routes":{"*":"\#(h.upstream.base)/sync?tenant=own"}}"#
            let set = try await h.call(.put, "/admin/sync-upstream", json: own)
            XCTAssertEqual(set.status, .ok, String(buffer: set.body))
            try await Self.heard(h, version: 1)
            let user = UUID()
            _ = try await SyncAndLocationTests.queue(h, user, id: "own-1")
            _ = try await OfflineEngineTests.execute(h, user)
            try await h.drainJobs()
            XCTAssertEqual(h.upstream.urls.withLock { $0 }, ["/sync?tenant=own"], "the app's own route, not SYNC_UPSTREAMS")

            // A rotation: the answer is the new secret, and the next call is signed with it (the
            // game server, told the new version, refuses the old secret's signature).
            let rotated = try await h.call(.post, "/admin/sync-upstream/rotate-secret")
            XCTAssertEqual(rotated.status, .ok)
            let r = try h.obj(rotated)
            XCTAssertEqual(r.int("secret_version"), 2)
            let signer = SyncSignature(key: FakeOfflineUpstreams.signingKey)
            XCTAssertEqual(r.string("secret"), signer.secret(app: h.app, version: 2))
            XCTAssertNotEqual(signer.secret(app: h.app, version: 2), signer.secret(app: h.app))
            FakeOfflineUpstreams.secretVersions.withLock { $0[h.app.uuidString.lowercased()] = 2 }
            try await Self.heard(h, version: 2)
            _ = try await SyncAndLocationTests.queue(h, user, id: "own-2")
            _ = try await OfflineEngineTests.execute(h, user)
            try await h.drainJobs()
            XCTAssertEqual(h.upstream.forged.withLock { $0 }, 0, "signed with the rotated secret")
            XCTAssertEqual(h.upstream.applied.withLock { $0.count }, 2)

            // Bad input: a 4xx in the envelope, nothing changed.
            for (body, status) in [
                (#"{"routes":{}}"#, HTTPResponse.Status.unprocessableContent),
                (#"{"routes":{"*":"ftp://game.example.com"}}"#, .unprocessableContent),
                (#"{"routes":{"*":"not a url"}}"#, .unprocessableContent),
                (#"{"routes":{"*":5}}"#, .badRequest), (#"{"route":{}}"#, .badRequest), ("[1]", .badRequest),
            ] {
                let bad = try await h.call(.put, "/admin/sync-upstream", json: body)
                XCTAssertEqual(bad.status, status, body)
                XCTAssertNotNil(try? bad.envelope().error, body)
            }
            var noCredential = h.admin
            noCredential[.authorization] = nil
            let refused = try await h.call(.put, "/admin/sync-upstream", json: own, headers: noCredential)
            XCTAssertEqual(refused.status, .unauthorized)
            let after = try h.obj(try await h.call(.get, "/admin/sync-upstream"))
            XCTAssertEqual(after.int("version"), 2, "one set and one rotation, nothing else")
            XCTAssertEqual(after.bool("is_default"), false)
        }
    }
}

/// #19: the hourly upkeep works in small batches: a backlog larger than one batch is all done in
/// one run, a batch at a time (here batches of 2 over 5 rows).
final class UpkeepBatchTests: XCTestCase {
    func testOldLocationsAreAnonymisedInBatchesUntilNoneIsDue() async throws {
        let runtime = TestEnvironment.runtime(.offline, migrations: try OfflineService.migrations())
        try await withMigratedRuntime(runtime) { rt in
            let app = UUID()
            try await rt.db.query(
                """
                INSERT INTO user_locations (id, app_id, user_id, location, accuracy, source, city, created_at)
                SELECT gen_random_uuid(), \(app), gen_random_uuid(), ST_SetSRID(ST_MakePoint(2.35, 48.85), 4326)::geography, 10, 'gps', 'Paris',
                       now() - interval '100 days'
                FROM generate_series(1, 5)
                """,
                logger: rt.logger
            )
            let anonymized = try await rt.db.withConnection { conn in
                try await LocationStore(logger: rt.logger).anonymize(olderThan: Date().addingTimeInterval(-90 * 86_400), batch: 2, on: conn)
            }
            XCTAssertGreaterThanOrEqual(anonymized, 5)
            var left = -1
            for try await n in try await rt.db.query(
                """
                SELECT count(*)::int FROM user_locations WHERE app_id = \(app) AND (NOT anonymized OR user_id IS NOT NULL OR city IS NOT NULL)
                """,
                logger: rt.logger
            ).decode(Int.self) { left = n }
            XCTAssertEqual(left, 0, "every old location anonymised, over three batches")
        }
    }
}

import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineDomain
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import OfflineService

/// UC-OFFLINE-3.1, 3.2 and 3.6: limits, download jobs paused and resumed, the pack and its
/// checksums, updates with a cursor, storage.
final class DownloadTests: XCTestCase {
    /// Every item of the user's pack, fetched page by page, decoded and checked against its
    /// checksum. Returns item id → decoded JSON.
    static func pack(_ h: OfflineHarness, _ user: UUID, _ category: String) async throws -> [String: [String: Any]] {
        var out: [String: [String: Any]] = [:]
        var after: String?
        repeat {
            let r = try await h.call(.get, "/categories/\(category)/items?limit=40" + (after.map { "&after=\($0)" } ?? ""), user: user)
            XCTAssertEqual(r.status, .ok, String(buffer: r.body))
            let page = try h.obj(r)
            for item in page.array("items") {
                let raw = try XCTUnwrap(Data(base64Encoded: item.string("data") ?? ""))
                let json = item.string("encoding") == "gzip" ? try Self.gunzip(raw) : raw
                let digest = SHA256.hash(data: json).map { String(format: "%02x", $0) }.joined()
                XCTAssertEqual(digest, item.string("checksum"), "checksum of \(item.string("id") ?? "")")
                XCTAssertNil(out[item.string("id")!], "an item served twice")
                out[item.string("id")!] = try JSONSerialization.jsonObject(with: json) as? [String: Any]
            }
            after = page.string("next_after")
        } while after != nil
        return out
    }

    /// gzip -d from the system, not this service's zlib code.
    static func gunzip(_ data: Data) throws -> Data {
        let gzip = try ChildProcess("/bin/gzip", ["-d", "-c"], input: data)
        XCTAssertEqual(gzip.wait().status, 0)
        return gzip.standardOutputData
    }

    func testDownloadPausedMidwayAndResumedHasEveryItemOnceWithRightChecksums() async throws {
        try await OfflineHarness.run { h in
            try await h.category("capitals-europe", items: 120)
            try await h.category("flags-asia", items: 130)
            let user = UUID()
            try await h.makePremium(user)
            let start = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["capitals-europe","flags-asia"]}"#)
            XCTAssertEqual(start.status, .accepted, String(buffer: start.body))
            let job = try h.obj(start)
            let jobID = try XCTUnwrap(UUID(uuidString: job.string("job_id") ?? ""))
            XCTAssertGreaterThan(try XCTUnwrap(job.double("estimated_size_mb")), 0)
            XCTAssertGreaterThan(try XCTUnwrap(job.int("estimated_time_seconds")), 0)

            // One batch of 100 runs, then the connection drops (15a): paused.
            let more = try await DownloadJob.batch(jobID, h.downloadDeps)
            XCTAssertTrue(more)
            let paused = try await h.call(.post, "/categories/download/\(jobID)/pause", user: user)
            XCTAssertEqual(paused.status, .ok)
            try await h.drainJobs()
            let mid = try h.obj(try await h.call(.get, "/categories/download/\(jobID)", user: user))
            XCTAssertEqual(mid.string("status"), "paused")
            XCTAssertEqual(mid.int("downloaded_count"), 100)
            XCTAssertEqual(mid.int("total_count"), 250)
            XCTAssertEqual(mid.int("progress"), 40)
            let again = try await h.call(.post, "/categories/download/\(jobID)/pause", user: user)
            XCTAssertEqual(again.status, .conflict)

            let resumed = try await h.call(.post, "/categories/download/\(jobID)/resume", user: user)
            XCTAssertEqual(resumed.status, .ok)
            try await h.drainJobs()
            let done = try h.obj(try await h.call(.get, "/categories/download/\(jobID)", user: user))
            XCTAssertEqual(done.string("status"), "completed")
            XCTAssertEqual(done.int("progress"), 100)
            XCTAssertEqual(done.int("downloaded_count"), 250)

            let europe = try await Self.pack(h, user, "capitals-europe")
            let asia = try await Self.pack(h, user, "flags-asia")
            XCTAssertEqual(europe.count, 120)
            XCTAssertEqual(asia.count, 130)
            XCTAssertEqual(europe["capitals-europe-0007"]?["answer"] as? Int, 3)
            let stored = try await h.count("SELECT count(*)::int FROM offline.offline_items WHERE user_id = '\(user)'")
            XCTAssertEqual(stored, 250, "every item exactly once")
            let gz = try await h.count("SELECT count(*)::int FROM offline.offline_items WHERE user_id = '\(user)' AND compressed")
            XCTAssertEqual(gz, 25, "items over 10 KB are gzipped")
            let expiring = try await h.count(
                """
                SELECT count(*)::int FROM offline.offline_items WHERE user_id = '\(user)'
                  AND abs(extract(epoch FROM expires_at - downloaded_at) - 30 * 86400) < 1
                """
            )
            XCTAssertEqual(expiring, 250)
            let profile = try h.obj(try await h.call(.get, "/sync/profile", user: user))
            XCTAssertEqual(profile.array("categories").first { $0.string("id") == "flags-asia" }?.string("status"), "downloaded")
            XCTAssertNotNil(profile.object("profile")?.string("last_full_sync_at"))
        }
    }

    /// The erasure committed on another replica, which this one has not heard of yet: the token
    /// still passes here, but the profile is not created again (the row the erasure deleted stays
    /// gone) and the answer is the erased account's 401.
    func testAProfileIsNotRecreatedForAUserErasedOnAnotherReplica() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            _ = try h.obj(try await h.call(.get, "/sync/profile", user: user))
            try await h.runtime.db.query(
                """
                WITH gone AS (DELETE FROM offline.sync_profiles WHERE app_id = \(h.app) AND user_id = \(user))
                INSERT INTO offline.session_state (app_id, user_id, version, session_epoch, state) VALUES (\(h.app), \(user), 9, 2147483647, 'erased')
                """,
                logger: h.runtime.logger
            )
            let late = try await h.call(.get, "/sync/profile", user: user)
            XCTAssertEqual(late.status, .unauthorized)
            XCTAssertEqual(try late.envelope().error, "invalid_token")
            let rows = try await h.count("SELECT count(*)::int FROM offline.sync_profiles WHERE user_id = '\(user)'")
            XCTAssertEqual(rows, 0, "nothing recreated for the erased user")
        }
    }

    func testFreeLimitsAreCheckedBeforeAnythingIsCreated() async throws {
        try await OfflineHarness.run { h in
            for c in ["a1", "a2", "a3", "a4"] { try await h.category(c, items: 60) }
            let user = UUID()
            let profile = try h.obj(try await h.call(.get, "/sync/profile", user: user))
            XCTAssertEqual(profile.object("limits")?.int("max_categories"), 3)
            XCTAssertEqual(profile.object("storage")?.double("limit_mb"), 50)
            XCTAssertEqual(profile.array("categories").first?.int("item_count"), 50, "FREE sees 50 items per category")
            XCTAssertEqual(profile.array("categories").first?.string("status"), "not_downloaded")
            let four = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["a1","a2","a3","a4"]}"#)
            XCTAssertEqual(four.status, .forbidden)
            let e = try four.envelope()
            XCTAssertEqual(e.error, "category_limit_exceeded")
            XCTAssertEqual(e.extra["limit"], .int(3))
            XCTAssertEqual(e.extra["requested"], .int(4))
            let jobs = try await h.count("SELECT count(*)::int FROM offline.download_jobs WHERE user_id = '\(user)'")
            XCTAssertEqual(jobs, 0)
            let ok = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["a1","a2","a3"]}"#)
            XCTAssertEqual(try h.obj(ok).int("total_count"), 150, "50 items per category for FREE")
            // The job has not run yet: its categories count already (else a quick second request gets a 4th).
            let early = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["a4"]}"#)
            XCTAssertEqual(try early.envelope().error, "category_limit_exceeded")
            try await h.drainJobs()
            let more = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["a4"]}"#)
            XCTAssertEqual(try more.envelope().extra["downloaded"], .int(3))
            // FREE cannot turn Wi-Fi only off; PREMIUM can.
            let wifi = try await h.call(.patch, "/sync/profile", user: user, json: #"{"sync_on_wifi_only":false}"#)
            XCTAssertEqual(try wifi.envelope().error, "premium_required")
            try await h.makePremium(user)
            let p = try h.obj(
                try await h.call(
                    .patch,
                    "/sync/profile",
                    user: user,
                    json: #"{"sync_on_wifi_only":false,"conflict_strategy":"manual","sync_frequency_hours":12}"#
                )
            )
            XCTAssertEqual(p.object("profile")?.bool("sync_on_wifi_only"), false)
            XCTAssertEqual(p.object("profile")?.string("conflict_strategy"), "manual")
            for (json, field) in [
                (#"{"sync_frequency_hours":0}"#, "sync_frequency_hours"), (#"{"conflict_strategy":"coin_flip"}"#, "conflict_strategy"),
                (#"{"auto_sync_enabled":"yes"}"#, "auto_sync_enabled"),
            ] {
                let bad = try await h.call(.patch, "/sync/profile", user: user, json: json)
                XCTAssertEqual(try bad.envelope().extra["field"], .string(field))
            }
            let unknown = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["nope"]}"#)
            XCTAssertEqual(unknown.status, .notFound)
            let empty = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":[]}"#)
            XCTAssertEqual(empty.status, .unprocessableContent)
            let wrongType = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":"a1"}"#)
            XCTAssertEqual(wrongType.status, .badRequest)
            let otherUser = try await h.call(.get, "/categories/download/\(UUID())", user: user)
            XCTAssertEqual(otherUser.status, .notFound)
            var foreign = h.admin
            foreign[.authorization] = "Bearer \(try h.token(user, app: UUID()))"
            let refused = try await h.call(.get, "/sync/profile", headers: foreign)
            XCTAssertEqual(refused.status, .unauthorized)
        }
    }

    func testStorageLimitNamesTheFigures() async throws {
        try await OfflineHarness.run { h in
            try await h.category("big", items: 0)
            // 50 items of ~1.02 MB each: 51 MB, over FREE's 50 MB.
            let blob = String(repeating: "x", count: 1_020_000)
            for i in 0..<50 {
                _ = try await h.call(.post, "/admin/categories/big/items", json: #"{"upsert":[{"id":"b\#(i)","data":{"blob":"\#(blob)"}}]}"#)
            }
            let r = try await h.call(.post, "/categories/download", user: UUID(), json: #"{"category_ids":["big"]}"#)
            XCTAssertEqual(r.status.code, 507)
            let e = try r.envelope()
            XCTAssertEqual(e.error, "storage_limit_exceeded")
            let figures = try r.json([String: JSONValue].self)
            XCTAssertEqual(figures.double("available_mb"), 50)
            XCTAssertGreaterThan(try XCTUnwrap(figures.double("required_mb")), 50)
        }
    }

    func testUpdatesCursorRefreshTombstonesAndDeletion() async throws {
        try await OfflineHarness.run { h in
            try await h.category("quiz", items: 10)
            let user = UUID()
            _ = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["quiz"]}"#)
            try await h.drainJobs()
            let downloaded = try h.obj(try await h.call(.get, "/categories/downloaded", user: user)).array("categories")
            let cursor = try XCTUnwrap(downloaded.first?.int("cursor"))
            let none = try h.obj(try await h.call(.get, "/categories/quiz/check-updates", user: user))
            XCTAssertEqual(none.bool("has_updates"), false)
            // The main app publishes: 2 added, 1 changed, 1 deleted, 1 republished unchanged.
            _ = try await h.call(
                .post,
                "/admin/categories/quiz/items",
                json: """
                    {"upsert":[{"id":"quiz-0100","data":{"q":"new"}},{"id":"quiz-0101","data":{"q":"new2"}},{"id":"quiz-0001","data":{"q":"changed"}}],
                     "delete":["quiz-0002"]}
                    """
            )
            let check = try h.obj(try await h.call(.get, "/categories/quiz/check-updates?cursor=\(cursor)", user: user))
            XCTAssertEqual(check.int("added"), 2)
            XCTAssertEqual(check.int("updated"), 1)
            XCTAssertEqual(check.int("deleted"), 1)
            XCTAssertEqual(check.bool("full_download_required"), false)
            XCTAssertGreaterThan(try XCTUnwrap(check.int("next_cursor")), cursor)
            let status = try h.obj(try await h.call(.get, "/sync/profile", user: user)).array("categories").first?.string("status")
            XCTAssertEqual(status, "update_available")
            let refresh = try h.obj(try await h.call(.post, "/categories/quiz/refresh", user: user))
            XCTAssertEqual(refresh.bool("updated"), true)
            XCTAssertEqual(refresh.object("changes")?.int("added"), 2)
            XCTAssertEqual(refresh.object("changes")?.int("updated"), 1)
            XCTAssertEqual(refresh.object("changes")?.int("deleted"), 1)
            let pack = try await Self.pack(h, user, "quiz")
            XCTAssertEqual(pack.count, 11)
            XCTAssertEqual(pack["quiz-0001"]?["q"] as? String, "changed")
            XCTAssertNil(pack["quiz-0002"])
            let after = try h.obj(try await h.call(.post, "/categories/quiz/refresh", user: user))
            XCTAssertEqual(after.bool("updated"), false)

            // Tombstones older than 30 days are purged; an old cursor must download again.
            h.clock.advance(by: 31 * 86400)
            let purge = h.maintenance()
            try await h.runtime.db.query(
                "UPDATE offline.content_items SET deleted_at = now() - interval '31 days' WHERE id = 'quiz-0002'",
                logger: h.runtime.logger
            )
            let report = try await purge.runOnce()
            XCTAssertGreaterThanOrEqual(report.tombstoneApps, 1)
            let stale = try h.obj(try await h.call(.get, "/categories/quiz/check-updates?cursor=\(cursor)", user: user))
            XCTAssertEqual(stale.bool("full_download_required"), true)
            XCTAssertGreaterThanOrEqual(report.expired, 1)
            let expired = try await h.count("SELECT count(*)::int FROM offline.offline_categories WHERE user_id = '\(user)'")
            XCTAssertEqual(expired, 0, "the copy expired after 30 days")

            // Deleting a category frees its space; pending actions for it warn first.
            _ = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["quiz"]}"#)
            try await h.drainJobs()
            _ = try await h.call(
                .post,
                "/sync/queue",
                user: user,
                json: """
                    {"client_action_id":"a-1","action_type":"answer_submit","entity_type":"quiz_completion","entity_id":"quiz_1","category_id":"quiz","payload":{"score":3}}
                    """
            )
            let suggestions = try h.obj(try await h.call(.get, "/storage/suggestions", user: user))
            XCTAssertEqual(suggestions.array("suggestions").first?.string("reason"), "never_opened")
            let warned = try await h.call(.delete, "/categories/quiz", user: user)
            XCTAssertEqual(warned.status, .conflict)
            XCTAssertEqual(try warned.envelope().extra["pending_actions"], .int(1))
            let deleted = try h.obj(try await h.call(.delete, "/categories/quiz?force=true", user: user))
            XCTAssertEqual(deleted.bool("deleted"), true)
            XCTAssertGreaterThan(try XCTUnwrap(deleted.double("space_freed_mb")), 0)
            let left = try await h.count("SELECT count(*)::int FROM offline.offline_items WHERE user_id = '\(user)'")
            XCTAssertEqual(left, 0)
            let gone = try await h.call(.delete, "/categories/quiz", user: user)
            XCTAssertEqual(gone.status, .notFound)
        }
    }
}

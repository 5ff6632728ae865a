import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import OfflineDomain
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import OfflineService

/// The alternate flows the other suites do not reach: an item gone mid-download (15b), a slow
/// upstream (timeout, retry, applied once), the internal routes and the user's data.
final class OfflineEdgeTests: XCTestCase {
    func testItemRemovedBeforeItIsCopiedEndsCompletedWithErrors() async throws {
        try await OfflineHarness.run { h in
            try await h.category("mixed", items: 12)
            let user = UUID()
            let start = try h.obj(try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["mixed"]}"#))
            let job = try XCTUnwrap(start.string("job_id"))
            _ = try await h.call(.post, "/admin/categories/mixed/items", json: #"{"delete":["mixed-0003","mixed-0007"]}"#)
            try await h.drainJobs()
            let status = try h.obj(try await h.call(.get, "/categories/download/\(job)", user: user))
            XCTAssertEqual(status.string("status"), "completed_with_errors")
            XCTAssertEqual(status.int("downloaded_count"), 10)
            XCTAssertEqual(status.int("failed_count"), 2)
            XCTAssertEqual(status.array("errors").compactMap { $0.string("item_id") }, ["mixed-0003", "mixed-0007"])
            let tries = try await h.count("SELECT max(attempts)::int FROM offline.download_job_items WHERE job_id = '\(job)' AND status = 'failed'")
            XCTAssertEqual(tries, 3, "3 tries per item")
            let copy = try h.obj(try await h.call(.get, "/categories/downloaded", user: user)).array("categories")
            XCTAssertEqual(copy.first?.bool("complete"), false)
            let partial = try h.obj(try await h.call(.get, "/storage/suggestions", user: user)).array("suggestions")
            XCTAssertEqual(partial.first?.string("category_id"), "mixed")
        }
    }

    /// Items published before packing existed (packed is NULL) are packed once, for the
    /// catalogue, and copied like the others in the same batch.
    func testItemsNotPackedYetArePackedOnceAndCopied() async throws {
        try await OfflineHarness.run { h in
            try await h.category("legacy", items: 7)
            try await h.runtime.db.query(
                "UPDATE offline.content_items SET packed = NULL WHERE app_id = \(h.app) AND id IN ('legacy-0002', 'legacy-0005')"
            )
            let user = UUID()
            let start = try h.obj(try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["legacy"]}"#))
            let job = try XCTUnwrap(start.string("job_id"))
            try await h.drainJobs()
            let status = try h.obj(try await h.call(.get, "/categories/download/\(job)", user: user))
            XCTAssertEqual(status.string("status"), "completed")
            XCTAssertEqual(status.int("downloaded_count"), 7)
            let unpacked = try await h.count("SELECT count(*)::int FROM offline.content_items WHERE app_id = '\(h.app)' AND packed IS NULL")
            XCTAssertEqual(unpacked, 0, "packed for the catalogue")
            let mismatched = try await h.count(
                """
                SELECT count(*)::int FROM offline.offline_items o JOIN offline.content_items c ON c.app_id = o.app_id AND c.id = o.item_id
                WHERE o.user_id = '\(user)' AND (o.checksum <> c.packed_checksum OR o.data <> c.packed)
                """
            )
            let copied = try await h.count("SELECT count(*)::int FROM offline.offline_items WHERE user_id = '\(user)'")
            XCTAssertEqual(copied, 7)
            XCTAssertEqual(mismatched, 0)
        }
    }

    /// An upstream slower than the timeout: the action is retried; the first (late) delivery
    /// and the retry carry the same Idempotency-Key, so it is applied once.
    func testSlowUpstreamIsRetriedAndAppliedOnce() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            _ = try await h.call(
                .post,
                "/sync/queue",
                user: user,
                json: """
                    {"client_action_id":"slow-1","action_type":"progress_save","entity_type":"progress","entity_id":"p1","payload":{"level":3}}
                    """
            )
            h.upstream.syncMode.withLock { $0 = .slow(.seconds(3)) }
            let exec = try h.obj(try await h.call(.post, "/sync/execute", user: user))
            let job = try XCTUnwrap(exec.string("job_id"))
            // The first delivery times out (2 s); the retry comes 2 s later, upstream is fast again.
            Task {
                try await Task.sleep(for: .seconds(2.5))
                h.upstream.syncMode.withLock { $0 = .up }
            }
            try await h.drainJobs()
            let r = try h.obj(try await h.call(.get, "/sync/execute/\(job)", user: user))
            XCTAssertEqual(r.string("status"), "completed")
            XCTAssertEqual((r.int("succeeded") ?? 0) + (r.int("duplicates") ?? 0), 1)
            XCTAssertGreaterThanOrEqual(h.upstream.attempts.withLock { $0 }.filter { $0 == "slow-1" }.count, 2, "timed out, then retried")
            XCTAssertEqual(h.upstream.applied.withLock { $0.keys.filter { $0.hasSuffix(":slow-1") }.count }, 1, "applied once upstream")
        }
    }

    func testInternalLocationDeletionExportAndAccountDeletion() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            h.upstream.geolocationConsent.withLock { _ = $0.insert(user) }
            try await h.category("c", items: 3)
            _ = try await h.call(.post, "/categories/download", user: user, json: #"{"category_ids":["c"]}"#)
            try await h.drainJobs()
            _ = try await h.call(
                .post,
                "/location/update",
                user: user,
                json: #"{"latitude":45.5,"longitude":-73.56,"accuracy":30,"consent_given":true}"#
            )
            _ = try await h.call(
                .post,
                "/sync/queue",
                user: user,
                json: #"{"client_action_id":"x1","action_type":"answer_submit","entity_type":"q","entity_id":"1","payload":{}}"#
            )
            let headers: HTTPFields = [.authorization: "Bearer local-internal-auth", .xServiceName: "auth"]
            let export = try await h.client.execute(uri: "/internal/users/\(user)/export?app_id=\(h.app)", method: .get, headers: headers) { $0 }
            let doc = try export.json(UserDataExport.self)
            for section in ["locations", "offline_copy", "sync_queue", "sync_profile"] {
                guard case .array(let rows)? = doc.sections[section] else {
                    XCTFail(section)
                    continue
                }
                XCTAssertEqual(rows.count, 1, section)
            }
            // Auth withdraws the geolocation consent (version 2): the locations go with it. A late
            // grant (version 1) does not bring the consent back.
            var json = headers
            json[.contentType] = "application/json"
            func consent(_ value: Bool, _ version: Int64) async throws -> TestResponse {
                try await h.client.execute(
                    uri: "/internal/users/\(user)/consents/geolocation?app_id=\(h.app)",
                    method: .put,
                    headers: json,
                    body: ByteBuffer(
                        data: try JSON.encoder.encode(
                            ConsentFact(
                                appID: h.app,
                                userID: user,
                                consent: "geolocation",
                                value: value,
                                version: version
                            )
                        )
                    )
                ) { $0 }
            }
            let withdrawn = try await consent(false, 2)
            XCTAssertEqual(try withdrawn.json(FactOutcome.self).applied, true)
            do {
                let v = try await h.count("SELECT count(*)::int FROM offline.user_locations WHERE user_id = '\(user)'")
                XCTAssertEqual(v, 0)
            }
            do {
                let v = try await consent(true, 1).json(FactOutcome.self).applied
                XCTAssertEqual(v, false)
            }
            let refused = try await h.call(
                .post,
                "/location/update",
                user: user,
                json: #"{"latitude":45.5,"longitude":-73.56,"accuracy":30,"consent_given":true}"#
            )
            XCTAssertEqual(refused.status, .forbidden, "auth's fake still says yes, but offline holds the newer withdrawal")
            // Bad input changes nothing: version 0, a consent offline does not act on, another user
            // or tenant in the body, a wrong type, a missing field.
            func raw(_ body: String, consent: String = "geolocation", app: UUID? = nil) async throws -> HTTPResponse.Status {
                try await h.client.execute(
                    uri: "/internal/users/\(user)/consents/\(consent)?app_id=\(app ?? h.app)",
                    method: .put,
                    headers: json,
                    body: ByteBuffer(string: body)
                ) { $0 }.status
            }
            let bad: [(String, String, UUID?, HTTPResponse.Status)] = [
                (
                    #"{"app_id":"\#(h.app)","user_id":"\#(user)","consent":"geolocation","value":true,"version":0}"#, "geolocation", nil,
                    .unprocessableContent
                ),
                (
                    #"{"app_id":"\#(h.app)","user_id":"\#(user)","consent":"personalized_ads","value":true,"version":9}"#, "personalized_ads", nil,
                    .unprocessableContent
                ),
                (
                    #"{"app_id":"\#(h.app)","user_id":"\#(UUID())","consent":"geolocation","value":true,"version":9}"#, "geolocation", nil,
                    .unprocessableContent
                ),
                (
                    #"{"app_id":"\#(h.app)","user_id":"\#(user)","consent":"geolocation","value":true,"version":9}"#, "geolocation", UUID(),
                    .unprocessableContent
                ),
                (#"{"app_id":"\#(h.app)","user_id":"\#(user)","consent":"geolocation","value":"yes","version":9}"#, "geolocation", nil, .badRequest),
                (#"{"app_id":"\#(h.app)","user_id":"\#(user)","consent":"geolocation","value":true}"#, "geolocation", nil, .badRequest),
            ]
            for (body, consent, app, status) in bad {
                do {
                    let v = try await raw(body, consent: consent, app: app)
                    XCTAssertEqual(v, status, body)
                }
            }
            do {
                let v = try await h.count("SELECT count(*)::int FROM offline.user_consents WHERE user_id = '\(user)' AND geolocation")
                XCTAssertEqual(v, 0, "still withdrawn")
            }
            let noCredential = try await h.client.execute(uri: "/internal/users/\(user)/consents/geolocation?app_id=\(h.app)", method: .put) { $0 }
            XCTAssertEqual(noCredential.status, .unauthorized)
            // #50 one owner per fact: subscription's credential cannot grant a consent auth owns.
            let notTheOwner = try await h.client.execute(
                uri: "/internal/users/\(user)/consents/geolocation?app_id=\(h.app)",
                method: .put,
                headers: [.authorization: "Bearer local-internal-subscription", .xServiceName: "subscription", .contentType: "application/json"],
                body: ByteBuffer(
                    data: try JSON.encoder.encode(ConsentFact(appID: h.app, userID: user, consent: "geolocation", value: true, version: 99))
                )
            ) { $0 }
            XCTAssertEqual(notTheOwner.status, .forbidden)
            do {
                let v = try await h.count("SELECT count(*)::int FROM offline.user_consents WHERE user_id = '\(user)' AND geolocation")
                XCTAssertEqual(v, 0, "still withdrawn")
            }
            let deleted = try await h.client.execute(uri: "/internal/users/\(user)?app_id=\(h.app)", method: .delete, headers: headers) { $0 }
            XCTAssertEqual(deleted.status, .ok)
            let left = try await h.count(
                """
                SELECT ((SELECT count(*) FROM offline.offline_items WHERE user_id = '\(user)') + (SELECT count(*) FROM offline.sync_queue WHERE user_id = '\(user)')
                 + (SELECT count(*) FROM offline.sync_profiles WHERE user_id = '\(user)') + (SELECT count(*) FROM offline.offline_categories WHERE user_id = '\(user)'))::int
                """
            )
            XCTAssertEqual(left, 0)
        }
    }
}

/// Text Postgres cannot store (a NUL character, valid in JSON) is refused as bad input, never
/// a 500, and leaves nothing behind.
final class UnstorableInputTests: XCTestCase {
    func testNulCharacterInAPayloadIsA400() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            let r = try await h.call(
                .post,
                "/sync/queue",
                user: user,
                json: #"{"client_action_id":"nul-1","action_type":"answer_submit","entity_type":"q","entity_id":"1","payload":{"a":"x\u0000y"}}"#
            )
            XCTAssertEqual(r.status, .badRequest, String(buffer: r.body))
            XCTAssertEqual(try r.envelope().error, "invalid_request")
            let n = try await h.count("SELECT count(*)::int FROM offline.sync_queue WHERE user_id = '\(user)'")
            XCTAssertEqual(n, 0)
            let name = try await h.call(.put, "/admin/categories/nul", json: #"{"name":"a\u0000b"}"#)
            XCTAssertEqual(name.status, .badRequest)
        }
    }
}

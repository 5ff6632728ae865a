import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineDomain
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import OfflineService

/// Bad input on every offline route that the flow tests do not already feed it: a 4xx with
/// the envelope (naming the field where there is one), never a 500, nothing written.
final class OfflineBadInputTests: XCTestCase {
    /// A sync execution is read by its user in its tenant only: another user, or the same user
    /// id under another app, gets 404 (`SyncStore.execution` filters both).
    func testASyncExecutionIsReadOnlyByItsUserInItsTenant() async throws {
        try await OfflineHarness.run { h in
            let owner = UUID()
            let started = try await h.call(.post, "/sync/execute", user: owner)
            XCTAssertEqual(started.status, .accepted)
            let job = try XCTUnwrap(try h.obj(started).string("job_id"))
            let mine = try await h.call(.get, "/sync/execute/\(job)", user: owner)
            XCTAssertEqual(mine.status, .ok)
            let otherUser = try await h.call(.get, "/sync/execute/\(job)", user: UUID())
            XCTAssertEqual(otherUser.status, .notFound)
            XCTAssertNoThrow(try otherUser.envelope())
            let otherApp = UUID()
            var headers = h.admin
            headers[.xAppID] = otherApp.uuidString
            headers[.authorization] = "Bearer \(try h.token(owner, app: otherApp))"
            let otherTenant = try await h.call(.get, "/sync/execute/\(job)", headers: headers)
            XCTAssertEqual(otherTenant.status, .notFound)
        }
    }

    func testEveryRouteRefusesBadInputWithTheEnvelope() async throws {
        try await OfflineHarness.run { h in
            try await h.category("bad", items: 2)
            let user = UUID()
            let unknown = UUID()
            let cases: [(HTTPRequest.Method, String, String?, Int, String?)] = [
                (.get, "/categories/bad/items?limit=0", nil, 400, "limit"),
                (.get, "/categories/bad/items?after=a%20b", nil, 400, "after"),
                (.get, "/categories/bad/items", nil, 404, nil),  // not downloaded
                (.get, "/categories/bad/check-updates?cursor=-1", nil, 400, "cursor"),
                (.get, "/categories/nope/check-updates?cursor=0", nil, 404, nil),
                (.post, "/categories/nope/refresh", nil, 404, nil),
                (.get, "/categories/download/not-a-uuid", nil, 400, "job_id"),
                (.get, "/categories/download/\(unknown)", nil, 404, nil),
                (.post, "/categories/download/\(unknown)/resume", nil, 404, nil),
                (.get, "/sync/execute/\(unknown)", nil, 404, nil),
                (.post, "/sync/conflicts/\(unknown)/resolve", #"{"resolution":"merge"}"#, 422, "merge_data"),
                (.post, "/sync/conflicts/\(unknown)/resolve", #"{"resolution":5}"#, 400, "resolution"),
                (.post, "/location/update", #"{"latitude":"north","longitude":2,"accuracy":5,"consent_given":true}"#, 400, "latitude"),
                (.post, "/location/update", #"{"latitude":48,"longitude":2,"consent_given":true}"#, 400, "accuracy"),
                (.get, "/location/nearby-content?radius_km=abc", nil, 422, "radius_km"),
                (
                    .post, "/sync/queue", #"{"client_action_id":"x","action_type":"a b","entity_type":"e","entity_id":"1","payload":{}}"#, 422,
                    "action_type"
                ),
            ]
            for (method, path, json, status, field) in cases {
                let r = try await h.call(method, path, user: user, json: json)
                XCTAssertEqual(r.status.code, status, "\(method) \(path): \(String(buffer: r.body))")
                let e = try r.envelope()
                if let field { XCTAssertEqual(e.extra["field"], .string(field), "\(method) \(path)") }
            }
            // Oversized body.
            let big = try await h.call(
                .post,
                "/sync/queue",
                user: user,
                json:
                    #"{"client_action_id":"big","action_type":"a","entity_type":"e","entity_id":"1","payload":{"x":"\#(String(repeating: "x", count: 2_000_000))"}}"#
            )
            XCTAssertEqual(big.status, .contentTooLarge)
            let queued = try await h.count("SELECT count(*)::int FROM offline.sync_queue WHERE user_id = '\(user)'")
            XCTAssertEqual(queued, 0)

            // Admin routes: the admin token, then their own validation.
            var userHeaders = h.admin
            userHeaders[.authorization] = "Bearer \(try h.token(user))"
            let notAdmin = try await h.call(.put, "/admin/categories/x", json: #"{"name":"x"}"#, headers: userHeaders)
            XCTAssertEqual(notAdmin.status, .unauthorized)
            let adminCases: [(HTTPRequest.Method, String, String, Int, String?)] = [
                (.put, "/admin/categories/bad%20id", #"{"name":"x"}"#, 400, "id"),
                (.put, "/admin/categories/x", #"{"name":""}"#, 422, "name"),
                (.post, "/admin/categories/nope/items", #"{"upsert":[{"id":"a","data":{}}]}"#, 404, nil),
                (.post, "/admin/categories/bad/items", #"{"upsert":[{"id":"a b","data":{}}]}"#, 422, "upsert[0].id"),
                (.post, "/admin/categories/bad/items", #"{"upsert":[{"id":"a","data":[1]}]}"#, 422, "upsert[0].data"),
                (.post, "/admin/categories/bad/items", #"{"delete":"a"}"#, 400, "delete"),
                (.put, "/admin/location-content/p1", #"{"title":"t","latitude":95,"longitude":0}"#, 422, "latitude"),
                (.put, "/admin/location-content/p1", #"{"title":"t","latitude":45}"#, 400, "longitude"),
            ]
            for (method, path, json, status, field) in adminCases {
                let r = try await h.call(method, path, json: json)
                XCTAssertEqual(r.status.code, status, "\(method) \(path): \(String(buffer: r.body))")
                if let field { XCTAssertEqual(try r.envelope().extra["field"], .string(field), "\(method) \(path)") }
            }
            let tooMany = (0...1000).map { #"{"id":"i\#($0)","data":{}}"# }.joined(separator: ",")
            let batch = try await h.call(.post, "/admin/categories/bad/items", json: #"{"upsert":[\#(tooMany)]}"#)
            XCTAssertEqual(batch.status, .unprocessableContent)
            let items = try await h.count("SELECT count(*)::int FROM offline.content_items WHERE app_id = '\(h.app)'")
            XCTAssertEqual(items, 2, "no refused batch wrote anything")
        }
    }
}

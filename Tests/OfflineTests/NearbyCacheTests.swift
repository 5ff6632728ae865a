import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineDomain
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import OfflineService

/// Nearby answers are kept in each replica's memory (#14: p99 under load) and never outlive a
/// change: a new place, the user's move, or a consent withdrawal made on another replica
/// is in the next answer within a second; a place's end of availability ends the answer.
final class NearbyCacheTests: XCTestCase {
    static func nearby(_ h: OfflineHarness, _ user: UUID) async throws -> (status: Int, titles: [String]) {
        let r = try await h.call(.get, "/location/nearby-content?radius_km=50", user: user)
        guard r.status == .ok else { return (Int(r.status.code), []) }
        return (200, try h.obj(r).array("content").compactMap { $0.string("title") })
    }

    /// Polls `h` until the answer is `expected`, at most 1 s.
    static func eventually(_ h: OfflineHarness, _ user: UUID, _ expected: (Int, [String]), _ what: String) async throws {
        let end = ContinuousClock.now + .seconds(1)
        var last = try await Self.nearby(h, user)
        while last.status != expected.0 || last.titles != expected.1 {
            guard ContinuousClock.now < end else { return XCTFail("\(what): still \(last) after 1 s, expected \(expected)") }
            try await Task.sleep(for: .milliseconds(20))
            last = try await Self.nearby(h, user)
        }
    }

    static func place(_ h: OfflineHarness, _ title: String, lat: Double, lon: Double, extra: String = "") async throws {
        let r = try await h.call(
            .put,
            "/admin/location-content/\(title)-\(h.app.uuidString.prefix(8))",
            json: #"{"title":"\#(title)","latitude":\#(lat),"longitude":\#(lon)\#(extra)}"#
        )
        XCTAssertEqual(r.status, .ok, String(buffer: r.body))
    }

    func testChangesOnAnotherReplicaReachTheNextAnswerWithinASecond() async throws {
        // Kept longer than the 16 minutes the test clock moves (the next position is allowed
        // after 15): only the change events can end an answer here.
        try await OfflineHarness.run(settings: ["NEARBY_CACHE_SECONDS": "7200"]) { h in
            let user = UUID()
            h.upstream.geolocationConsent.withLock { _ = $0.insert(user) }
            // Somewhere no other test puts places: the middle of the South Atlantic.
            try await Self.place(h, "one", lat: -30.01, lon: -20.0)
            try await Self.place(h, "two", lat: -30.1, lon: -20.0)
            do {
                let r = try await SyncAndLocationTests.locate(h, user, lat: -30.0, lon: -20.0)
                XCTAssertEqual(r.status, .created)
            }
            let first = try await Self.nearby(h, user)
            XCTAssertEqual(first.titles, ["one", "two"])
            // The notifications of the writes above may arrive after the first read and drop
            // what it kept (as they should); once they are heard, a read is answered from memory.
            var fromMemory = false
            let end = ContinuousClock.now + .seconds(1)
            while !fromMemory, ContinuousClock.now < end {
                let before = h.runtime.cacheHits("nearby_content")
                let again = try await Self.nearby(h, user)
                XCTAssertEqual(again.titles, ["one", "two"])
                fromMemory = h.runtime.cacheHits("nearby_content") == before + 1
            }
            XCTAssertTrue(fromMemory, "a repeated read is answered from memory")

            try await h.withSecondReplica { h2 in
                // The operator adds a place through the other replica.
                try await Self.place(h2, "zero", lat: -30.001, lon: -20.0)
                try await Self.eventually(h, user, (200, ["zero", "one", "two"]), "a place added on another replica")
                // The user moves (the position written by the other replica).
                h.clock.advance(by: 16 * 60)
                do {
                    let r = try await SyncAndLocationTests.locate(h2, user, lat: -30.1, lon: -20.0)
                    XCTAssertEqual(r.status, .created)
                }
                try await Self.eventually(h, user, (200, ["two", "one", "zero"]), "the user's move on another replica")
                // A place withdrawn by the operator.
                try await Self.place(h2, "one", lat: -30.01, lon: -20.0, extra: #","active":false"#)
                try await Self.eventually(h, user, (200, ["two", "zero"]), "a withdrawn place")
                // Auth tells the other replica the user withdrew geolocation consent: positions go.
                let body = try JSON.encoder.encode(ConsentFact(appID: h.app, userID: user, consent: "geolocation", value: false, version: 1))
                let withdrawn = try await h2.client.execute(
                    uri: "/internal/users/\(user)/consents/geolocation?app_id=\(h.app)",
                    method: .put,
                    headers: [.authorization: "Bearer local-internal-auth", .xServiceName: "auth", .contentType: "application/json"],
                    body: ByteBuffer(data: body)
                ) { $0 }
                XCTAssertEqual(withdrawn.status, .ok, String(buffer: withdrawn.body))
                try await Self.eventually(h, user, (409, []), "a consent withdrawal on another replica")
            }
        }
    }

    func testAnAnswerEndsWhenAListedPlaceStopsBeingAvailable() async throws {
        // Kept far longer than the 10 minutes the clock moves: only the place's end can end it.
        try await OfflineHarness.run(settings: ["NEARBY_CACHE_SECONDS": "7200"]) { h in
            let user = UUID()
            h.upstream.geolocationConsent.withLock { _ = $0.insert(user) }
            let until = ISO8601DateFormatter().string(from: h.clock.now().addingTimeInterval(600))
            try await Self.place(h, "ephemeral", lat: -32.0, lon: -22.0, extra: #","available_until":"\#(until)""#)
            try await Self.place(h, "lasting", lat: -32.05, lon: -22.0)
            do {
                let r = try await SyncAndLocationTests.locate(h, user, lat: -32.0, lon: -22.0)
                XCTAssertEqual(r.status, .created)
            }
            do {
                let r = try await Self.nearby(h, user)
                XCTAssertEqual(r.titles, ["ephemeral", "lasting"])
            }
            do {
                let r = try await Self.nearby(h, user)
                XCTAssertEqual(r.titles, ["ephemeral", "lasting"])
            }
            h.clock.advance(by: 601)
            do {
                let r = try await Self.nearby(h, user)
                XCTAssertEqual(r.titles, ["lasting"], "no change event, yet the answer ended with the place")
            }
        }
    }
}

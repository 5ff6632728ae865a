import AuthDomain
import Foundation
import WireTypes
import XCTest

@testable import AuthMessaging
@testable import AuthService

/// The live streams' decisions (#46), without a database: cursors, resume points, which event
/// ends which stream, the webhook events' live form, the frames.
final class LiveRulesTests: XCTestCase {
    func testCursorsRoundTripAndAnythingElseIsRefused() {
        let id = UUID(uuidString: "0A1B2C3D-0000-4000-8000-000000000001")!
        let cursor = LiveCursor(seq: 42, id: id)
        XCTAssertEqual(cursor.description, "42-0a1b2c3d")
        XCTAssertEqual(LiveCursor("42-0a1b2c3d"), cursor)
        XCTAssertEqual(LiveCursor("0-00000000"), .start)
        for bad in [
            "", "42", "42-", "-0a1b2c3d", "42-0A1B2C3D", "42-0a1b2c3", "42-0a1b2c3dd", "x-0a1b2c3d", "-1-0a1b2c3d", "42-0a1b2c3g",
            "99999999999999999999-0a1b2c3d", "42-0a1b-2c3d", "٤٢-0a1b2c3d", String(repeating: "9", count: 200) + "-0a1b2c3d",
        ] {
            XCTAssertNil(LiveCursor(bad), bad)
        }
    }

    func testResumeTakesTheHeaderFirstAndRefusesWhatIsNotACursor() {
        XCTAssertEqual(LiveRules.resume(lastEventID: nil, after: nil), .fresh)
        XCTAssertEqual(LiveRules.resume(lastEventID: "", after: nil), .fresh)
        XCTAssertEqual(LiveRules.resume(lastEventID: "3-0a1b2c3d", after: "9-0a1b2c3d"), .after(LiveCursor("3-0a1b2c3d")!))
        XCTAssertEqual(LiveRules.resume(lastEventID: nil, after: "9-0a1b2c3d"), .after(LiveCursor("9-0a1b2c3d")!))
        guard case .malformed(let m) = LiveRules.resume(lastEventID: String(repeating: "1", count: 10_000), after: nil) else {
            return XCTFail("a huge Last-Event-ID is refused")
        }
        XCTAssertTrue(m.contains("Last-Event-ID"))
        guard case .malformed(let n) = LiveRules.resume(lastEventID: nil, after: "latest") else { return XCTFail("not a cursor") }
        XCTAssertTrue(n.contains("after"))
    }

    func testWhichEndOfSessionEndsWhichStream() {
        let sid = UUID()
        let stream = LiveRules.Session(appID: UUID(), userID: UUID(), sessionID: sid, sessionEpoch: 2)
        let cases: [(LiveEventType, [String: JSONValue], Bool, String)] = [
            (.sessionRevoked, ["session_id": .string(sid.uuidString)], true, "this session logged out"),
            (.sessionRevoked, ["session_id": .string(UUID().uuidString)], false, "another device logged out"),
            (.sessionRevoked, ["session_epoch": .int(3)], true, "logout everywhere raised the epoch"),
            (.sessionRevoked, ["session_epoch": .int(2)], false, "a token of the current epoch stays"),
            (.sessionRevoked, [:], true, "an end naming nothing ends it"),
            (.accountDeleted, [:], true, "erasure"),
            (.creditsUpdated, [:], false, "not an end"),
        ]
        for (type, data, ends, why) in cases {
            XCTAssertEqual(LiveRules.ends(stream, type: type, data: data), ends, why)
        }
        XCTAssertEqual(LiveEventType.sessionRevoked.closeCode, 4001)
        XCTAssertEqual(LiveEventType.accountDeleted.closeCode, 4003)
        XCTAssertEqual(LiveEventType.closing.closeCode, 1012)
        XCTAssertNil(LiveEventType.creditsUpdated.closeCode)
    }

    func testWebhookEventsBecomeTheUsersLiveEvents() {
        let credit = LiveRules.fromWebhook(
            type: "credits.earned",
            data: ["user_id": .string("u"), "amount": .int(5), "balance": .int(12), "source": .string("ad_reward"), "transaction_id": .int(9)]
        )
        XCTAssertEqual(credit?.0, .creditsUpdated)
        XCTAssertEqual(credit?.1["delta"], .int(5))
        XCTAssertEqual(credit?.1["balance"], .int(12))
        XCTAssertNil(credit?.1["user_id"], "the stream is the user's own: no id repeated")
        XCTAssertEqual(LiveRules.fromWebhook(type: "credits.spent", data: ["amount": .int(-3)])?.1["delta"], .int(-3))
        XCTAssertEqual(LiveRules.fromWebhook(type: "sync.conflict_opened", data: ["conflict_id": .string("c")])?.0, .syncConflictOpened)
        XCTAssertEqual(LiveRules.fromWebhook(type: "campaign.completed", data: ["campaign_id": .string("c")])?.0, .campaignCompleted)
        XCTAssertEqual(LiveRules.fromWebhook(type: "download.completed", data: ["job_id": .string("j")])?.0, .downloadCompleted)
        // Subscriptions come from auth's own premium fact; the rest are not the app's to hear.
        for type in ["subscription.activated", "subscription.refunded", "user.created", "user.deleted", "consent.changed"] {
            XCTAssertNil(LiveRules.fromWebhook(type: type, data: [:]), type)
        }
    }

    func testTheOldestStreamsBeyondTheLimitAreReplaced() {
        XCTAssertEqual(LiveRules.replaced(openedInOrder: [3, 1, 2], max: 3), [])
        XCTAssertEqual(LiveRules.replaced(openedInOrder: [7, 3, 11, 5], max: 3), [3])
        XCTAssertEqual(LiveRules.replaced(openedInOrder: [7, 3, 11, 5], max: 1), [3, 5, 7])
    }

    func testEachEventIsSentOnceInOrderAndAGapIsReadFromTheTable() {
        let table: [(last: Int64, seq: Int64, body: Bool, step: LiveRules.EventStep, why: String)] = [
            (5, 4, true, .skip, "an event the stream sent"),
            (5, 5, true, .skip, "the same event heard twice (two notifications, a catch-up that read it)"),
            (5, 6, true, .send, "the next one, as the notification carried it"),
            (5, 6, false, .catchUp, "the next one without its body (too large for a notification)"),
            (5, 8, true, .catchUp, "a gap: 6 and 7 were missed"),
            (0, 1, true, .send, "a fresh stream's first event after an empty snapshot"),
            (0, 2, true, .catchUp, "a gap right after the snapshot"),
        ]
        for row in table {
            XCTAssertEqual(LiveRules.step(last: row.last, seq: row.seq, carriesBody: row.body), row.step, row.why)
        }
    }

    func testFrames() {
        XCTAssertEqual(
            LiveRules.sse(cursor: "1-0a1b2c3d", type: "credits.updated", json: "{\"a\":1}"),
            "id: 1-0a1b2c3d\nevent: credits.updated\ndata: {\"a\":1}\n\n"
        )
        XCTAssertEqual(LiveRules.sse(cursor: nil, type: "stream.reset", json: "{}"), "event: stream.reset\ndata: {}\n\n")
        XCTAssertEqual(LiveRules.socketText(cursor: "1-0a1b2c3d", json: "{\"a\":1}"), "{\"a\":1,\"cursor\":\"1-0a1b2c3d\"}")
        XCTAssertEqual(LiveRules.socketText(cursor: "1-0a1b2c3d", json: "{}"), "{\"cursor\":\"1-0a1b2c3d\"}")
        XCTAssertEqual(LiveRules.socketText(cursor: nil, json: "{\"a\":1}"), "{\"a\":1}")
    }
}

import AuthDomain
import Foundation
import PostgresNIO
import ServiceKit
import Synchronization
import TestSupport
import WireTypes
import XCTest

@testable import AuthMessaging
@testable import AuthService

/// The live events' rows (#46) against PostgreSQL, in-process: numbering in commit order under
/// concurrent writers, an outbox row delivered twice, events for a user who is not the app's,
/// cursors after a restore and after retention, tickets.
final class LiveEventTests: XCTestCase {
    static func user(_ h: AuthHarness) async throws -> UUID {
        try await h.registerEmail(uniqueEmail("live")).user.id
    }

    static func record(_ h: AuthHarness, app: UUID, user: UUID, id: UUID = UUID(), pause: Double = 0) async throws -> LiveCursor? {
        try await h.runtime.db.withTransaction(logger: h.runtime.logger) { conn in
            let cursor = try await LiveStore.record(
                app: app,
                user: user,
                type: .creditsUpdated,
                id: id,
                version: 1,
                data: ["balance": .int(1)],
                on: conn,
                logger: h.runtime.logger
            )
            // Held open a moment after numbering: commits land in another order than they began.
            if pause > 0 { try await Task.sleep(for: .milliseconds(Int(pause * 1000))) }
            return cursor
        }
    }

    func testConcurrentWritersNumberOneUsersEventsInTheOrderTheyCommit() async throws {
        try await AuthHarness.run { h in
            let user = try await Self.user(h)
            // Every replica's view: the notifications, in the order PostgreSQL delivers them (commit order).
            let conn = try await h.runtime.db.connectDedicated()
            let heard = Mutex<[Int64]>([])
            let listening = Task {
                try await conn.listen(on: LiveStore.channel) { notifications in
                    for try await n in notifications {
                        let parts = n.payload.split(separator: " ")
                        guard parts.first.map(String.init) == user.lowercasedString, let seq = Int64(parts[1]) else { continue }
                        heard.withLock { $0.append(seq) }
                    }
                }
            }
            try await Task.sleep(for: .milliseconds(200))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<24 {
                    group.addTask { _ = try await Self.record(h, app: h.app.appID, user: user, pause: Double.random(in: 0...0.02)) }
                }
                try await group.waitForAll()
            }
            let deadline = ContinuousClock.now + .seconds(5)
            while heard.withLock({ $0.count }) < 24 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            listening.cancel()
            try? await conn.close()
            XCTAssertEqual(heard.withLock { $0 }, Array(1...24), "numbers follow commits: a listener never hears n+1 before n")
            let rows = try await LiveStore(db: h.runtime.db, logger: h.runtime.logger).events(app: h.app.appID, user: user, after: 0)
            XCTAssertEqual(rows.map(\.seq), Array(1...24))
        }
    }

    func testAnEventDeliveredTwiceIsOneAndNoOneElsesUserGetsAny() async throws {
        try await AuthHarness.run { h in
            let user = try await Self.user(h)
            let id = UUID()
            let first = try await Self.record(h, app: h.app.appID, user: user, id: id)
            let again = try await Self.record(h, app: h.app.appID, user: user, id: id)
            XCTAssertEqual(first?.seq, 1)
            XCTAssertNil(again, "the outbox's second delivery of one event")
            // Another app's id with this user, a user that does not exist, an erased one: nothing.
            let otherApp = try await Self.record(h, app: h.otherApp.appID, user: user)
            let nobody = try await Self.record(h, app: h.app.appID, user: UUID())
            XCTAssertNil(otherApp)
            XCTAssertNil(nobody)
            try await h.sql("UPDATE auth.users SET anonymized_at = now() WHERE id = '\(user)'")
            let erased = try await Self.record(h, app: h.app.appID, user: user)
            XCTAssertNil(erased)
            let count = try await h.scalar("SELECT count(*)::int FROM auth.live_events WHERE user_id = '\(user)'")
            XCTAssertEqual(count, 1)
        }
    }

    func testACursorFromBeforeARestoreOrPastRetentionIsRefusedAndTheHeadStaysValid() async throws {
        try await AuthHarness.run { h in
            let user = try await Self.user(h)
            let store = LiveStore(db: h.runtime.db, logger: h.runtime.logger)
            var cursors: [LiveCursor] = []
            for _ in 0..<3 {
                let c = try await Self.record(h, app: h.app.appID, user: user)
                cursors.append(try XCTUnwrap(c))
            }
            for c in cursors + [.start] {
                let valid = try await store.isValid(c, app: h.app.appID, user: user)
                XCTAssertTrue(valid, "\(c)")
            }
            let otherApp = try await store.isValid(cursors[0], app: h.otherApp.appID, user: user)
            XCTAssertFalse(otherApp, "another app's stream")
            // A point-in-time restore to just after the first event, then a new event numbered 2.
            try await h.sql("DELETE FROM auth.live_events WHERE user_id = '\(user)' AND seq > 1")
            try await h.sql(
                "UPDATE auth.live_counters SET last_seq = 1, last_id = (SELECT id FROM auth.live_events WHERE user_id = '\(user)' AND seq = 1) WHERE user_id = '\(user)'"
            )
            let next = try await Self.record(h, app: h.app.appID, user: user)
            let renumbered = try XCTUnwrap(next)
            XCTAssertEqual(renumbered.seq, 2)
            for (c, valid) in [(cursors[0], true), (cursors[1], false), (cursors[2], false), (renumbered, true)] {
                let answer = try await store.isValid(c, app: h.app.appID, user: user)
                XCTAssertEqual(answer, valid, "\(c)")
            }
            // Past retention: every row gone; the head (kept by the counter) still resumes, the start does not.
            try await h.sql("DELETE FROM auth.live_events WHERE user_id = '\(user)'")
            let head = try await store.isValid(renumbered, app: h.app.appID, user: user)
            let start = try await store.isValid(.start, app: h.app.appID, user: user)
            let first = try await store.isValid(cursors[0], app: h.app.appID, user: user)
            XCTAssertTrue(head)
            XCTAssertFalse(start)
            XCTAssertFalse(first)
        }
    }

    func testATicketOpensOneStreamOnceBeforeItExpires() async throws {
        try await AuthHarness.run { h in
            let user = try await Self.user(h)
            let store = LiveStore(db: h.runtime.db, logger: h.runtime.logger)
            let session = LiveRules.Session(appID: h.app.appID, userID: user, sessionID: UUID(), sessionEpoch: 1)
            let ticket = try await store.issueTicket(session, ttl: .seconds(60))
            let used = try await store.useTicket(ticket)
            XCTAssertEqual(used, session)
            let twice = try await store.useTicket(ticket)
            XCTAssertNil(twice)
            let late = try await store.issueTicket(session, ttl: .seconds(60))
            try await h.sql("UPDATE auth.live_tickets SET expires_at = now() - interval '1 second' WHERE used_at IS NULL")
            let expired = try await store.useTicket(late)
            XCTAssertNil(expired)
            let huge = try await store.useTicket(String(repeating: "x", count: 10_000))
            XCTAssertNil(huge)
            let stored = try await h.scalar("SELECT count(*)::int FROM auth.live_tickets WHERE digest = '\(ticket)'")
            XCTAssertEqual(stored, 0, "a ticket is kept by its digest only")
        }
    }
}

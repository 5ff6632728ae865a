import AuthDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// Seed 6b (deletion at J+30, cancellable) and guest expiry.
final class AccountLifecycleTests: XCTestCase {
    struct Scheduled: Decodable {
        var date: Date
        var token: String
        enum CodingKeys: String, CodingKey {
            case date = "scheduled_deletion_date"
            case token = "cancellation_token"
        }
    }

    static func worker(_ h: AuthHarness) -> JobWorker {
        let lifecycle = AccountLifecycle(logger: h.runtime.logger, clock: h.clock, sessions: h.runtime.sessions)
        let queue = JobQueue(client: h.runtime.db, queue: AccountLifecycle.queue, logger: h.runtime.logger, clock: h.clock)
        return JobWorker(queue: queue, handlers: [AccountLifecycle.executeDeletionJob: { try await lifecycle.executeDeletion($0, db: h.runtime.db) }])
    }

    func testDeletionScheduledCancelledScheduledAgainThenExecutedAtJ30() async throws {
        try await AuthHarness.run { h in
            let email = uniqueEmail()
            let r = try await h.registerEmail(email)
            let uid = r.user.id.uuidString.lowercased()
            let first = try await h.send(.delete, "auth/me", #"{"reason":"user_request"}"#, token: r.tokens.accessToken)
            XCTAssertEqual(first.status, .accepted, String(buffer: first.body))
            let scheduled = try first.json(Scheduled.self)
            XCTAssertEqual(scheduled.date.timeIntervalSince(h.clock.now()), 30 * 24 * 3600, accuracy: 2)
            XCTAssertEqual(h.mailer.last?.to, [email])
            XCTAssertEqual(h.mailer.token(to: email), scheduled.token, "the email carries the cancellation link")
            // Logged out everywhere.
            try await h.post("auth/refresh", #"{"refresh_token":"\#(r.tokens.refreshToken)"}"#) { XCTAssertEqual($0.status, .unauthorized) }
            // Asking twice is a conflict.
            let twice = try await h.send(.delete, "auth/me", token: r.tokens.accessToken)
            XCTAssertEqual(twice.status, .conflict)
            XCTAssertEqual(try twice.envelope().error, "deletion_already_scheduled")

            // Cancelled: at J+30 nothing happens.
            try await h.post("auth/deletion/cancel", #"{"token":"\#(scheduled.token)"}"#) { XCTAssertEqual($0.status, .ok) }
            try await h.post("auth/deletion/cancel", #"{"token":"\#(scheduled.token)"}"#) { XCTAssertEqual($0.status, .badRequest) }
            h.clock.advance(by: 30 * 24 * 3600 + 60)
            try await Self.worker(h).runOnce()
            let stillThere = try await h.loginEmail(email)
            XCTAssertEqual(stillThere.status, .ok, "a cancelled deletion does not run")
            let session = try stillThere.json(AuthResponse.self)

            // A ready export (with its emailed link) and a Game Center link exist before the deletion.
            let app = h.app.appID.uuidString.lowercased()
            try await h.sql(
                """
                INSERT INTO auth.game_center_connections (user_id, app_id, player_id, alias, achievements, leaderboard_score, linked_at, last_sync)
                VALUES ('\(uid)', '\(app)', 'G:\(uid.prefix(8))', 'Ada', '{first_quiz,europe_master}', 420, now(), now())
                """
            )
            try await h.sql(
                """
                INSERT INTO auth.exports (id, user_id, app_id, status, data, requested_at, completed_at, expires_at)
                VALUES ('\(uid.prefix(8))-0000-4000-8000-000000000000', '\(uid)', '\(app)', 'ready', '{"email":"\(email)"}', now(), now(), now() + interval '90 days')
                """
            )
            let exportID = "\(uid.prefix(8))-0000-4000-8000-000000000000"
            struct ExportStatus: Decodable { var download_url: String? }
            let status = try await h.send(.get, "auth/privacy/export/\(exportID)", token: session.tokens.accessToken)
            let link = try XCTUnwrap(try status.json(ExportStatus.self).download_url)
            do {
                let v = try await h.client.execute(uri: link, method: .get) { $0 }.status
                XCTAssertEqual(v, .ok, "the link works before")
            }
            let service: HTTPFields = [.authorization: "Bearer local-internal-subscription", .xServiceName: "subscription"]
            let part = try await h.client.execute(uri: "/internal/users/\(uid)/export?app_id=\(app)", method: .get, headers: service) { $0 }
            guard case .array(let players)? = try part.json(UserDataExport.self).sections["game_center"],
                case .object(let player)? = players.first
            else { return XCTFail("the export has no Game Center section") }
            XCTAssertEqual(player["alias"], .string("Ada"))
            XCTAssertEqual(player["achievements"], .array([.string("first_quiz"), .string("europe_master")]))

            // Scheduled again, then executed at J+30.
            let again = try await h.send(.delete, "auth/me", token: session.tokens.accessToken)
            XCTAssertEqual(again.status, .accepted)
            h.clock.advance(by: 29 * 24 * 3600)
            let early = try await Self.worker(h).runOnce()
            XCTAssertEqual(early, 0, "not due before J+30")
            h.clock.advance(by: 24 * 3600 + 60)
            let ran = try await Self.worker(h).runOnce()
            XCTAssertEqual(ran, 1)
            let gone = try await h.loginEmail(email)
            XCTAssertEqual(gone.status, .notFound)
            let remaining = try await h.scalar(
                "SELECT count(*)::int FROM auth.users WHERE id = '\(uid)' AND email IS NULL AND password_hash IS NULL AND anonymized_at IS NOT NULL"
            )
            XCTAssertEqual(remaining, 1, "the row stays, anonymised")
            let told = try await h.scalar(
                "SELECT count(DISTINCT target_service)::int FROM auth.outbox WHERE method = 'DELETE' AND path LIKE '/internal/users/\(uid)?app_id=%'"
            )
            XCTAssertEqual(told, 3, "subscription, offline and ads are told to forget the user")
            let ips = try await h.scalar("SELECT count(*)::int FROM auth.audit_logs WHERE user_id = '\(uid)' AND ip_address IS NOT NULL")
            XCTAssertEqual(ips, 0)
            // The old access token is refused (the account is erased) and the old link is dead.
            let me = try await h.send(.get, "auth/me", token: session.tokens.accessToken)
            XCTAssertEqual(me.status, .unauthorized)
            do {
                let v = try await h.client.execute(uri: link, method: .get) { $0 }.status
                XCTAssertEqual(v, .notFound)
            }
            for table in [
                "exports", "game_center_connections", "refresh_tokens", "oauth_connections", "email_tokens", "fact_counters", "fact_versions",
            ] {
                do {
                    let v = try await h.scalar("SELECT count(*)::int FROM auth.\(table) WHERE user_id = '\(uid)'")
                    XCTAssertEqual(v, 0, table)
                }
            }
            do {
                let v = try await h.scalar("SELECT count(*)::int FROM auth.session_state WHERE user_id = '\(uid)' AND state = 'erased'")
                XCTAssertEqual(v, 1)
            }
            let erasedEverywhere = try await h.scalar(
                """
                SELECT count(DISTINCT target_service)::int FROM auth.outbox WHERE path LIKE '/internal/users/\(uid)/sessions?app_id=%' AND body->>'state' = 'erased'
                """
            )
            XCTAssertEqual(erasedEverywhere, 3, "every service refuses the user's tokens")
        }
    }

    func testDeletionBadInput() async throws {
        try await AuthHarness.run { h in
            try await h.post("auth/deletion/cancel", #"{"token":"nope"}"#) { XCTAssertEqual($0.status, .badRequest) }
            try await h.post("auth/deletion/cancel", #"{}"#) { XCTAssertEqual($0.status, .badRequest) }
            let noToken = try await h.send(.delete, "auth/me")
            XCTAssertEqual(noToken.status, .unauthorized)
            let r = try await h.registerEmail(uniqueEmail())
            let badReason = try await h.send(.delete, "auth/me", #"{"reason":12}"#, token: r.tokens.accessToken)
            XCTAssertEqual(badReason.status, .badRequest)
            let scheduled = try await h.scalar("SELECT count(*)::int FROM auth.deletions WHERE user_id = '\(r.user.id)'")
            XCTAssertEqual(scheduled, 0, "a refused request schedules nothing")
        }
    }

    func testGuestsIdleFor30DaysAreRemovedAndOthersAreTold() async throws {
        try await AuthHarness.run { h in
            let idle = try await h.post("auth/register", #"{"provider":"guest","credentials":{"device_id":"idle-\#(UUID())"}}"#)
            let idleID = try idle.json(AuthResponse.self).user.id
            h.clock.advance(by: 20 * 24 * 3600)
            let active = try await h.post("auth/register", #"{"provider":"guest","credentials":{"device_id":"active-\#(UUID())"}}"#)
            let activeID = try active.json(AuthResponse.self).user.id
            h.clock.advance(by: 11 * 24 * 3600)
            let lifecycle = AccountLifecycle(logger: h.runtime.logger, clock: h.clock, sessions: h.runtime.sessions)
            var removed = 0
            while case let n = try await lifecycle.expireGuests(db: h.runtime.db), n > 0 { removed += n }
            XCTAssertGreaterThanOrEqual(removed, 1)
            let idleLeft = try await h.scalar("SELECT count(*)::int FROM auth.users WHERE id = '\(idleID)'")
            let activeLeft = try await h.scalar("SELECT count(*)::int FROM auth.users WHERE id = '\(activeID)'")
            XCTAssertEqual(idleLeft, 0)
            XCTAssertEqual(activeLeft, 1, "a guest active 11 days ago stays")
            let told = try await h.scalar(
                "SELECT count(*)::int FROM auth.outbox WHERE method = 'DELETE' AND path LIKE '/internal/users/\(idleID.uuidString.lowercased())%'"
            )
            XCTAssertEqual(told, 3)
        }
    }
}

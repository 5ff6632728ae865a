import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import ServiceKit
import TestSupport
import XCTest

@testable import OfflineService

/// A write for a user and that user's erasure, racing: whichever starts first, nothing of the
/// user is left once both have ended (ServiceKit's `ErasureFence`).
final class ErasureFenceTests: XCTestCase {
    static let location = #"{"latitude":45.5,"longitude":-73.56,"accuracy":30,"consent_given":true}"#

    /// The replica has not heard of the erasure (its token check passes): the write waits for
    /// the erasure under way, then meets its marker and is refused with the token's 401.
    func testAWriteThatMeetsAnErasureUnderWayIsRefusedAndLeavesNothing() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            h.upstream.geolocationConsent.withLock { _ = $0.insert(user) }
            let (locked, lockedNow) = AsyncStream.makeStream(of: Void.self)
            let (release, releaseNow) = AsyncStream.makeStream(of: Void.self)
            let (app, db, logger) = (h.app, h.runtime.db, h.runtime.logger)
            // The erasure on another replica: its deletes done and its marker written, not committed.
            let erasure = Task {
                try await db.withTransaction(logger: logger) { conn in
                    try await ErasureFence.lockForErasure(user: user, on: conn, logger: logger)
                    try await conn.query("DELETE FROM offline.user_locations WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    try await conn.query("DELETE FROM offline.user_consents WHERE app_id = \(app) AND user_id = \(user)", logger: logger)
                    try await conn.query(
                        """
                        INSERT INTO offline.session_state (app_id, user_id, version, session_epoch, state)
                        VALUES (\(app), \(user), 9, 2147483647, 'erased')
                        """,
                        logger: logger
                    )
                    lockedNow.yield()
                    for await _ in release { break }
                }
            }
            for await _ in locked { break }
            let late = Task { try await h.call(.post, "/location/update", user: user, json: Self.location) }
            try await Task.sleep(for: .milliseconds(300))
            releaseNow.yield()
            try await erasure.value
            let answer = try await late.value
            XCTAssertEqual(answer.status, .unauthorized)
            XCTAssertEqual(try answer.envelope().error, "invalid_token")
            let rows = try await h.count(
                "SELECT (SELECT count(*) FROM offline.user_locations WHERE user_id = '\(user)') + (SELECT count(*) FROM offline.user_consents WHERE user_id = '\(user)')"
            )
            XCTAssertEqual(rows, 0, "nothing recreated for the erased user")
        }
    }

    /// A write under way when the erasure arrives: the erasure waits for it and deletes it too.
    func testAnErasureWaitsForAWriteUnderWayAndDeletesIt() async throws {
        try await OfflineHarness.run { h in
            let user = UUID()
            let (written, writtenNow) = AsyncStream.makeStream(of: Void.self)
            let (release, releaseNow) = AsyncStream.makeStream(of: Void.self)
            let (app, db, logger) = (h.app, h.runtime.db, h.runtime.logger)
            let writer = Task {
                try await db.withTransaction(logger: logger) { conn in
                    try await conn.query(
                        "INSERT INTO offline.user_consents (app_id, user_id, geolocation, changed_at) VALUES (\(app), \(user), true, now())",
                        logger: logger
                    )
                    writtenNow.yield()
                    for await _ in release { break }
                }
            }
            for await _ in written { break }
            let auth: HTTPFields = [.authorization: "Bearer local-internal-auth", .xServiceName: "auth"]
            let erasure = Task {
                try await h.client.execute(uri: "/internal/users/\(user)?app_id=\(app)", method: .delete, headers: auth) { $0.status }
            }
            try await Task.sleep(for: .milliseconds(300))
            releaseNow.yield()
            try await writer.value
            let status = try await erasure.value
            XCTAssertEqual(status, .ok)
            let rows = try await h.count("SELECT count(*)::int FROM offline.user_consents WHERE user_id = '\(user)'")
            XCTAssertEqual(rows, 0, "the write that committed during the erasure was erased with the rest")
        }
    }
}

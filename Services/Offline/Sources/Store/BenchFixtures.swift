import Foundation
import Logging
import OfflineDomain
import PostgresNIO
import ServiceKit

/// The `offline-service bench` command's own SQL: the plain read a download job is measured
/// against, and the clean-up of its throwaway app.
struct BenchFixtures: Sendable {
    let db: DatabasePool
    let logger: Logger

    /// Reads every live item of the category as JSON text, the way a client would get it; the bytes read.
    func readCategory(app: UUID, category: String) async throws -> Int {
        var bytes = 0
        for try await text in try await db.query(
            """
            SELECT data::text FROM content_items WHERE app_id = \(app) AND category_id = \(category) AND deleted_at IS NULL ORDER BY id
            """,
            logger: logger
        ).decode(String.self) { bytes += text.utf8.count }
        return bytes
    }

    func deleteJob(_ job: UUID) async throws {
        try await db.query("DELETE FROM download_jobs WHERE id = \(job)", logger: logger)
    }

    func deleteCatalogue(app: UUID) async throws {
        try await db.query("DELETE FROM offline_items WHERE app_id = \(app)", logger: logger)
        try await db.query("DELETE FROM offline_categories WHERE app_id = \(app)", logger: logger)
    }
}

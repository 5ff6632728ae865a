import Foundation
import Logging
import OfflineDomain
import ServiceKit

/// UC-OFFLINE-3.1 the operator's side: a batch of items published to a category (up to 1,000
/// changes, all or nothing), which the copies' update checks then see, announced once. The flow
/// owns the transaction (#50).
struct CatalogPublishing: Sendable {
    let db: DatabasePool
    let catalog: CatalogStore
    let logger: Logger

    /// Answers how many items were upserted and deleted.
    func applyBatch(app: UUID, category id: String, upserts encoded: [(String, String)], deletes: [String]) async throws -> (Int, Int) {
        try await db.withTransaction(logger: logger) { conn -> (Int, Int) in
            guard try await catalog.categoryExists(app: app, id: id, on: conn) else { throw AppError.notFound("Category") }
            let (u, d) = try await catalog.applyBatch(app: app, category: id, upserts: encoded, deletes: deletes, on: conn)
            if u + d > 0 { try await catalog.announceUpdate(app: app, category: id, changes: u + d, on: conn) }
            return (u, d)
        }
    }
}

import Foundation
import Hummingbird
import OfflineDomain
import PostgresNIO
import ServiceKit
import WireTypes

/// How the main app publishes content (admin credential + tenant headers): categories, item
/// batches (upserts and deletions), and location-based content.
struct CatalogAdminController: Sendable {
    let db: DatabasePool
    let catalog: CatalogStore
    let publishing: CatalogPublishing
    let locations: LocationStore

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        // The console's Catalogue (#47): every category by id, paged by `after` (the last id).
        admin.get("admin/categories") { request, context in
            let app = try context.requireApp()
            let query = PageQuery(request)
            let limit = try query.limit(max: 100)
            let after = try query.cursor("after") { ContentController.validID($0) ? $0 : nil }
            struct Page: Encodable {
                var categories: [CatalogStore.ListedCategory]
                var nextAfter: String?
                enum CodingKeys: String, CodingKey {
                    case categories
                    case nextAfter = "next_after"
                }
            }
            let page = try await db.withConnection { try await catalog.categories(app: app, after: after, limit: limit, on: $0) }
            return try context.json(Page(categories: page, nextAfter: page.count == limit ? page.last?.id : nil))
        }
        admin.put("admin/categories/:id") { request, context in
            let app = try context.requireApp()
            let id = try ContentController.categoryID(context)
            struct Body: Decodable {
                var name: String
                var description: String?
            }
            let b = try await request.decodeJSON(as: Body.self, context: context)
            guard (1...200).contains(b.name.count) else { throw AppError.validation("name", "name must be 1 to 200 characters") }
            try await db.withConnection { try await catalog.upsertCategory(app: app, id: id, name: b.name, description: b.description ?? "", on: $0) }
            return try context.json(["id": id, "name": b.name])
        }
        admin.post("admin/categories/:id/items") { request, context in
            let app = try context.requireApp()
            let id = try ContentController.categoryID(context)
            struct Item: Decodable {
                var id: String
                var data: JSONValue
            }
            struct Body: Decodable {
                var upsert: [Item]?
                var delete: [String]?
            }
            let b = try await request.decodeJSON(as: Body.self, context: context)
            let upserts = b.upsert ?? []
            let deletes = b.delete ?? []
            guard upserts.count + deletes.count <= 1000 else { throw AppError.validation("upsert", "at most 1000 changes per batch") }
            for (i, item) in upserts.enumerated() {
                guard ContentController.validID(item.id) else {
                    throw AppError.validation("upsert[\(i)].id", "item ids are letters, digits, '-', '_' or '.'")
                }
                guard case .object = item.data else { throw AppError.validation("upsert[\(i)].data", "data must be a JSON object") }
            }
            guard deletes.allSatisfy(ContentController.validID) else {
                throw AppError.validation("delete", "item ids are letters, digits, '-', '_' or '.'")
            }
            let encoded = try upserts.map { ($0.id, String(decoding: try JSON.encoder.encode($0.data), as: UTF8.self)) }
            let (u, d) = try await publishing.applyBatch(app: app, category: id, upserts: encoded, deletes: deletes)
            return try context.json(["upserted": u, "deleted": d])
        }
        admin.put("admin/location-content/:id") { request, context in
            let app = try context.requireApp()
            let id = try ContentController.categoryID(context)
            struct Body: Decodable {
                var title: String
                var contentType: String?
                var latitude: Double
                var longitude: Double
                var metadata: JSONValue?
                var availableUntil: Date?
                var active: Bool?
                enum CodingKeys: String, CodingKey {
                    case title
                    case contentType = "content_type"
                    case latitude, longitude, metadata
                    case availableUntil = "available_until"
                    case active
                }
            }
            let b = try await request.decodeJSON(as: Body.self, context: context)
            guard (-90...90).contains(b.latitude) else { throw AppError.validation("latitude", "latitude must be -90 to 90") }
            guard (-180...180).contains(b.longitude) else { throw AppError.validation("longitude", "longitude must be -180 to 180") }
            let metadata = String(decoding: try JSON.encoder.encode(b.metadata ?? .object([:])), as: UTF8.self)
            let place = LocationStore.LocationContent(
                id: id,
                contentType: b.contentType ?? "quiz",
                title: b.title,
                metadata: metadata,
                latitude: b.latitude,
                longitude: b.longitude,
                active: b.active ?? true,
                availableUntil: b.availableUntil
            )
            try await db.withConnection { try await locations.upsertPlace(app: app, place, on: $0) }
            return try context.json(["id": id])
        }
    }
}

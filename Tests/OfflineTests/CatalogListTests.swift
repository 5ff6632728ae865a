import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineDomain
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import OfflineService

/// #47 the console's Catalogue: the app's categories by id with their live items, paged.
final class CatalogListTests: XCTestCase {
    struct Page: Decodable {
        struct Category: Decodable {
            var id: String
            var name: String
            var items: Int
            var sizeBytes: Int64
            enum CodingKeys: String, CodingKey {
                case id, name, items
                case sizeBytes = "size_bytes"
            }
        }
        var categories: [Category]
        var nextAfter: String?
        enum CodingKeys: String, CodingKey {
            case categories
            case nextAfter = "next_after"
        }
    }

    func testCategoriesArePagedByIdWithTheirLiveItemsAndKeptToTheirApp() async throws {
        try await OfflineHarness.run { h in
            for id in ["europe", "africa", "asia"] {
                let r = try await h.call(.put, "/admin/categories/\(id)", json: #"{"name":"\#(id.capitalized)"}"#)
                XCTAssertEqual(r.status, .ok, String(buffer: r.body))
            }
            let items = try await h.call(
                .post,
                "/admin/categories/europe/items",
                json: #"{"upsert":[{"id":"paris","data":{"a":"Paris"}},{"id":"rome","data":{"a":"Rome"}},{"id":"oslo","data":{"a":"Oslo"}}]}"#
            )
            XCTAssertEqual(items.status, .ok, String(buffer: items.body))
            // A deleted item no longer counts.
            let deleted = try await h.call(.post, "/admin/categories/europe/items", json: #"{"delete":["oslo"]}"#)
            XCTAssertEqual(deleted.status, .ok)

            let first = try await h.call(.get, "/admin/categories?limit=2").json(Page.self)
            XCTAssertEqual(first.categories.map(\.id), ["africa", "asia"], "by id")
            XCTAssertEqual(first.nextAfter, "asia")
            let second = try await h.call(.get, "/admin/categories?limit=2&after=asia").json(Page.self)
            XCTAssertEqual(second.categories.map(\.id), ["europe"])
            XCTAssertNil(second.nextAfter, "the last page says so")
            XCTAssertEqual(second.categories.first?.items, 2, "the deleted item is not counted")
            XCTAssertGreaterThan(second.categories.first?.sizeBytes ?? 0, 0)
            XCTAssertEqual(first.categories.first?.items, 0)

            // Another tenant sees none of them; a user's token is refused; bad paging is a 422.
            var other = h.admin
            other[.xAppID] = UUID().uuidString
            let theirs = try await h.call(.get, "/admin/categories", headers: other).json(Page.self)
            XCTAssertTrue(theirs.categories.isEmpty)
            var userHeaders = h.admin
            userHeaders[.authorization] = "Bearer \(try h.token(UUID()))"
            let notAdmin = try await h.call(.get, "/admin/categories", headers: userHeaders)
            XCTAssertEqual(notAdmin.status, .unauthorized)
            for bad in ["limit=0", "limit=101", "limit=many", "after=a%20b", "after=\(String(repeating: "x", count: 101))"] {
                let r = try await h.call(.get, "/admin/categories?\(bad)")
                XCTAssertEqual(r.status, .unprocessableContent, bad)
                XCTAssertNotNil(try? r.envelope(), bad)
            }
        }
    }
}

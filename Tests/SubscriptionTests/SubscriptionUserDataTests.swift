import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import SubscriptionDomain
import TestSupport
import WireTypes
import XCTest

@testable import SubscriptionService

/// The user's rights at this service: export what is held, forget the person on deletion.
final class SubscriptionUserDataTests: XCTestCase {
    func testExportThenDeleteDetachesPurchasesAndForgetsTheRest() async throws {
        try await PurchaseTests.run { h in
            let user = UUID()
            let original = "6\(Int.random(in: 1_000_000...9_999_999))"
            _ = try await h.post("subscriptions/purchase", user, jws: try h.store.transaction(id: original, original: original))
            let credential: HTTPFields = [.authorization: "Bearer local-internal-auth", .xServiceName: "auth"]
            let export = try await h.client.execute(uri: "/internal/users/\(user)/export?app_id=\(h.app)", method: .get, headers: credential) { $0 }
            let doc = try export.json(UserDataExport.self)
            XCTAssertEqual(Set(doc.sections.keys), ["subscriptions", "access_logs", "credits", "content_unlocks"])
            XCTAssertTrue(String(buffer: export.body).contains("com.quiz.premium.annual"))
            var headers = credential
            headers[.idempotencyKey] = UUID().uuidString
            let deleted = try await h.client.execute(uri: "/internal/users/\(user)?app_id=\(h.app)", method: .delete, headers: headers) { $0 }
            XCTAssertEqual(deleted.status, .ok)
            let left = try await h.scalar("SELECT count(*)::int FROM subscription.subscriptions WHERE user_id = '\(user)'")
            let kept = try await h.scalar("SELECT count(*)::int FROM subscription.subscriptions WHERE store_original_transaction_id = '\(original)'")
            XCTAssertEqual(left, 0, "nothing points at the person any more")
            XCTAssertEqual(kept, 1, "the purchase record stays for accounting")
            let after = try await h.client.execute(uri: "/internal/users/\(user)/export?app_id=\(h.app)", method: .get, headers: credential) { $0 }
            XCTAssertFalse(String(buffer: after.body).contains("com.quiz.premium.annual"))
        }
    }
}

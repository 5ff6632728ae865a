import Foundation
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import ServiceKit
import Synchronization
import TestSupport
import WireTypes
import XCTest

/// The per-user export and delete routes every service serves.
final class UserDataTests: XCTestCase {
    struct AllowAll: AppVerifier { func verify(appID: UUID, apiKey: String) async throws -> Bool { true } }

    func testExportAndIdempotentDelete() async throws {
        let runtime = kitRuntime(.ads)
        final class Box: Sendable { let n = Mutex(0) }
        let box = Box()
        let section = UserDataSection(
            name: "scores",
            export: { user, _, _ in .object(["user": .string(user.uuidString)]) },
            delete: { _, _, _ in
                box.n.withLock { $0 += 1 }
                return 3
            }
        )
        let app = buildServiceApplication(
            runtime: runtime,
            appVerifier: AllowAll(),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: []))),
            userData: [section]
        ) { _ in }
        try await app.test(.router) { client in
            let user = UUID()
            let tenant = UUID()
            let credential: HTTPFields = [.authorization: "Bearer local-internal-auth", .xServiceName: "auth"]
            let export = try await client.execute(uri: "/internal/users/\(user)/export?app_id=\(tenant)", method: .get, headers: credential) { $0 }
            XCTAssertEqual(export.status, .ok)
            let doc = try export.json(UserDataExport.self)
            XCTAssertEqual(doc.service, "ads")
            XCTAssertEqual(doc.sections["scores"], .object(["user": .string(user.uuidString)]))
            var headers = credential
            headers[.idempotencyKey] = UUID().uuidString
            for _ in 0..<3 {
                let deleted = try await client.execute(uri: "/internal/users/\(user)?app_id=\(tenant)", method: .delete, headers: headers) { $0 }
                XCTAssertEqual(deleted.status, .ok)
                XCTAssertEqual(try deleted.json(UserDataDeletion.self).deleted["scores"], .int(3))
            }
            XCTAssertEqual(box.n.withLock { $0 }, 1, "redeliveries of the same key change nothing")
            let noApp = try await client.execute(uri: "/internal/users/\(user)/export", method: .get, headers: credential) { $0 }
            XCTAssertEqual(noApp.status, .badRequest)
            let noCredential = try await client.execute(uri: "/internal/users/\(user)/export?app_id=\(tenant)", method: .get) { $0 }
            XCTAssertEqual(noCredential.status, .unauthorized)
        }
    }
}

import AdsDomain
import AdsService
import Foundation
import Hummingbird
import HummingbirdTesting
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// The ads service's composition root: it migrates its schema and serves the operational
/// routes under its prefix and at the root.
final class AdsApplicationTests: XCTestCase {
    struct AllowAll: AppVerifier { func verify(appID: UUID, apiKey: String) async throws -> Bool { apiKey == "good" } }

    func testStartsMigratesAndServesOperationalRoutes() async throws {
        let runtime = TestEnvironment.runtime(.ads, migrations: try AdsService.migrations())
        let app = try AdsService.buildApplication(
            runtime: runtime,
            appVerifier: AllowAll(),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [])))
        )
        try await app.test(.router) { client in
            for path in ["/ads/v1/health", "/health", "/ready"] {
                try await client.execute(uri: path, method: .get) { r in
                    XCTAssertEqual(r.status, .ok, path)
                    XCTAssertEqual(try r.json(HealthStatus.self).service, "ads")
                }
            }
            let problems = try await documentedOperationProblems(client, prefix: "ads")
            XCTAssertEqual(problems, [])
            try await client.execute(uri: "/metrics", method: .get) { r in
                XCTAssertEqual(r.status, .ok)
                XCTAssertTrue(String(buffer: r.body).contains("http_requests_total"))
            }
            try await client.execute(uri: "/ads/v1/unknown", method: .get, headers: .tenant(UUID(), "good")) { r in
                XCTAssertEqual(r.status, .notFound)
                XCTAssertEqual(try r.envelope().error, "not_found")
            }
        }
        let applied = try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)) { db -> Int in
            let rows = try await db.query("SELECT count(*)::int FROM ads.schema_migrations")
            for try await n in rows.decode(Int.self) { return n }
            return 0
        }
        XCTAssertEqual(applied, runtime.migrations.migrations.count)
    }
}

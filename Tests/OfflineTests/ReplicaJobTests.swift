import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineDomain
import ServiceKit
import TestSupport
import WireTypes
import XCTest

@testable import OfflineService

/// Two replicas' workers on one database, both handed the same download job: each item is
/// written once.
final class ReplicaJobTests: XCTestCase {
    func testTwoWorkersOnTheSameDownloadJobWriteEachItemOnce() async throws {
        try await OfflineHarness.run { h in
            try await h.category("twice", items: 300)
            let user = UUID()
            let job = try await h.startDownload(user, ["twice"], premium: true)
            // The second replica: its own runtime (pool), the same database.
            let runtime2 = TestEnvironment.runtime(
                .offline,
                migrations: try OfflineService.migrations(),
                overrides: ["RUN_WORKERS": "false"],
                clock: h.clock
            )
            try await withMigratedRuntime(runtime2) { r2 in
                var deps2 = DownloadJob.Deps(
                    db: r2.db,
                    downloads: DownloadStore(logger: r2.logger),
                    copies: CopyStore(logger: r2.logger),
                    profiles: ProfileStore(logger: r2.logger),
                    clock: h.clock,
                    logger: r2.logger
                )
                deps2.batchSize = 25
                var deps1 = h.downloadDeps
                deps1.batchSize = 25
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { [deps1] in try await DownloadJob.run(job, deps1) }
                    group.addTask { [deps2] in try await DownloadJob.run(job, deps2) }
                    try await group.waitForAll()
                }
            }
            let status = try h.obj(try await h.call(.get, "/categories/download/\(job)", user: user))
            XCTAssertEqual(status.string("status"), "completed")
            XCTAssertEqual(status.int("downloaded_count"), 300)
            let stored = try await h.count("SELECT count(*)::int FROM offline.offline_items WHERE user_id = '\(user)'")
            XCTAssertEqual(stored, 300)
            let attempts = try await h.count("SELECT max(attempts)::int FROM offline.download_job_items WHERE job_id = '\(job)'")
            XCTAssertEqual(attempts, 1, "no item was processed by both workers")
        }
    }
}

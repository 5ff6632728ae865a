import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import ServiceLifecycle

/// Keeps the aggregates current (the seed: hourly) and the detail within its retention, as a
/// ServiceGroup service.
struct StatsRefresher: Service {
    let stats: StatsStore
    let db: DatabasePool
    let clock: any WallClock
    let interval: Duration

    /// The recomputation in one transaction (its advisory lock ends with it); answers the days.
    @discardableResult
    func refresh() async throws -> Int {
        try await db.withTransaction(logger: stats.logger) { conn in try await stats.refresh(on: conn) }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await refresh()
                    try await stats.purgeDetail(before: clock.now().addingTimeInterval(-StatsStore.detailRetention), db: db)
                } catch {
                    stats.logger.warning("daily ad stats refresh failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}

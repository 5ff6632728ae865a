import Foundation
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import SubscriptionDomain

/// Expires subscriptions whose period has ended even when nobody asks (/me also does it on read).
struct ExpirySweeper: Service {
    let store: SubscriptionStore
    let db: DatabasePool
    let clock: any WallClock
    let interval: Duration
    static let batch = 200

    /// One batch in its own short transaction: a batch's locks end with it.
    func sweep() async throws -> Int {
        try await db.withTransaction(logger: store.logger) { conn in try await store.expireDue(now: clock.now(), batch: Self.batch, on: conn) }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do { while try await sweep() > 0 {} } catch {
                    store.logger.warning("expiry sweep failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}

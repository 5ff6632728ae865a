import Foundation
import PostgresNIO
import ServiceKit
import ServiceLifecycle

/// Expires subscriptions whose period has ended even when nobody asks (/me also does it on read).
struct ExpirySweeper: Service {
    let store: SubscriptionStore
    let db: DatabasePool
    let clock: any WallClock
    let interval: Duration
    static let batch = 200

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do { while try await store.expireDue(now: clock.now(), batch: Self.batch, db: db) > 0 {} } catch {
                    store.logger.warning("expiry sweep failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}

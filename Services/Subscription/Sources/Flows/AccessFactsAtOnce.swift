import Foundation
import ServiceKit
import SubscriptionDomain

/// Sends a just-committed change of access to auth, ads and offline before the change is
/// answered (#45): an app reads ad availability as its paywall closes, and an account a restore
/// took a purchase from must be free everywhere when the restore answers. Each row is tried once,
/// all at once, with a short timeout; a row that did not land stays with the outbox workers
/// (nothing is lost, only the answer is no longer a guarantee).
struct AccessFactsAtOnce: Sendable {
    let worker: OutboxWorker
    /// Below `SubscriptionStore.writerHold`: the workers never race the writer's own attempt.
    static let timeout: Duration = .seconds(2)

    /// True when every row was delivered.
    @discardableResult
    func deliver(_ rows: [Int64]) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            for id in rows { group.addTask { await worker.deliverNow(id: id, timeout: Self.timeout) != nil } }
            return await group.reduce(true) { $0 && $1 }
        }
    }
}

import AdsDomain
import Foundation
import ServiceKit

/// Tries a reward's outbox row at once (seed 21c: the answer carries `new_balance` when
/// subscription answered in time; otherwise the reward is pending and the worker delivers it).
struct RewardDelivery: Sendable {
    let worker: OutboxWorker
    let rewards: RewardStore
    let db: DatabasePool
    let timeout: Duration

    struct EarnAnswer: Decodable { var balance: Int }

    func attempt(outboxID: Int64) async -> Int? {
        let balance = await balance(outboxID: outboxID, from: await worker.deliverNow(id: outboxID, timeout: timeout))
        if balance == nil { await rewards.notifyOnLanding(outboxID: outboxID, db: db) }
        return balance
    }

    /// For a replay: the credit's truth at subscription now (it answers a redelivery with the
    /// balance after that credit), when this side does not know it yet. Nil: still pending.
    func confirm(outboxID: Int64) async -> Int? {
        await balance(outboxID: outboxID, from: await worker.confirm(id: outboxID, timeout: timeout))
    }

    private func balance(outboxID: Int64, from response: HTTPResponseData?) async -> Int? {
        guard let answer = try? response?.decode(EarnAnswer.self) else { return nil }
        await rewards.recordBalance(outboxID: outboxID, balance: answer.balance, db: db)
        return answer.balance
    }
}

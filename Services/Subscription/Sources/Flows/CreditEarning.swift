import Foundation
import Logging
import ServiceKit
import SubscriptionDomain
import WireTypes

/// UC-SUB-2.4, the internal earn: a reward from ads lands on the ledger once per reference,
/// with the push that tells the player when ads asked for one. The flow owns the transaction
/// (#50): the route decodes and validates, this writes.
struct CreditEarning: Sendable {
    let db: DatabasePool
    let ledger: CreditLedger
    let logger: Logger

    func earn(_ body: CreditEarnRequest, now: Date) async throws -> (transaction: CreditTransaction, created: Bool) {
        try await db.withTransaction(logger: logger) { conn in
            // An erased user gets nothing recreated (a reward still in another outbox): the
            // erasure fence refuses the ledger's row, answered 410 `user_erased`, which the
            // sender's outbox records as final.
            let (tx, created) = try await ledger.earn(
                app: body.appID,
                user: body.userID,
                amount: body.amount,
                source: body.source,
                reference: body.referenceID,
                now: now,
                on: conn
            )
            // A reward the player was told is pending: the push goes with the credit, once per
            // ledger row (auth's key). Asked again on a redelivery too: the first delivery may
            // have landed late, without the flag (it timed out at the sender), and auth keeps one
            // notification per key however often it is asked.
            if body.notify == true {
                try await Outbox.write(
                    OutboxMessage(
                        InternalRoutes.notifyUser,
                        path: InternalRoutes.notifyUser.path(user: body.userID, app: body.appID),
                        body: NotificationRequest(
                            appID: body.appID,
                            key: "credit:\(tx.id)",
                            kind: "credit_added",
                            data: ["amount": String(body.amount), "balance": String(tx.balanceAfter)]
                        )
                    ),
                    on: conn,
                    logger: logger
                )
            }
            return (tx, created)
        }
    }
}

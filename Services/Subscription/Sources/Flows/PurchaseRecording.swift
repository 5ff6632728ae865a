import Foundation
import Logging
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// UC-SUB-2.3 a purchase (or a restore) as the store reported it, written in one transaction the
/// flow owns (#50): the route verifies with the store and answers, this decides and writes.
struct PurchaseRecording: Sendable {
    let db: DatabasePool
    let subscriptions: SubscriptionStore
    let plans: PlanStore
    let logger: Logger

    /// Writes the subscription, its event, the receipt and the message to auth in one
    /// transaction. The same purchase twice returns the existing subscription (seed 16a); a
    /// purchase owned by another user of the app moves only on restore, as an event; a refunded
    /// transaction never buys anything again (PurchaseRules).
    /// Also returns the outbox rows of the access facts, for the caller to send at once.
    func record(
        _ p: StorePurchase,
        app: UUID,
        user: UUID,
        restore: Bool,
        acknowledge: GoogleAcknowledgeJob?,
        now: Date
    )
        async throws -> (Subscription, JSONValue?, Bool, [Int64])
    {
        try await db.withTransaction(logger: logger) { conn in
            try await subscriptions.lockPurchase(app: app, store: p.store, original: p.originalTransactionID, on: conn)
            let planList = try await plans.active(app: app, on: conn)
            guard let plan = planList.first(where: { (p.store == "apple" ? $0.appleProductID : $0.googleProductID) == p.productID }) else {
                throw AppError(SubscriptionErrorCode.unknownProduct, "No plan sells product \(p.productID)")
            }
            let known = try await subscriptions.knownTransaction(app: app, store: p.store, id: p.transactionID, on: conn)
            guard let existing = try await subscriptions.byOriginalTransaction(app: app, store: p.store, original: p.originalTransactionID, on: conn)
            else {
                guard known != .revoked else { throw Self.revokedError }
                guard p.endDate > now, p.status.grantsAccess else {
                    throw AppError(SubscriptionErrorCode.subscriptionExpired, "This subscription period has ended")
                }
                try await enqueue(acknowledge, now: now, on: conn)
                let id = try await subscriptions.insert(p, app: app, user: user, plan: plan, now: now, on: conn)
                try await subscriptions.event(
                    id,
                    app: app,
                    user: user,
                    type: p.isTrial ? "trial_started" : "subscribed",
                    data: ["transaction_id": .string(p.transactionID), "product_id": .string(p.productID)],
                    now: now,
                    on: conn
                )
                try await subscriptions.insertReceipt(app: app, user: user, sub: id, p, now: now, on: conn)
                let facts = try await subscriptions.announceAccess(app: app, user: user, on: conn, deliveredByWriter: true)
                try await subscriptions.askConfirmationEmail(app: app, user: user, subscription: id, p, planType: plan.planType, on: conn)
                let created = try await subscriptions.byOriginalTransaction(app: app, store: p.store, original: p.originalTransactionID, on: conn)!
                return (created, plan.features, true, facts)
            }
            let stored = try await subscriptions.storeExpiresMS(existing.id, on: conn)
            let effect = PurchaseRules.effect(
                transaction: known,
                incomingExpiresMS: p.expiresMS,
                subscriptionStatus: existing.status,
                storedExpiresMS: stored ?? PurchaseRules.milliseconds(existing.endDate)
            )
            if effect == .refuseRevoked { throw Self.revokedError }
            var facts: [Int64] = []
            if existing.userID != user {
                guard restore else {
                    throw AppError(
                        SubscriptionErrorCode.purchaseOwnedByAnotherUser,
                        "This purchase belongs to another account of this app; use restore to move it",
                        extra: ["can_restore": true]
                    )
                }
                try await subscriptions.transfer(existing.id, to: user, now: now, on: conn)
                try await subscriptions.event(
                    existing.id,
                    app: app,
                    user: user,
                    type: "transferred",
                    data: ["from_user_id": .string(existing.userID.lowercasedString)],
                    now: now,
                    on: conn
                )
                // The account it left is told first, with its own newer version.
                facts += try await subscriptions.announceAccess(app: app, user: existing.userID, on: conn, deliveredByWriter: true)
            }
            try await enqueue(acknowledge, now: now, on: conn)
            // A later period reported by the store (a renewal) moves the end date forward.
            if effect == .extend { try await subscriptions.extend(existing.id, with: p, now: now, on: conn) }
            try await subscriptions.insertReceipt(app: app, user: user, sub: existing.id, p, now: now, on: conn)
            let current = try await subscriptions.byOriginalTransaction(app: app, store: p.store, original: p.originalTransactionID, on: conn)!
            if current.grantsAccess { facts += try await subscriptions.announceAccess(app: app, user: user, on: conn, deliveredByWriter: true) }
            return (current, plan.features, false, facts)
        }
    }

    static let revokedError = AppError(SubscriptionErrorCode.transactionRevoked, "This purchase was refunded or revoked")

    func enqueue(_ acknowledge: GoogleAcknowledgeJob?, now: Date, on conn: PostgresConnection) async throws {
        guard let acknowledge else { return }
        try await JobQueue.enqueue(
            on: conn,
            queue: GoogleAcknowledgeJob.queue,
            kind: GoogleAcknowledgeJob.kind,
            payload: acknowledge,
            runAt: now,
            maxAttempts: 50,
            uniqueKey: "ack:\(acknowledge.purchaseToken)",
            logger: logger
        )
    }
}

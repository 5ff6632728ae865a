import Foundation
import Logging
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// UC-SUB-2.4 a freemium content unlocked with credits: spent once, never below zero, nothing
/// spent when the subscription already gives access; with an `Idempotency-Key` a retry gets the
/// first answer. The flow owns the transaction (#50) and answers the bytes a retry replays.
struct CreditUnlocking: Sendable {
    let db: DatabasePool
    let ledger: CreditLedger
    let subscriptions: SubscriptionStore
    let idempotency: IdempotencyStore
    let logger: Logger

    struct UnlockResponse: Codable {
        var unlocked: Bool
        var charged: Bool
        /// The credits unlock; null when the subscription already gives access.
        var unlock: ContentUnlock?
        var balance: Int
        /// `credits`, or `subscription` (FREEMIUM = subscription OR credits: nothing is spent).
        var via: String
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(unlocked, forKey: .unlocked)
            try c.encode(charged, forKey: .charged)
            try c.encode(unlock, forKey: .unlock)
            try c.encode(balance, forKey: .balance)
            try c.encode(via, forKey: .via)
        }
    }

    func unlock(app: UUID, user userID: UUID, content contentID: String, idempotencyKey: String?, now: Date) async throws -> (status: Int, body: Data)
    {
        let work: (PostgresConnection) async throws -> (status: Int, body: Data) = { conn in
            guard let rule = try await ledger.rule(app: app, content: contentID, on: conn) else { throw AppError.notFound("Content") }
            guard rule.accessLevel == .freemium else {
                throw AppError(
                    SubscriptionErrorCode.notUnlockable,
                    rule.accessLevel == .free ? "This content is free" : "This content needs a subscription",
                    extra: ["access_level": .string(rule.accessLevel.rawValue)]
                )
            }
            // A subscriber already has the content: no credit is spent.
            if try await subscriptions.grantsAccessNow(app: app, user: userID, now: now, on: conn) {
                let balance = try await ledger.balance(app: app, user: userID, on: conn)
                return (
                    200, try JSON.encoder.encode(UnlockResponse(unlocked: true, charged: false, unlock: nil, balance: balance, via: "subscription"))
                )
            }
            switch try await ledger.unlock(app: app, user: userID, rule: rule, now: now, on: conn) {
            case .unlocked(let u, let balance):
                return (200, try JSON.encoder.encode(UnlockResponse(unlocked: true, charged: true, unlock: u, balance: balance, via: "credits")))
            case .alreadyUnlocked(let u, let balance):
                return (200, try JSON.encoder.encode(UnlockResponse(unlocked: true, charged: false, unlock: u, balance: balance, via: "credits")))
            case .insufficient(let balance, let cost):
                throw AppError(
                    SubscriptionErrorCode.insufficientCredits,
                    "Not enough credits",
                    extra: ["balance": .int(balance), "cost": .int(cost), "missing": .int(cost - balance)]
                )
            }
        }
        if let key = idempotencyKey {
            // The key is bound to this request (this content): reused for another, it is a 422.
            let stored = try await idempotency.run(key: key, scope: "unlock:\(app):\(userID)", fingerprint: "content:\(contentID)", work)
            return (stored.status, stored.body)
        }
        return try await db.withTransaction(logger: logger) { try await work($0) }
    }
}

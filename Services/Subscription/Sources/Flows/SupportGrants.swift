import Foundation
import Logging
import ServiceKit
import SubscriptionDomain
import WireTypes

/// What support gives or takes back (#16), each once per `Idempotency-Key`: credits through the
/// ledger (so they show in the user's history and export), and premium as a subscription of the
/// store `support`, which the events, the expiry sweep and the facts treat as any purchase. The
/// flow owns the transactions (#50).
struct SupportGrants: Sendable {
    let db: DatabasePool
    let ledger: CreditLedger
    let subscriptions: SubscriptionStore
    let plans: PlanStore
    let logger: Logger

    func adjustCredits(app: UUID, user: UUID, amount: Int, reason: String, key: String, now: Date) async throws -> CreditLedger.SupportOutcome {
        try await db.withTransaction(logger: logger) { conn in
            try await ledger.supportAdjust(app: app, user: user, amount: amount, reason: reason, key: key, now: now, on: conn)
        }
    }

    func grantPremium(
        app: UUID,
        user: UUID,
        key: String,
        days: Int,
        until: Date,
        reason: String,
        operator who: String,
        now: Date
    ) async throws -> SubscriptionStore.SupportGrant {
        try await db.withTransaction(logger: logger) { conn -> SubscriptionStore.SupportGrant in
            // The richest active plan gives the features; an app with no plan still gets premium.
            let plan = try await plans.active(app: app, on: conn).max { $0.price < $1.price }
            let outcome = try await subscriptions.grantBySupport(app: app, user: user, key: key, until: until, plan: plan, now: now, on: conn)
            if case .granted(let id) = outcome {
                try await subscriptions.event(
                    id,
                    app: app,
                    user: user,
                    type: "support_granted",
                    data: ["reason": .string(reason), "days": .int(days), "operator": .string(who)],
                    now: now,
                    on: conn
                )
                try await subscriptions.announceAccess(app: app, user: user, on: conn)
            }
            return outcome
        }
    }

    /// The support grants still running end now; the user's other subscriptions are untouched.
    func endPremium(app: UUID, user: UUID, reason: String, operator who: String, now: Date) async throws -> [UUID] {
        try await db.withTransaction(logger: logger) { conn -> [UUID] in
            let ended = try await subscriptions.revokeSupportGrants(app: app, user: user, now: now, on: conn)
            for id in ended {
                try await subscriptions.event(
                    id,
                    app: app,
                    user: user,
                    type: "support_revoked",
                    data: ["reason": .string(reason), "operator": .string(who)],
                    now: now,
                    on: conn
                )
            }
            if !ended.isEmpty { try await subscriptions.announceAccess(app: app, user: user, on: conn) }
            return ended
        }
    }
}

import Foundation
import Logging
import ServiceKit
import SubscriptionDomain
import WireTypes

/// UC-SUB-2.2 the user's subscription and the features it gives (`/subscriptions/me`, the
/// entitlement, the content checks), and UC-SUB-2.3's cancel request. The flow owns its
/// transactions (#50).
struct SubscriptionStatusCheck: Sendable {
    struct State: Sendable {
        var subscription: Subscription?
        var features: JSONValue
    }

    let db: DatabasePool
    let subscriptions: SubscriptionStore
    let plans: PlanStore
    /// Each user's subscription and features as last read, kept until the subscription or the
    /// tenant's plans change (announced by triggers to every replica) or its period ends.
    let states: ReadCache<UserCacheKey, State>
    let clock: any WallClock
    let logger: Logger

    func state(app: UUID, user: UUID) async throws -> (Subscription?, JSONValue) {
        let now = clock.now()
        let key = UserCacheKey(app: app, user: user)
        if let held = states.value(for: key) { return (held.subscription, held.features) }
        let ticket = states.ticket(for: key)
        // Fast path: one read. Only a subscription whose end has passed takes the locked path
        // that flips it to expired.
        let snap = try await subscriptions.snapshot(app: app, user: user, db: db)
        guard let (sub, featuresText) = snap else {
            states.store(State(subscription: nil, features: .object([:])), for: key, ticket: ticket)
            return (nil, .object([:]))
        }
        let end = sub.status == .gracePeriod ? (sub.gracePeriodEnd ?? sub.endDate) : sub.endDate
        if !sub.grantsAccess || end > now {
            let features =
                sub.grantsAccess
                ? featuresText.flatMap { try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8)) } ?? .object([:]) : .object([:])
            // Never past the end of the period: then the locked path expires it.
            states.store(State(subscription: sub, features: features), for: key, ticket: ticket, expires: sub.grantsAccess ? end : nil)
            return (sub, features)
        }
        return try await db.withTransaction(logger: logger) { conn in
            guard let current = try await subscriptions.current(app: app, user: user, on: conn) else {
                return (try await subscriptions.latest(app: app, user: user, on: conn), .object([:]))
            }
            let s = try await subscriptions.expireIfDue(current, app: app, now: now, on: conn)
            let features =
                s.grantsAccess
                ? (try await plans.active(app: app, on: conn).first { $0.planType == s.planType }?.features ?? .object([:])) : .object([:])
            return (s, features)
        }
    }

    /// The cancel itself happens in the store; this records that the user asked, and access is
    /// unchanged until the period ends.
    func requestCancel(app: UUID, user: UUID, now: Date) async throws -> Subscription {
        try await db.withTransaction(logger: logger) { conn in
            guard let current = try await subscriptions.current(app: app, user: user, on: conn) else {
                throw AppError(SubscriptionErrorCode.noActiveSubscription, "There is no active subscription to cancel")
            }
            try await subscriptions.markCancelRequested(current.id, now: now, on: conn)
            try await subscriptions.event(current.id, app: app, user: user, type: "cancel_requested", now: now, on: conn)
            // Access is unchanged, but the fact gets a new version: the user's other devices hear
            // of the cancel on their live stream (#46).
            try await subscriptions.announceAccess(app: app, user: user, on: conn)
            return current
        }
    }
}

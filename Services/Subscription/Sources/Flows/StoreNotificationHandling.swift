import Foundation
import Logging
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// UC-SUB-2.1's store notifications (App Store Server Notifications v2 and v1, Google Play's
/// real-time developer notifications), once verified by the route: kept once per (store, id) and
/// their effect applied in the same transaction, so a replay answers "duplicate" and changes
/// nothing. The flow owns the transaction (#50).
struct StoreNotificationHandling: Sendable {
    let db: DatabasePool
    let subscriptions: SubscriptionStore
    let logger: Logger

    func receiveOnce(
        _ notification: SubscriptionStore.ReceivedNotification,
        now: Date,
        apply: (PostgresConnection) async throws -> String
    ) async throws -> String {
        try await db.withTransaction(logger: logger) { conn in
            guard let row = try await subscriptions.recordNotification(notification, now: now, on: conn) else { return "duplicate" }
            let outcome = try await apply(conn)
            try await subscriptions.setNotificationResult(row, outcome, on: conn)
            return outcome
        }
    }

    /// An App Store notification's effect on the subscription of its original transaction.
    func applyApple(
        type notificationType: String,
        subtype: String?,
        notificationID: String,
        tx: AppStoreTransaction?,
        graceExpires: Double?,
        app: UUID,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> String {
        let effect = AppleNotificationEffect.of(type: notificationType, subtype: subtype)
        if effect == .none { return "ignored" }
        guard let tx, let sub = try await subscriptions.byOriginalTransaction(app: app, store: "apple", original: tx.originalTransactionId, on: conn)
        else {
            return "no_subscription"
        }
        let data: [String: JSONValue] = [
            "notification_type": .string(notificationType), "subtype": subtype.map { .string($0) } ?? .null,
            "notification_uuid": .string(notificationID),
        ]
        switch effect {
        case .renewed:
            try await subscriptions.renew(
                sub,
                expiresMS: tx.expiresDate.map { Int64($0) },
                transactionID: tx.transactionId,
                refundReversed: notificationType == "REFUND_REVERSED",
                now: now,
                on: conn
            )
            try await subscriptions.event(sub.id, app: app, user: sub.userID, type: "renewed", data: data, now: now, on: conn)
            try await subscriptions.announceAccess(app: app, user: sub.userID, on: conn)
        case .gracePeriod:
            let graceEnd =
                graceExpires.map(AppStoreTransaction.date)
                ?? sub.endDate.addingTimeInterval(TimeInterval(AppleNotificationEffect.fallbackGraceDays) * 86400)
            try await subscriptions.enterGracePeriod(sub.id, until: graceEnd, now: now, on: conn)
            try await subscriptions.event(sub.id, app: app, user: sub.userID, type: "grace_period_started", data: data, now: now, on: conn)
        case .billingRetry:
            try await subscriptions.event(sub.id, app: app, user: sub.userID, type: "billing_retry", data: data, now: now, on: conn)
        case .expired:
            try await subscriptions.expire(sub.id, now: now, on: conn)
            try await subscriptions.event(sub.id, app: app, user: sub.userID, type: "expired", data: data, now: now, on: conn)
            try await subscriptions.announceAccess(app: app, user: sub.userID, on: conn)
        case .revoked:
            try await subscriptions.revoke(sub, app: app, transaction: tx.purchase(environment: "", proof: "", now: now), now: now, on: conn)
            try await subscriptions.event(
                sub.id,
                app: app,
                user: sub.userID,
                type: notificationType == "REFUND" ? "refunded" : "revoked",
                data: data,
                now: now,
                on: conn
            )
            try await subscriptions.announceAccess(app: app, user: sub.userID, on: conn)
        case .autoRenew(let on):
            try await subscriptions.setAutoRenew(sub.id, on, now: now, on: conn)
            try await subscriptions.event(
                sub.id,
                app: app,
                user: sub.userID,
                type: on ? "auto_renew_enabled" : "auto_renew_disabled",
                data: data,
                now: now,
                on: conn
            )
        case .none:
            break
        }
        return "applied"
    }

    /// A Google Play notification: the purchase as Google states it now (read again by the route).
    func applyGoogle(
        _ g: GoogleSubscriptionPurchase,
        token: String,
        type: Int,
        app: UUID,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> String {
        guard let sub = try await subscriptions.byOriginalTransaction(app: app, store: "google", original: token, on: conn) else {
            return "no_subscription"
        }
        let mapped = GoogleStateMapping.status(g.subscriptionState, expiry: g.expiry, now: now)
        let (status, autoRenew) = mapped ?? (sub.status, sub.autoRenew)
        // Revoked (type 12) removes access at once whatever the expiry says.
        let finalStatus: SubscriptionStatus = type == 12 ? .revoked : status
        let end = g.expiry ?? sub.endDate
        let graceEnd =
            finalStatus == .gracePeriod ? max(end, now.addingTimeInterval(TimeInterval(GoogleStateMapping.fallbackGraceDays) * 86400)) : nil
        try await subscriptions.applyStoreState(
            sub.id,
            status: finalStatus,
            end: end,
            autoRenew: autoRenew,
            graceEnd: graceEnd,
            orderID: g.latestOrderId,
            now: now,
            on: conn
        )
        try await subscriptions.event(
            sub.id,
            app: app,
            user: sub.userID,
            type: "google_notification",
            data: ["notification_type": .int(type), "state": .string(g.subscriptionState)],
            now: now,
            on: conn
        )
        if sub.grantsAccess != finalStatus.grantsAccess || finalStatus == .revoked {
            try await subscriptions.announceAccess(app: app, user: sub.userID, on: conn)
        }
        return "applied"
    }
}

import Foundation
import Logging
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

public struct Subscription: Codable, Sendable, Equatable {
    public var id: UUID
    public var userID: UUID
    public var status: SubscriptionStatus
    public var planType: String
    public var startDate: Date
    public var endDate: Date
    public var trialEndDate: Date?
    public var gracePeriodEnd: Date?
    public var autoRenew: Bool
    public var store: String
    public var expiredAt: Date?

    enum CodingKeys: String, CodingKey {
        case id
        case userID = "user_id"
        case status
        case planType = "plan_type"
        case startDate = "start_date"
        case endDate = "end_date"
        case trialEndDate = "trial_end_date"
        case gracePeriodEnd = "grace_period_end"
        case autoRenew = "auto_renew"
        case store
        case expiredAt = "expired_at"
    }

    /// Premium while trial, active, or in the store's grace period (seed UC-SUB-2.2).
    public var grantsAccess: Bool { status.grantsAccess }
}

public struct SubscriptionStore: Sendable {
    let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    static let columns = """
        id, user_id, status, plan_type, start_date, end_date, trial_end_date, grace_period_end, auto_renew, store, expired_at
        """

    static func decode(_ rows: PostgresRows) async throws -> [Subscription] {
        var out: [Subscription] = []
        for try await r in rows.decode((UUID, UUID, String, String, Date, Date, Date?, Date?, Bool, String, Date?).self) {
            out.append(
                Subscription(
                    id: r.0,
                    userID: r.1,
                    status: SubscriptionStatus(stored: r.2),
                    planType: r.3,
                    startDate: r.4,
                    endDate: r.5,
                    trialEndDate: r.6,
                    gracePeriodEnd: r.7,
                    autoRenew: r.8,
                    store: r.9,
                    expiredAt: r.10
                )
            )
        }
        return out
    }

    public func byOriginalTransaction(app: UUID, store: String, original: String, on conn: PostgresConnection) async throws -> Subscription? {
        try await Self.decode(
            try await conn.run(
                """
                SELECT \(unescaped: Self.columns) FROM subscriptions
                WHERE app_id = \(app) AND store = \(store) AND store_original_transaction_id = \(original) FOR UPDATE
                """,
                logger: logger
            )
        ).first
    }

    /// One purchase at a time per original transaction, whatever the number of devices posting it.
    public func lockPurchase(app: UUID, store: String, original: String, on conn: PostgresConnection) async throws {
        try await conn.run("SELECT pg_advisory_xact_lock(hashtext(\(app.uuidString + ":" + store + ":" + original)))", logger: logger)
    }

    /// What is recorded about one store transaction id: never seen, seen, or refunded/revoked.
    public func knownTransaction(app: UUID, store: String, id: String, on conn: PostgresConnection) async throws -> PurchaseRules.KnownTransaction {
        for try await revoked in try await conn.run(
            """
            SELECT revoked_at IS NOT NULL FROM iap_receipts WHERE app_id = \(app) AND store = \(store) AND transaction_id = \(id)
            """,
            logger: logger
        ).decode(Bool.self) { return revoked ? .revoked : .active }
        return .unknown
    }

    /// The store's expiry last applied to a subscription, exactly as the store sent it.
    public func storeExpiresMS(_ sub: UUID, on conn: PostgresConnection) async throws -> Int64? {
        for try await ms in try await conn.run("SELECT store_expires_ms FROM subscriptions WHERE id = \(sub)", logger: logger).decode(Int64?.self) {
            return ms
        }
        return nil
    }

    public func insert(_ p: StorePurchase, app: UUID, user: UUID, plan: Plan, now: Date, on conn: PostgresConnection) async throws -> UUID {
        let rows = try await conn.run(
            """
            INSERT INTO subscriptions (app_id, user_id, plan_id, plan_type, status, start_date, end_date, store_expires_ms, trial_end_date,
                grace_period_end, auto_renew, store, store_product_id, store_transaction_id, store_original_transaction_id, environment, price,
                currency, created_at, updated_at)
            VALUES (\(app), \(user), \(plan.id), \(plan.planType), \(p.status.rawValue), \(p.purchaseDate), \(p.endDate), \(p.expiresMS),
                \(p.isTrial ? p.endDate : nil), \(p.graceEnd), \(p.autoRenew), \(p.store), \(p.productID), \(p.transactionID),
                \(p.originalTransactionID), \(p.environment), \(plan.price)::numeric, \(plan.currency), \(now), \(now))
            RETURNING id
            """,
            logger: logger
        )
        for try await id in rows.decode(UUID.self) { return id }
        throw AppError(.internalServerError, "internal_error", "Internal error")
    }

    /// A later period reported by the store: the end date, the transaction and the status move.
    public func extend(_ sub: UUID, with p: StorePurchase, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE subscriptions SET end_date = \(p.endDate), store_expires_ms = \(p.expiresMS), store_transaction_id = \(p.transactionID),
                   status = CASE WHEN \(p.endDate) > \(now) THEN \(p.status.rawValue) ELSE status END,
                   expired_at = CASE WHEN \(p.endDate) > \(now) THEN NULL ELSE expired_at END,
                   auto_renew = \(p.autoRenew), updated_at = \(now)
            WHERE id = \(sub)
            """,
            logger: logger
        )
    }

    public func transfer(_ sub: UUID, to user: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE subscriptions SET user_id = \(user), updated_at = \(now) WHERE id = \(sub)", logger: logger)
    }

    public func insertReceipt(app: UUID, user: UUID, sub: UUID, _ p: StorePurchase, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            INSERT INTO iap_receipts (app_id, user_id, subscription_id, store, transaction_id, original_transaction_id, product_id,
                                      purchase_date, expiration_date, is_trial, is_active, validated, validation_date, signed_data, app_account_token)
            VALUES (\(app), \(user), \(sub), \(p.store), \(p.transactionID), \(p.originalTransactionID), \(p.productID),
                    \(p.purchaseDate), \(p.endDate), \(p.isTrial), true, true, \(now), \(p.proof), \(p.appAccountToken))
            ON CONFLICT (app_id, store, transaction_id) DO NOTHING
            """,
            logger: logger
        )
    }

    /// A refund or revocation: the subscription loses access at once and the store's
    /// transaction (recorded even if the app never posted it) stays revoked, so replaying it
    /// buys nothing.
    public func revoke(_ sub: Subscription, app: UUID, transaction: StorePurchase, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE subscriptions SET status = 'revoked', expired_at = \(now), auto_renew = false, updated_at = \(now) WHERE id = \(sub.id)
            """,
            logger: logger
        )
        try await conn.run(
            """
            INSERT INTO iap_receipts (app_id, user_id, subscription_id, store, transaction_id, original_transaction_id, product_id,
                                      purchase_date, expiration_date, is_trial, is_active, validated, validation_date, revoked_at)
            VALUES (\(app), \(sub.userID), \(sub.id), \(transaction.store), \(transaction.transactionID), \(transaction.originalTransactionID),
                    \(transaction.productID), \(transaction.purchaseDate), \(transaction.endDate), \(transaction.isTrial), false, true, \(now), \(now))
            ON CONFLICT (app_id, store, transaction_id) DO NOTHING
            """,
            logger: logger
        )
        try await conn.run(
            """
            UPDATE iap_receipts SET is_active = false, revoked_at = COALESCE(revoked_at, \(now)) WHERE subscription_id = \(sub.id)
            """,
            logger: logger
        )
    }

    /// A store renewal (or a refund reversed): the period moves to the store's end, and the
    /// receipts revoked by a refund that the store reversed count again.
    public func renew(
        _ sub: Subscription,
        expiresMS: Int64?,
        transactionID: String,
        refundReversed: Bool,
        now: Date,
        on conn: PostgresConnection
    ) async throws {
        let end = expiresMS.map { Date(timeIntervalSince1970: Double($0) / 1000) } ?? sub.endDate
        let status: SubscriptionStatus = end > now ? .active : .expired
        try await conn.run(
            """
            UPDATE subscriptions SET status = \(status.rawValue), end_date = GREATEST(end_date, \(end)),
                   store_expires_ms = GREATEST(store_expires_ms, \(expiresMS)), store_transaction_id = \(transactionID),
                   expired_at = CASE WHEN \(status.rawValue) = 'active' THEN NULL ELSE expired_at END,
                   grace_period_end = NULL, auto_renew = true, updated_at = \(now) WHERE id = \(sub.id)
            """,
            logger: logger
        )
        if refundReversed {
            try await conn.run("UPDATE iap_receipts SET is_active = true, revoked_at = NULL WHERE subscription_id = \(sub.id)", logger: logger)
        }
    }

    /// Apple's billing problem with a grace period: access continues until `until`.
    public func enterGracePeriod(_ sub: UUID, until graceEnd: Date, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE subscriptions SET status = 'grace_period', grace_period_end = \(graceEnd), updated_at = \(now) WHERE id = \(sub)
            """,
            logger: logger
        )
    }

    /// The store says the subscription ended.
    public func expire(_ sub: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run(
            """
            UPDATE subscriptions SET status = 'expired', expired_at = \(now), auto_renew = false, updated_at = \(now) WHERE id = \(sub)
            """,
            logger: logger
        )
    }

    public func setAutoRenew(_ sub: UUID, _ on: Bool, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE subscriptions SET auto_renew = \(on), updated_at = \(now) WHERE id = \(sub)", logger: logger)
    }

    /// UC-SUB-2.3: the user asked to cancel (the store does it; access lasts to the end).
    public func markCancelRequested(_ sub: UUID, now: Date, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE subscriptions SET cancel_requested_at = \(now), updated_at = \(now) WHERE id = \(sub)", logger: logger)
    }

    /// Google Play's state of the subscription, as mapped by `GoogleStateMapping`.
    public func applyStoreState(
        _ sub: UUID,
        status: SubscriptionStatus,
        end: Date,
        autoRenew: Bool,
        graceEnd: Date?,
        orderID: String?,
        now: Date,
        on conn: PostgresConnection
    ) async throws {
        try await conn.run(
            """
            UPDATE subscriptions SET status = \(status.rawValue), end_date = \(end), auto_renew = \(autoRenew), grace_period_end = \(graceEnd),
                   store_transaction_id = COALESCE(\(orderID), store_transaction_id),
                   expired_at = CASE WHEN \(status.rawValue) IN ('expired', 'revoked') THEN \(now) ELSE NULL END, updated_at = \(now)
            WHERE id = \(sub)
            """,
            logger: logger
        )
    }

    /// The user's current subscription (seed 2.2 step 6), locked for a possible expiry flip.
    public func current(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Subscription? {
        try await Self.decode(
            try await conn.run(
                """
                SELECT \(unescaped: Self.columns) FROM subscriptions
                WHERE app_id = \(app) AND user_id = \(user) AND status IN ('active', 'trial', 'grace_period')
                ORDER BY created_at DESC LIMIT 1 FOR UPDATE
                """,
                logger: logger
            )
        ).first
    }

    /// One round trip, no lock: the user's most relevant subscription (one granting access
    /// first) and its plan's features. An unnamed statement, not a prepared one: a named
    /// statement lives on one server session, which a transaction-mode pooler does not keep.
    public func snapshot(app: UUID, user: UUID, db: DatabasePool) async throws -> (Subscription, String?)? {
        typealias Row = (UUID, UUID, String, String, Date, Date, Date?, Date?, Bool, String, Date?, String?)
        for try await r in try await db.query(
            """
            SELECT s.id, s.user_id, s.status, s.plan_type, s.start_date, s.end_date, s.trial_end_date, s.grace_period_end,
                   s.auto_renew, s.store, s.expired_at, p.features::text
            FROM subscriptions s LEFT JOIN subscription_plans p ON p.id = s.plan_id
            WHERE s.app_id = \(app) AND s.user_id = \(user)
            ORDER BY (s.status IN ('active', 'trial', 'grace_period')) DESC, s.created_at DESC LIMIT 1
            """,
            logger: logger
        ).decode(Row.self) {
            return (
                Subscription(
                    id: r.0,
                    userID: r.1,
                    status: SubscriptionStatus(stored: r.2),
                    planType: r.3,
                    startDate: r.4,
                    endDate: r.5,
                    trialEndDate: r.6,
                    gracePeriodEnd: r.7,
                    autoRenew: r.8,
                    store: r.9,
                    expiredAt: r.10
                ), r.11
            )
        }
        return nil
    }

    /// A running subscription and the end of its period (or grace): the expiry sweep's filter and
    /// order, served by the index `subscriptions_expiry_due` on exactly this expression.
    static let running = "status IN ('active', 'trial', 'grace_period')"
    static let periodEnd = "(CASE WHEN status = 'grace_period' THEN COALESCE(grace_period_end, end_date) ELSE end_date END)"

    /// The expiry sweep's batch (a periodic query).
    static func dueQuery(now: Date, batch: Int) -> PostgresQuery {
        """
        SELECT app_id, \(unescaped: Self.columns) FROM subscriptions
        WHERE \(unescaped: Self.running) AND \(unescaped: Self.periodEnd) <= \(now)
        ORDER BY \(unescaped: Self.periodEnd) LIMIT \(batch) FOR UPDATE SKIP LOCKED
        """
    }

    /// The expiry sweep: subscriptions whose period (or grace) has ended, a batch at a time,
    /// `SKIP LOCKED` so replicas share the work, in the caller's transaction. Returns how many it
    /// expired.
    public func expireDue(now: Date, batch: Int, on conn: PostgresConnection) async throws -> Int {
        let rows = try await conn.run(Self.dueQuery(now: now, batch: batch), logger: logger)
        var due: [(UUID, Subscription)] = []
        for try await r in rows.decode((UUID, UUID, UUID, String, String, Date, Date, Date?, Date?, Bool, String, Date?).self) {
            due.append(
                (
                    r.0,
                    Subscription(
                        id: r.1,
                        userID: r.2,
                        status: SubscriptionStatus(stored: r.3),
                        planType: r.4,
                        startDate: r.5,
                        endDate: r.6,
                        trialEndDate: r.7,
                        gracePeriodEnd: r.8,
                        autoRenew: r.9,
                        store: r.10,
                        expiredAt: r.11
                    )
                )
            )
        }
        for (app, sub) in due { _ = try await expireIfDue(sub, app: app, now: now, on: conn) }
        return due.count
    }

    /// A store's notification as received: kept once per (store, id).
    public struct ReceivedNotification: Sendable {
        var app: UUID
        var store: String
        var id: String
        var type: String
        var subtype: String?
        var originalTransaction: String?
        var payload: String
    }

    /// Keeps a store's notification once per (store, id): its row id, nil for a replay.
    public func recordNotification(_ n: ReceivedNotification, now: Date, on conn: PostgresConnection) async throws -> UUID? {
        let inserted = try await conn.run(
            """
            INSERT INTO store_notifications (app_id, store, notification_id, notification_type, subtype, original_transaction_id,
                                             payload, received_at, result)
            VALUES (\(n.app), \(n.store), \(n.id), \(n.type), \(n.subtype), \(n.originalTransaction), \(n.payload)::jsonb, \(now), 'received')
            ON CONFLICT (store, notification_id) DO NOTHING RETURNING id
            """,
            logger: logger
        )
        for try await v in inserted.decode(UUID.self) { return v }
        return nil
    }

    public func setNotificationResult(_ row: UUID, _ outcome: String, on conn: PostgresConnection) async throws {
        try await conn.run("UPDATE store_notifications SET result = \(outcome) WHERE id = \(row)", logger: logger)
    }

    /// Whether a notification was already recorded (to skip a store round trip on a replay).
    public func notificationSeen(store: String, id: String, db: DatabasePool) async throws -> Bool {
        for try await _ in try await db.query(
            """
            SELECT 1 FROM store_notifications WHERE store = \(store) AND notification_id = \(id)
            """,
            logger: logger
        ) { return true }
        return false
    }

    public func latest(app: UUID, user: UUID, on conn: PostgresConnection) async throws -> Subscription? {
        try await Self.decode(
            try await conn.run(
                """
                SELECT \(unescaped: Self.columns) FROM subscriptions WHERE app_id = \(app) AND user_id = \(user)
                ORDER BY created_at DESC LIMIT 1
                """,
                logger: logger
            )
        ).first
    }

    public enum SupportGrant: Sendable {
        case granted(UUID)
        case replayed(UUID)
        case keyReused
    }

    /// Premium from support until `until`, once per `key` (a retry answers the first grant).
    public func grantBySupport(
        app: UUID,
        user: UUID,
        key: String,
        until: Date,
        plan: Plan?,
        now: Date,
        on conn: PostgresConnection
    ) async throws -> SupportGrant {
        let reference = "support:" + key
        for try await id in try await conn.run(
            """
            INSERT INTO subscriptions (app_id, user_id, plan_id, plan_type, status, start_date, end_date, store_expires_ms, auto_renew, store,
                store_product_id, store_transaction_id, store_original_transaction_id, environment, created_at, updated_at)
            VALUES (\(app), \(user), \(plan?.id), \(plan?.planType ?? "support"), 'active', \(now), \(until),
                \(Int64(until.timeIntervalSince1970 * 1000)), false, 'support', 'support', \(reference), \(reference), 'Production', \(now), \(now))
            ON CONFLICT (app_id, store, store_original_transaction_id) DO NOTHING
            RETURNING id
            """,
            logger: logger
        ).decode(UUID.self) { return .granted(id) }
        for try await (id, owner) in try await conn.run(
            """
            SELECT id, user_id FROM subscriptions WHERE app_id = \(app) AND store = 'support' AND store_original_transaction_id = \(reference)
            """,
            logger: logger
        ).decode((UUID, UUID).self) { return owner == user ? .replayed(id) : .keyReused }
        return .keyReused
    }

    /// Ends every premium support granted the user (store purchases are the store's to end).
    public func revokeSupportGrants(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws -> [UUID] {
        var out: [UUID] = []
        for try await id in try await conn.run(
            """
            UPDATE subscriptions SET status = 'revoked', expired_at = \(now), auto_renew = false, updated_at = \(now)
            WHERE app_id = \(app) AND user_id = \(user) AND store = 'support' AND status IN ('active', 'trial', 'grace_period')
            RETURNING id
            """,
            logger: logger
        ).decode(UUID.self) { out.append(id) }
        return out
    }

    public func event(
        _ sub: UUID,
        app: UUID,
        user: UUID,
        type: String,
        data: [String: JSONValue] = [:],
        now: Date,
        on conn: PostgresConnection
    ) async throws {
        let json = String(decoding: try JSON.encoder.encode(data), as: UTF8.self)
        var id: Int64 = 0
        for try await v in try await conn.run(
            """
            INSERT INTO subscription_events (subscription_id, app_id, user_id, event_type, event_data, timestamp)
            VALUES (\(sub), \(app), \(user), \(type), \(json)::jsonb, \(now))
            RETURNING id
            """,
            logger: logger
        ).decode(Int64.self) { id = v }
        // #33: the app's servers hear of it through auth, iff this transaction commits. The
        // event row's id orders a subscription's events.
        if let hook = Self.webhookTypes[type] {
            try await Outbox.write(
                try OutboxMessage(
                    InternalRoutes.events,
                    path: InternalRoutes.events.path(),
                    body: WebhookEventMessage(
                        type: hook,
                        appID: app,
                        createdAt: now,
                        version: id,
                        data: ["user_id": .string(user.lowercasedString), "subscription_id": .string(sub.lowercasedString)]
                    )
                ),
                on: conn,
                logger: logger
            )
        }
    }

    /// The subscription events an app's servers can subscribe to (#33), by our event type.
    static let webhookTypes: [String: String] = [
        "subscribed": "subscription.activated", "trial_started": "subscription.activated", "support_granted": "subscription.activated",
        "renewed": "subscription.renewed", "grace_period_started": "subscription.grace_period_started", "expired": "subscription.expired",
        "refunded": "subscription.refunded", "cancel_requested": "subscription.cancelled", "support_revoked": "subscription.expired",
    ]

    /// Whether one of the user's subscriptions gives access at `now` (its period, or its grace
    /// period, not over).
    public func grantsAccessNow(app: UUID, user: UUID, now: Date, on conn: PostgresConnection) async throws -> Bool {
        for try await yes in try await conn.run(
            """
            SELECT EXISTS (SELECT 1 FROM subscriptions WHERE app_id = \(app) AND user_id = \(user)
                           AND status IN ('trial', 'active', 'grace_period')
                           AND COALESCE(CASE WHEN status = 'grace_period' THEN grace_period_end END, end_date) > \(now))
            """,
            logger: logger
        ).decode(Bool.self) { return yes }
        return false
    }

    /// Tells auth the user's status, and ads and offline the user's entitlement, in the caller's
    /// transaction (delivered by the outbox). The user's fact counter is taken first: it
    /// serialises concurrent changes of one user, so the state read after it includes every
    /// change committed before, and the later change carries the higher version (a purchase then
    /// a refund ends `free` everywhere in any arrival order).
    /// Returns the outbox rows written. `deliveredByWriter`: the caller sends them itself right
    /// after its commit (a purchase answers only once auth, ads and offline hold the fact, #45),
    /// so the workers leave them alone for a moment.
    @discardableResult
    public func announceAccess(app: UUID, user: UUID, on conn: PostgresConnection, deliveredByWriter: Bool = false) async throws -> [Int64] {
        let version = try await UserFactStore(logger: logger).nextVersion(app: app, user: user, on: conn)
        var premium = false
        var validUntil: Date?
        for try await (p, until) in try await conn.run(
            """
            SELECT count(*) > 0,
                   max(COALESCE(CASE WHEN status = 'grace_period' THEN grace_period_end END, end_date))
            FROM subscriptions WHERE app_id = \(app) AND user_id = \(user) AND status IN ('trial', 'active', 'grace_period')
            """,
            logger: logger
        ).decode((Bool, Date?).self) { (premium, validUntil) = (p, until) }
        let hold: Duration? = deliveredByWriter ? Self.writerHold : nil
        var rows: [Int64] = []
        rows.append(
            try await Outbox.enqueue(
                try OutboxMessage(
                    InternalRoutes.userStatus,
                    path: InternalRoutes.userStatus.path(user: user, app: app),
                    body: UserStatusUpdate(appID: app, status: premium ? .premium : .free, version: version)
                ),
                on: conn,
                logger: logger,
                deliveredByWriter: hold
            ).id
        )
        let fact = EntitlementFact(appID: app, userID: user, isPremium: premium, validUntil: premium ? validUntil : nil, version: version)
        for target in [ServiceName.ads, .offline] {
            rows.append(
                try await Outbox.enqueue(
                    try OutboxMessage(
                        InternalRoutes.pushEntitlement,
                        to: target,
                        path: InternalRoutes.pushEntitlement.path(user: user, app: app),
                        body: fact
                    ),
                    on: conn,
                    logger: logger,
                    deliveredByWriter: hold
                ).id
            )
        }
        return rows
    }

    /// How long the workers leave a row its writer sends itself: longer than the writer's own
    /// attempt (`AccessFactsAtOnce.timeout`).
    public static let writerHold: Duration = .seconds(3)

    /// Seed 2.1 postconditions: auth (which holds the address and the mailer) emails the
    /// confirmation, through the outbox in the caller's transaction: no purchase, no email.
    public func askConfirmationEmail(
        app: UUID,
        user: UUID,
        subscription: UUID,
        _ p: StorePurchase,
        planType: String,
        on conn: PostgresConnection
    ) async throws {
        try await Outbox.write(
            try OutboxMessage(
                InternalRoutes.purchaseConfirmation,
                path: InternalRoutes.purchaseConfirmation.path(user: user, app: app),
                body: PurchaseConfirmation(
                    appID: app,
                    subscriptionID: subscription,
                    planType: planType,
                    productID: p.productID,
                    store: p.store,
                    isTrial: p.isTrial,
                    endDate: p.endDate
                )
            ),
            on: conn,
            logger: logger
        )
    }

    /// Seed 7a: an end date in the past (and past any grace period) makes the row expired,
    /// with an event and auth told. Returns the row as it is now.
    public func expireIfDue(_ s: Subscription, app: UUID, now: Date, on conn: PostgresConnection) async throws -> Subscription {
        let end = s.status == .gracePeriod ? (s.gracePeriodEnd ?? s.endDate) : s.endDate
        guard s.grantsAccess, end <= now else { return s }
        try await conn.run("UPDATE subscriptions SET status = 'expired', expired_at = \(end), updated_at = \(now) WHERE id = \(s.id)", logger: logger)
        try await event(s.id, app: app, user: s.userID, type: "expired", now: now, on: conn)
        try await announceAccess(app: app, user: s.userID, on: conn)
        var e = s
        e.status = .expired
        e.expiredAt = end
        return e
    }
}

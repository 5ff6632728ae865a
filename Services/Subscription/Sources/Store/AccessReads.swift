import Foundation
import Logging
import Prometheus
import ServiceKit
import SubscriptionDomain

/// The reads of the two hot paths an app calls most (#35): a content check (UC-SUB-2.2: is
/// this device admitted, what does the content need, has the user unlocked it, the plans to
/// offer) and the credit balance (UC-SUB-2.4), answered from this replica's memory while they
/// are true. Every ledger change announces itself (`credit_balances` and `content_unlocks`
/// triggers, topic `credits`) and drops the user's balance and unlocks on every replica within
/// milliseconds of its commit; the replica that took the write drops them as soon as it
/// answers (`ReadYourWritesMiddleware`: the user's own spend, ads' reward delivery, support's
/// grant), so the spender never reads the balance from before the spend.
struct AccessReads: Sendable {
    struct RuleKey: CacheKey {
        var app: UUID, content: String
        var scope: UUID { app }
        var subject: UUID? { nil }
    }
    struct UnlockKey: CacheKey {
        var app: UUID, user: UUID, content: String
        var scope: UUID { app }
        var subject: UUID? { user }
    }
    struct DeviceKey: CacheKey {
        var app: UUID, user: UUID, device: String
        var scope: UUID { app }
        var subject: UUID? { user }
    }
    struct TenantKey: CacheKey {
        var app: UUID
        var scope: UUID { app }
        var subject: UUID? { nil }
    }

    let db: DatabasePool
    let ledger: CreditLedger
    let plans: PlanStore
    let balances: ReadCache<UserCacheKey, Int>
    let unlocks: ReadCache<UnlockKey, ContentUnlock?>
    let rules: ReadCache<RuleKey, ContentRule?>
    let activePlans: ReadCache<TenantKey, [Plan]>
    /// Devices this replica wrote as seen, with when: while that is within the 15-minute
    /// window less a minute the device is surely active (another replica can only move its
    /// `last_seen` on), so it is admitted from memory; its `last_seen` is written again after
    /// 60-120 s (`AccessPolicy.remembered`), with the check's decision (`DeviceAdmission`).
    let devices: ReadCache<DeviceKey, Date>

    init(
        db: DatabasePool,
        ledger: CreditLedger,
        plans: PlanStore,
        feed: ChangeFeed,
        metrics: PrometheusCollectorRegistry,
        clock: any WallClock,
        capacity: Int,
        access: AccessStore
    ) {
        self.db = db
        self.ledger = ledger
        self.plans = plans
        balances = ReadCache(
            name: "credit_balance",
            capacity: capacity,
            ttl: .seconds(300),
            feed: feed,
            topics: ["credits"],
            metrics: metrics,
            clock: clock
        )
        unlocks = ReadCache(
            name: "content_unlock",
            capacity: capacity,
            ttl: .seconds(300),
            feed: feed,
            topics: ["credits"],
            metrics: metrics,
            clock: clock
        )
        rules = ReadCache(
            name: "content_rule",
            capacity: 10_000,
            ttl: .seconds(300),
            feed: feed,
            topics: ["content_rules"],
            metrics: metrics,
            clock: clock
        )
        activePlans = ReadCache(
            name: "active_plans",
            capacity: 1_000,
            ttl: .seconds(300),
            feed: feed,
            topics: ["plans"],
            metrics: metrics,
            clock: clock
        )
        devices = ReadCache(
            name: "device_seen",
            capacity: capacity,
            ttl: .seconds(Int(AccessPolicy.deviceActiveWindow - AccessPolicy.deviceRenewalMargin)),
            feed: feed,
            topics: [],
            metrics: metrics,
            clock: clock
        )
    }

    func balance(app: UUID, user: UUID) async throws -> Int {
        try await balances.value(for: UserCacheKey(app: app, user: user)) {
            try await db.withConnection { try await ledger.balance(app: app, user: user, on: $0) }
        }
    }

    func rule(app: UUID, content: String) async throws -> ContentRule? {
        try await rules.value(for: RuleKey(app: app, content: content)) {
            try await db.withConnection { try await ledger.rule(app: app, content: content, on: $0) }
        }
    }

    /// Kept no longer than the unlock lasts.
    func activeUnlock(app: UUID, user: UUID, content: String, now: Date) async throws -> ContentUnlock? {
        let held = try await unlocks.value(
            for: UnlockKey(app: app, user: user, content: content),
            expires: { $0?.expiresAt },
            load: { try await db.withConnection { try await ledger.activeUnlock(app: app, user: user, content: content, now: now, on: $0) } }
        )
        return held.flatMap { $0.expiresAt > now ? $0 : nil }
    }

    func plans(app: UUID) async throws -> [Plan] {
        try await activePlans.value(for: TenantKey(app: app)) {
            try await db.withConnection { try await plans.active(app: app, on: $0) }
        }
    }
}

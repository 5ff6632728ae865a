import Foundation
import Logging
import Prometheus
import ServiceKit

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
    /// Devices this replica recorded as seen within the last minute: seen again, they are
    /// admitted without a write (a device active that recently is one of the user's admitted
    /// ones; its `last_seen` is written again once the minute has passed, so it stays active
    /// in the 15-minute window at most a minute less than it was last seen).
    let devices: ReadCache<DeviceKey, Bool>
    static let deviceRefresh: Duration = .seconds(60)

    init(
        db: DatabasePool, ledger: CreditLedger, plans: PlanStore, feed: ChangeFeed, metrics: PrometheusCollectorRegistry, clock: any WallClock,
        capacity: Int
    ) {
        self.db = db
        self.ledger = ledger
        self.plans = plans
        balances = ReadCache(name: "credit_balance", capacity: capacity, ttl: .seconds(300), feed: feed, topics: ["credits"], metrics: metrics, clock: clock)
        unlocks = ReadCache(name: "content_unlock", capacity: capacity, ttl: .seconds(300), feed: feed, topics: ["credits"], metrics: metrics, clock: clock)
        rules = ReadCache(name: "content_rule", capacity: 10_000, ttl: .seconds(300), feed: feed, topics: ["content_rules"], metrics: metrics, clock: clock)
        activePlans = ReadCache(name: "active_plans", capacity: 1_000, ttl: .seconds(300), feed: feed, topics: ["plans"], metrics: metrics, clock: clock)
        devices = ReadCache(name: "device_seen", capacity: capacity, ttl: Self.deviceRefresh, feed: feed, topics: [], metrics: metrics, clock: clock)
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
        let held = try await unlocks.value(for: UnlockKey(app: app, user: user, content: content), expires: { $0?.expiresAt }) {
            try await db.withConnection { try await ledger.activeUnlock(app: app, user: user, content: content, now: now, on: $0) }
        }
        return held.flatMap { $0.expiresAt > now ? $0 : nil }
    }

    func plans(app: UUID) async throws -> [Plan] {
        try await activePlans.value(for: TenantKey(app: app)) {
            try await db.withConnection { try await plans.active(app: app, on: $0) }
        }
    }

    /// Nil when admitted, else how many other devices are active. A device this replica
    /// recorded in the last minute is admitted from memory; any other goes through the locked
    /// count in the database (`AccessStore.admitDevice`), so the limit is exact.
    func admitDevice(app: UUID, user: UUID, device: String, store: AccessStore, now: Date) async throws -> Int? {
        let key = DeviceKey(app: app, user: user, device: device)
        if devices.value(for: key) == true { return nil }
        let ticket = devices.ticket(for: key)
        // Seen by any replica well within the window: renewed in one statement (the steady
        // case, once a minute per device), not through the locked count.
        if try await store.renewActiveDevice(
            app: app, user: user, device: device, activeSince: AccessPolicy.renewableSince(now: now), now: now, db: db)
        {
            devices.store(true, for: key, ticket: ticket)
            return nil
        }
        if let refused = try await store.admitDevice(
            app: app, user: user, device: device, limit: AccessPolicy.maxActiveDevices,
            since: now.addingTimeInterval(-AccessPolicy.deviceActiveWindow), now: now, db: db)
        {
            return refused
        }
        devices.store(true, for: key, ticket: ticket)
        return nil
    }
}

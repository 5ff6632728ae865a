import Foundation
import Prometheus
import Synchronization

/// What a cached answer is about: a tenant (`scope`) and, within it, a user (`subject`).
public protocol CacheKey: Hashable, Sendable {
    var scope: UUID { get }
    var subject: UUID? { get }
}

/// Answers of a hot read path kept in this replica's memory, never past a change it was told
/// about. Changes arrive from the service's `ChangeFeed` (this replica's writes at once, the
/// other replicas' within milliseconds of their commit); a change of the user drops that user's
/// answers, a change of the tenant drops the tenant's, a reset of the feed drops all.
///
/// Dropping is done with counters, never by looking for entries: an answer records the
/// counters of its user's stripe, its tenant and the feed at the moment its read began (the
/// `Ticket`), and is valid only while they are unchanged. So a read that raced a change (began
/// before it, stored after it) is never served, and an answer read while the feed was not
/// listening is never kept. Every answer also expires after `ttl` (or earlier, if the caller says).
public final class ReadCache<Key: CacheKey, Value: Sendable>: Sendable {
    public struct Ticket: Sendable {
        fileprivate let period: UInt64?, generation: UInt64, stripe: Int, stripeEpoch: UInt64, scopeEpoch: UInt64
    }

    private struct Entry {
        var value: Value
        var expires: Date
        var generation: UInt64, stripeEpoch: UInt64, scopeEpoch: UInt64
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var generation: UInt64 = 0
        var stripes: [UInt64]
        var scopes: [UUID: UInt64] = [:]
    }

    private static var stripeCount: Int { 4096 }
    public let name: String
    private let capacity: Int
    private let ttl: Duration
    private let feed: ChangeFeed
    private let clock: any WallClock
    private let state = Mutex(State(stripes: Array(repeating: 0, count: 4096)))
    private let hits: Counter, misses: Counter, size: Gauge

    /// - Parameters:
    ///   - topics: the changes that concern this cache (the user topic always does).
    public init(
        name: String,
        capacity: Int,
        ttl: Duration,
        feed: ChangeFeed,
        topics: Set<String>,
        metrics: PrometheusCollectorRegistry,
        clock: any WallClock = SystemClock()
    ) {
        self.name = name
        self.clock = clock
        self.capacity = max(1, capacity)
        self.ttl = ttl
        self.feed = feed
        // One help text for every cache: the registry refuses two texts for one name.
        let help = "Reads of a cached path answered from this replica's memory (hit) or from the database (miss), by cache"
        let requests = MetricNameDescriptor(metricName: "cache_requests", unitName: "total", helpText: help)
        hits = metrics.makeCounter(descriptor: requests, labels: [("cache", name), ("result", "hit")])
        misses = metrics.makeCounter(descriptor: requests, labels: [("cache", name), ("result", "miss")])
        size = metrics.makeGauge(
            descriptor: MetricNameDescriptor(metricName: "cache", unitName: "entries", helpText: "Answers held in this replica's memory per cache"),
            labels: [("cache", name)]
        )
        let concerned = topics.union([DataChange.userTopic])
        feed.subscribe { [weak self] event in
            guard let self else { return }
            switch event {
            case .reset: self.dropAll()
            case .change(let change) where concerned.contains(change.topic): self.drop(change)
            case .change: break
            }
        }
    }

    private static func stripe(scope: UUID, subject: UUID?) -> Int {
        var h = Hasher()
        h.combine(scope)
        h.combine(subject)
        return Int(UInt(bitPattern: h.finalize()) % UInt(stripeCount))
    }

    private func drop(_ change: DataChange) {
        state.withLock { s in
            switch (change.app, change.user) {
            case (let app?, let user?):
                s.stripes[Self.stripe(scope: app, subject: user)] &+= 1
                // An answer about the whole tenant (no subject) may include this user's data too.
                s.stripes[Self.stripe(scope: app, subject: nil)] &+= 1
            case (let app?, nil): s.scopes[app, default: 0] &+= 1
            default:
                s.generation &+= 1
                s.entries.removeAll()
            }
        }
        if change.app == nil { size.set(Int64(0)) }
    }

    private func dropAll() {
        state.withLock { s in
            s.generation &+= 1
            s.entries.removeAll()
        }
        size.set(Int64(0))
    }

    /// The answer held for `key`, if it is still true.
    public func value(for key: Key) -> Value? {
        let now = clock.now()
        guard feed.livePeriod != nil else {
            misses.increment()
            return nil
        }
        let stripe = Self.stripe(scope: key.scope, subject: key.subject)
        let found = state.withLock { s -> Value? in
            guard let e = s.entries[key] else { return nil }
            if e.generation == s.generation, e.stripeEpoch == s.stripes[stripe], e.scopeEpoch == s.scopes[key.scope, default: 0], now < e.expires {
                return e.value
            }
            s.entries[key] = nil
            return nil
        }
        if found != nil { hits.increment() } else { misses.increment() }
        return found
    }

    /// The answer held for `key`, else what `load` reads (kept unless a change raced the read).
    public func value(for key: Key, expires: (Value) -> Date? = { _ in nil }, load: () async throws -> Value) async throws -> Value {
        if let held = value(for: key) { return held }
        let ticket = ticket(for: key)
        let loaded = try await load()
        store(loaded, for: key, ticket: ticket, expires: expires(loaded))
        return loaded
    }

    /// Taken before reading the database for `key`.
    public func ticket(for key: Key) -> Ticket {
        let period = feed.livePeriod
        let stripe = Self.stripe(scope: key.scope, subject: key.subject)
        return state.withLock { s in
            Ticket(
                period: period,
                generation: s.generation,
                stripe: stripe,
                stripeEpoch: s.stripes[stripe],
                scopeEpoch: s.scopes[key.scope, default: 0]
            )
        }
    }

    /// Keeps what was read under `ticket`, unless something changed since it was taken (or
    /// the feed was not listening); `expires` shortens the cache's time to live.
    public func store(_ value: Value, for key: Key, ticket: Ticket, expires: Date? = nil) {
        guard let period = ticket.period, feed.livePeriod == period else { return }
        let now = clock.now()
        let (seconds, atto) = ttl.components
        let longest = now.addingTimeInterval(Double(seconds) + Double(atto) / 1e18)
        let until = min(longest, expires ?? longest)
        guard now < until else { return }
        let count = state.withLock { s -> Int in
            guard ticket.generation == s.generation, ticket.stripeEpoch == s.stripes[ticket.stripe],
                ticket.scopeEpoch == s.scopes[key.scope, default: 0]
            else { return s.entries.count }
            if s.entries.count >= capacity && s.entries[key] == nil {
                // Full: let an eighth go (the dictionary's order, which is arbitrary) rather than
                // keep an order of use on every hit.
                for k in Array(s.entries.keys.prefix(max(1, capacity / 8))) { s.entries[k] = nil }
            }
            s.entries[key] = Entry(
                value: value,
                expires: until,
                generation: s.generation,
                stripeEpoch: ticket.stripeEpoch,
                scopeEpoch: ticket.scopeEpoch
            )
            return s.entries.count
        }
        size.set(Int64(count))
    }
}

/// One user of one tenant: the key of answers about that user alone.
public struct UserCacheKey: CacheKey {
    public var app: UUID, user: UUID
    public init(app: UUID, user: UUID) {
        self.app = app
        self.user = user
    }
    public var scope: UUID { app }
    public var subject: UUID? { user }
}

import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PostgresNIO
import Prometheus
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// Two replicas (two pools, two feeds, two caches) on one database: what one writes, the
/// other stops serving within a second; nothing is kept that raced a change or was read while
/// the feed could not hear.
final class ChangeFeedTests: XCTestCase {
    struct Key: CacheKey {
        var scope: UUID
        var subject: UUID?
    }

    struct Replica: Sendable {
        let runtime: ServiceRuntime
        let feed: ChangeFeed
        let cache: ReadCache<Key, String>
        init(channel: String, ping: Duration = .seconds(60)) {
            runtime = kitRuntime(.offline)
            feed = ChangeFeed(db: runtime.db, schema: channel, pingInterval: ping, logger: runtime.logger)
            cache = ReadCache(name: "test", capacity: 100, ttl: .seconds(60), feed: feed, topics: ["thing"], metrics: PrometheusCollectorRegistry())
        }
        func put(_ value: String, _ key: Key) { cache.store(value, for: key, ticket: cache.ticket(for: key)) }
        func publish(_ change: DataChange, rollback: Bool = false) async throws {
            struct Rollback: Error {}
            do {
                try await runtime.db.withTransaction(logger: runtime.logger) { conn in
                    try await feed.publish(change, on: conn)
                    if rollback { throw Rollback() }
                }
            } catch is Rollback {}
        }
    }

    /// Runs both replicas' pools and feeds until `body` ends.
    static func withReplicas(_ body: @Sendable (Replica, Replica) async throws -> Void) async throws {
        let channel = "feedtest\(UInt32.random(in: 0...UInt32.max))"
        let a = Replica(channel: channel)
        let b = Replica(channel: channel)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for r in [a, b] {
                group.addTask { await r.runtime.db.run() }
                group.addTask { try await r.feed.run() }
            }
            defer { group.cancelAll() }
            try await Self.waitFor("both feeds listening") { a.feed.livePeriod != nil && b.feed.livePeriod != nil }
            try await body(a, b)
        }
    }

    static func waitFor(_ what: String, within: Duration = .seconds(1), _ condition: () -> Bool) async throws {
        let end = ContinuousClock.now + within
        while !condition() {
            guard ContinuousClock.now < end else {
                XCTFail("not within \(within): \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func testAChangeCommittedOnOneReplicaIsDroppedByTheOtherWithinASecond() async throws {
        try await Self.withReplicas { a, b in
            let app = UUID()
            let user = UUID()
            let other = UUID()
            let key = Key(scope: app, subject: user)
            let neighbour = Key(scope: app, subject: other)
            b.put("old", key)
            b.put("neighbour", neighbour)
            XCTAssertEqual(b.cache.value(for: key), "old")

            // A rolled-back write announces nothing; a later committed one is heard in order.
            try await a.publish(DataChange("thing", app: app, user: user), rollback: true)
            let markerApp = UUID()
            b.put("marker", Key(scope: markerApp, subject: nil))
            try await a.publish(DataChange("thing", app: markerApp))
            try await Self.waitFor("the marker dropped") { b.cache.value(for: Key(scope: markerApp, subject: nil)) == nil }
            XCTAssertEqual(b.cache.value(for: key), "old", "a rolled-back change is never heard")

            try await a.publish(DataChange("thing", app: app, user: user))
            try await Self.waitFor("the user's answer dropped on the other replica") { b.cache.value(for: key) == nil }
            XCTAssertEqual(b.cache.value(for: neighbour), "neighbour", "another user's answer stays")

            // A change of the tenant drops all of its users; another topic drops nothing.
            b.put("again", key)
            b.put("marker", Key(scope: markerApp, subject: nil))
            try await a.publish(DataChange("unrelated", app: app))
            try await a.publish(DataChange("thing", app: markerApp))
            try await Self.waitFor("the marker dropped") { b.cache.value(for: Key(scope: markerApp, subject: nil)) == nil }
            XCTAssertEqual(b.cache.value(for: key), "again", "a topic the cache does not follow drops nothing")
            try await a.publish(DataChange("thing", app: app))
            try await Self.waitFor("the tenant's answers dropped") { b.cache.value(for: key) == nil && b.cache.value(for: neighbour) == nil }
            // Erasure (the user topic) concerns every cache.
            b.put("erased?", key)
            try await a.publish(DataChange(DataChange.userTopic, app: app, user: user))
            try await Self.waitFor("the erased user's answer dropped") { b.cache.value(for: key) == nil }
        }
    }

    func testAReadThatRacedAChangeIsNeverKept() async throws {
        try await Self.withReplicas { a, b in
            let key = Key(scope: UUID(), subject: UUID())
            // b notes when it hears this first change: heard late, it would drop what the second
            // half of the test keeps.
            let first = Key(scope: key.scope, subject: nil)
            b.put("first", first)
            // On the writer's replica the change counts at once, before its commit.
            let ticket = a.cache.ticket(for: key)
            try await a.publish(DataChange("thing", app: key.scope, user: key.subject))
            a.cache.store("read before the change", for: key, ticket: ticket)
            XCTAssertNil(a.cache.value(for: key))
            try await Self.waitFor("the first change heard") { b.cache.value(for: first) == nil }
            // On the other replica once it is heard.
            let marker = Key(scope: key.scope, subject: nil)
            b.put("marker", marker)
            let late = b.cache.ticket(for: key)
            try await a.publish(DataChange("thing", app: key.scope, user: key.subject))
            try await Self.waitFor("heard") { b.cache.value(for: marker) == nil }
            b.cache.store("read before the change", for: key, ticket: late)
            XCTAssertNil(b.cache.value(for: key))
            // A read that began after the change is kept.
            b.put("fresh", key)
            XCTAssertEqual(b.cache.value(for: key), "fresh")
        }
    }

    func testNothingIsKeptWhileTheFeedIsNotListening() async throws {
        let r = Replica(channel: "feedtest_idle")
        let key = Key(scope: UUID(), subject: UUID())
        r.put("unheard", key)
        XCTAssertNil(r.feed.livePeriod)
        XCTAssertNil(r.cache.value(for: key), "a replica that cannot hear changes serves nothing from memory")
    }

    func testLosingTheListeningConnectionDropsEverythingUntilItListensAgain() async throws {
        try await Self.withReplicas { a, b in
            let key = Key(scope: UUID(), subject: UUID())
            b.put("held", key)
            let period = try XCTUnwrap(b.feed.livePeriod)
            // The database ends every listening session (a restart, a failover, a proxy dropping it).
            let admin = TestEnvironment.adminClient(database: TestEnvironment.unitDatabase)
            try await withPostgres(admin) { db in
                try await db.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %feedtest%'")
            }
            try await Self.waitFor("the loss noticed") { b.cache.value(for: key) == nil }
            try await Self.waitFor("listening again", within: .seconds(3)) { (b.feed.livePeriod ?? 0) > period }
            // Changes are heard again.
            b.put("held again", key)
            XCTAssertEqual(b.cache.value(for: key), "held again")
            try await Self.waitFor("A listening again", within: .seconds(3)) { a.feed.livePeriod != nil }
            try await a.publish(DataChange("thing", app: key.scope, user: key.subject))
            try await Self.waitFor("the change heard after the reconnection") { b.cache.value(for: key) == nil }
        }
    }

    /// A signed-in user's own write (any non-GET answer) drops their entries on the replica that
    /// answered before the answer goes out, with no notification needed; a GET drops nothing.
    func testAUsersOwnWriteIsDroppedOnTheReplicaThatAnsweredIt() async throws {
        struct SignedIn: RouterMiddleware {
            typealias Context = ServiceRequestContext
            let app: UUID, user: UUID
            func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
                var context = context
                context.identity = Identity(appID: app, userID: user, status: .free, isGuest: false, email: nil)
                return try await next(request, context)
            }
        }
        try await Self.withReplicas { a, _ in
            let app = UUID()
            let user = UUID()
            let key = Key(scope: app, subject: user)
            let router = Router(context: ServiceRequestContext.self)
            let group = router.group("v1").add(middleware: SignedIn(app: app, user: user)).add(middleware: ReadYourWritesMiddleware(changes: a.feed))
            group.get("thing") { _, _ in "read" }
            group.post("thing") { _, _ in "written" }
            try await Application(router: router).test(.router) { client in
                a.put("before", key)
                _ = try await client.execute(uri: "/v1/thing", method: .get) { $0 }
                XCTAssertEqual(a.cache.value(for: key), "before", "a read drops nothing")
                _ = try await client.execute(uri: "/v1/thing", method: .post) { $0 }
                XCTAssertNil(a.cache.value(for: key), "dropped before the write was answered")
            }
        }
    }
}

import Foundation
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import TestSupport
import XCTest

final class OutboxTests: XCTestCase {
    /// The receiver: an internal route that records each delivery once, keyed by the
    /// Idempotency-Key, in the receiving service's own schema.
    static func receiverApp(_ runtime: ServiceRuntime, port: Int) -> ServiceApplication {
        let idempotency = IdempotencyStore(client: runtime.db, logger: runtime.logger)
        var config = runtime.config
        config.port = port
        // The receiving service's own migrations: its schema's history must match them.
        let rt = ServiceRuntime(
            config: config,
            migrations: Array(runtime.migrations.migrations.dropFirst(PlatformMigrations.all.count)),
            logger: runtime.logger
        )
        return buildServiceApplication(
            runtime: rt,
            appVerifier: CachedAppVerifier(DenyAll(), ttl: .seconds(1)),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [])))
        ) { routes in
            routes.internal.post("test/deliveries") { request, context in
                guard let key = request.headers[.idempotencyKey] else { throw AppError.badRequest("Idempotency-Key required") }
                let body = try await request.decodeJSON(as: [String: Int].self, context: context)
                let stored = try await idempotency.run(key: key, scope: "test-deliveries") { conn in
                    try await conn.query(
                        "INSERT INTO test_deliveries (idempotency_key, seq) VALUES (\(key), \(body["seq"]!))",
                        logger: runtime.logger
                    )
                    return (200, Data(#"{"ok":true}"#.utf8))
                }
                return Response(
                    status: .init(code: stored.status),
                    headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(bytes: stored.body))
                )
            }
        }
    }

    struct DenyAll: AppVerifier { func verify(appID: UUID, apiKey: String) async throws -> Bool { false } }

    /// A row committed on one replica is delivered by another's worker within a second, though
    /// that worker polls once a minute: the commit announces it on the schema's change feed.
    /// (Without the wake-up the row waits for the next poll: the test fails at 2 s.)
    func testACommittedRowIsDeliveredAtOnceNotAtTheNextPoll() async throws {
        let port = try TestEnvironment.freePort()
        let sender = kitRuntime(.subscription, overrides: ["ADS_URL": "http://127.0.0.1:\(port)", "OUTBOX_POLL_MS": "60000"])
        let writer = kitRuntime(.subscription)
        let receiver = kitRuntime(.ads)
        try await withMigratedRuntime(receiver) { receiver in
            try await receiver.db.query("CREATE TABLE IF NOT EXISTS test_deliveries (idempotency_key text, seq int)")
            try await receiver.db.query("TRUNCATE test_deliveries")
            try await withMigratedRuntime(sender) { sender in
                try await sender.db.query("UPDATE outbox SET status = 'dead' WHERE status = 'pending'")
                try await withMigratedRuntime(writer) { writer in
                    let app = Self.receiverApp(receiver, port: port)
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        let services = ServiceGroup(
                            configuration: .init(services: [app, sender.changes, sender.outboxWorker], logger: receiver.logger)
                        )
                        group.addTask { try await services.run() }
                        while sender.changes.livePeriod == nil { try await Task.sleep(for: .milliseconds(10)) }
                        // The worker has found nothing and sleeps for its minute.
                        try await Task.sleep(for: .milliseconds(500))
                        let start = ContinuousClock.now
                        try await writer.db.withTransaction(logger: writer.logger) { conn in
                            try await Outbox.write(
                                try OutboxMessage(target: .ads, path: "/internal/test/deliveries", body: ["seq": 7]),
                                on: conn,
                                logger: writer.logger
                            )
                        }
                        var delivered = 0
                        while delivered == 0 && ContinuousClock.now - start < .seconds(2) {
                            try await Task.sleep(for: .milliseconds(20))
                            delivered = try await Self.count(receiver, "SELECT count(*)::int FROM test_deliveries WHERE seq = 7")
                        }
                        let elapsed = ContinuousClock.now - start
                        XCTAssertEqual(delivered, 1, "not delivered within 2 s")
                        XCTAssertLessThan(elapsed, .seconds(1), "delivered after \(elapsed)")

                        // A row its writer sends itself (to answer with the receiver's reply) is
                        // left alone by the worker the same commit woke, and the writer gets the reply.
                        let own = try await writer.db.withTransaction(logger: writer.logger) { conn in
                            try await Outbox.enqueue(
                                try OutboxMessage(target: .ads, path: "/internal/test/deliveries", body: ["seq": 8]),
                                on: conn,
                                logger: writer.logger,
                                deliveredByWriter: .seconds(10)
                            ).id
                        }
                        try await Task.sleep(for: .milliseconds(500))
                        let untouched = try await Self.count(
                            sender,
                            "SELECT count(*)::int FROM outbox WHERE id = \(own) AND status = 'pending' AND attempts = 0"
                        )
                        XCTAssertEqual(untouched, 1, "the woken worker took the writer's row")
                        let reply = await sender.outboxWorker.deliverNow(id: own, timeout: .seconds(2))
                        XCTAssertEqual(reply?.status, 200)
                        let again = await sender.outboxWorker.deliverNow(id: own, timeout: .seconds(2))
                        XCTAssertNil(again, "a row is sent once by its writer")
                        await services.triggerGracefulShutdown()
                    }
                }
            }
        }
    }

    func testMessagesWrittenWhileTheReceiverIsDownArriveExactlyOnce() async throws {
        let port = try TestEnvironment.freePort()
        let sender = kitRuntime(.subscription, overrides: ["ADS_URL": "http://127.0.0.1:\(port)"])
        let receiver = kitRuntime(.ads)
        try await withMigratedRuntime(receiver) { receiver in
            try await receiver.db.query("CREATE TABLE IF NOT EXISTS test_deliveries (idempotency_key text, seq int)")
            try await receiver.db.query("TRUNCATE test_deliveries")
            try await withMigratedRuntime(sender) { sender in
                try await sender.db.query("UPDATE outbox SET status = 'dead' WHERE status = 'pending'")
                // 200 side effects, each written in the transaction of the change that causes it.
                for seq in 0..<200 {
                    try await sender.db.withTransaction(logger: sender.logger) { conn in
                        try await Outbox.write(
                            try OutboxMessage(target: .ads, path: "/internal/test/deliveries", body: ["seq": seq]),
                            on: conn,
                            logger: sender.logger
                        )
                    }
                }
                let worker = OutboxWorker(
                    client: sender.db,
                    http: sender.http,
                    serviceURLs: sender.config.serviceURLs,
                    credential: sender.internalCredential,
                    batchSize: 50,
                    backoff: Backoff(base: .milliseconds(20), cap: .milliseconds(200)),
                    logger: sender.logger
                )
                // Receiver down: every attempt fails and is rescheduled, nothing is lost.
                try await worker.deliverBatch()
                var pending = try await Self.count(sender, "SELECT count(*)::int FROM outbox WHERE status = 'pending'")
                XCTAssertEqual(pending, 200)
                try await sender.db.query("UPDATE outbox SET next_attempt_at = now() WHERE status = 'pending'")

                // Receiver back: everything arrives.
                let app = Self.receiverApp(receiver, port: port)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    let serviceGroup = ServiceGroup(configuration: .init(services: [app], logger: receiver.logger))
                    group.addTask { try await serviceGroup.run() }
                    let deadline = ContinuousClock.now + .seconds(60)
                    while pending > 0 && ContinuousClock.now < deadline {
                        if try await worker.deliverBatch() == 0 { try await Task.sleep(for: .milliseconds(50)) }
                        pending = try await Self.count(sender, "SELECT count(*)::int FROM outbox WHERE status = 'pending'")
                    }
                    // A redelivery of an already delivered message changes nothing.
                    try await sender.db.query(
                        "UPDATE outbox SET status = 'pending', next_attempt_at = now() WHERE id IN (SELECT id FROM outbox WHERE status = 'delivered' ORDER BY id LIMIT 5)"
                    )
                    while try await worker.deliverBatch() > 0 {}
                    await serviceGroup.triggerGracefulShutdown()
                }
                XCTAssertEqual(pending, 0)
                let delivered = try await Self.count(sender, "SELECT count(*)::int FROM outbox WHERE status = 'delivered'")
                XCTAssertGreaterThanOrEqual(delivered, 200)
                let rows = try await Self.count(receiver, "SELECT count(*)::int FROM test_deliveries")
                let distinct = try await Self.count(receiver, "SELECT count(DISTINCT seq)::int FROM test_deliveries")
                XCTAssertEqual(rows, 200, "each message exactly once at the receiver")
                XCTAssertEqual(distinct, 200)
            }
        }
    }

    func testIdempotencyStoreReplaysTheStoredResponse() async throws {
        let runtime = kitRuntime(.ads)
        try await withMigratedRuntime(runtime) { runtime in
            try await runtime.db.query("CREATE TABLE IF NOT EXISTS test_deliveries (idempotency_key text, seq int)")
            let store = IdempotencyStore(client: runtime.db, logger: runtime.logger)
            let key = UUID().uuidString
            let first = try await store.run(key: key, scope: "t") { conn in
                try await conn.query("INSERT INTO test_deliveries VALUES (\(key), 1)", logger: runtime.logger)
                return (201, Data("first".utf8))
            }
            let second = try await store.run(key: key, scope: "t") { conn in
                try await conn.query("INSERT INTO test_deliveries VALUES (\(key), 2)", logger: runtime.logger)
                return (201, Data("second".utf8))
            }
            XCTAssertFalse(first.replayed)
            XCTAssertTrue(second.replayed)
            XCTAssertEqual(String(decoding: second.body, as: UTF8.self), "first")
            XCTAssertEqual(second.status, 201)
            let stored = try await Self.count(runtime, "SELECT count(*)::int FROM test_deliveries WHERE idempotency_key = '\(key)'")
            XCTAssertEqual(stored, 1)

            // A change that fails leaves no key behind: the next delivery runs it.
            let key2 = UUID().uuidString
            struct Fail: Error {}
            _ = try? await store.run(key: key2, scope: "t") { _ in throw Fail() }
            let retried = try await store.run(key: key2, scope: "t") { _ in (200, Data("ok".utf8)) }
            XCTAssertFalse(retried.replayed)
        }
    }

    private static func count(_ runtime: ServiceRuntime, _ sql: String) async throws -> Int {
        let rows = try await runtime.db.query(PostgresQuery(unsafeSQL: sql))
        for try await n in rows.decode(Int.self) { return n }
        return -1
    }
}

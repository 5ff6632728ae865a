import Foundation
import Logging
import PostgresNIO
import ServiceContextModule
import ServiceLifecycle
import Tracing
import WireTypes

/// A side effect on another service, written in the same transaction as the change that
/// causes it and delivered later by `OutboxWorker` (ARCHITECTURE.md, "Nothing lost between
/// services").
public struct OutboxMessage: Sendable {
    public var target: ServiceName
    public var method: String
    /// Path on the target service, e.g. `/internal/users/{id}/credits`.
    public var path: String
    public var body: Data?

    public init<B: Encodable>(target: ServiceName, method: String = "POST", path: String, body: B) throws {
        self.target = target
        self.method = method
        self.path = path
        self.body = try JSON.encoder.encode(body)
    }

    public init(target: ServiceName, method: String, path: String) {
        self.target = target
        self.method = method
        self.path = path
        self.body = nil
    }
}

public enum Outbox {
    /// Writes the message on `connection` (the caller's transaction). Returns the
    /// idempotency key the receiver will see.
    @discardableResult
    public static func write(_ message: OutboxMessage, on connection: PostgresConnection, logger: Logger) async throws -> UUID {
        try await enqueue(message, on: connection, logger: logger).key
    }

    /// Like `write`, also returning the row id, for a caller that attempts delivery at once
    /// after its commit (`OutboxWorker.deliverNow`).
    /// `deliveredByWriter`: the writer sends the row itself right after its commit
    /// (`OutboxWorker.deliverNow`, to answer with the receiver's reply), so the workers, woken by
    /// the same commit, leave it alone for that long; they take it if the writer did not.
    public static func enqueue(
        _ message: OutboxMessage,
        on connection: PostgresConnection,
        logger: Logger,
        deliveredByWriter hold: Duration? = nil
    ) async throws -> (id: Int64, key: UUID) {
        let body = message.body.map { String(decoding: $0, as: UTF8.self) }
        let holdMilliseconds = hold.map { Int($0.nanoseconds / 1_000_000) } ?? 0
        let rows = try await connection.run(
            """
            INSERT INTO outbox (target_service, method, path, body, request_id, traceparent, next_attempt_at)
            VALUES (\(message.target.rawValue), \(message.method), \(message.path), \(body)::jsonb, \(RequestTrace.requestID),
                    \(Telemetry.currentTraceparent()), now() + \(holdMilliseconds) * interval '1 millisecond')
            RETURNING id, idempotency_key
            """,
            logger: logger
        )
        for try await (id, key) in rows.decode((Int64, UUID).self) { return (id, key) }
        throw OutboxError.notWritten
    }

    public enum OutboxError: Error { case notWritten }

    /// The change a committed outbox row announces (statement trigger, platform include
    /// `outbox_wake`): no tenant or user, only "there is something to deliver".
    public static let topic = "outbox"

    /// Announces every insert into `outbox` on the schema's change feed, once per statement.
    static let wakeMigration = """
        CREATE FUNCTION announce_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify(TG_TABLE_SCHEMA || '_changes', 'outbox||');
            RETURN NULL;
        END $$;
        CREATE TRIGGER outbox_announce AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION announce_outbox();
        """
}

/// Delivers outbox rows over HTTP with the service credential and an `Idempotency-Key`;
/// retries with exponential backoff and jitter; a row the receiver refuses for good (a 4xx
/// other than 404/408/409/423/429) or that exhausts its attempts is marked dead for an operator.
public struct OutboxWorker: Service {
    public let client: DatabasePool
    public let http: CurlHTTPClient
    public let serviceURLs: [ServiceName: String]
    public let credential: InternalCredential
    public let pollInterval: Duration
    public let batchSize: Int
    public let backoff: Backoff
    public let logger: Logger
    /// Signalled when a row is committed (the `outbox` change, heard by every replica): the
    /// worker delivers it then rather than at its next poll.
    public let wakeup: Wakeup?

    public init(
        client: DatabasePool,
        http: CurlHTTPClient,
        serviceURLs: [ServiceName: String],
        credential: InternalCredential,
        pollInterval: Duration = .milliseconds(200),
        batchSize: Int = Self.defaultBatchSize,
        backoff: Backoff = Backoff(base: .milliseconds(500), cap: .seconds(600)),
        wakeup: Wakeup? = nil,
        logger: Logger
    ) {
        self.wakeup = wakeup
        self.client = client
        self.http = http
        self.serviceURLs = serviceURLs
        self.credential = credential
        self.pollInterval = pollInterval
        self.batchSize = batchSize
        self.backoff = backoff
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                var delivered = 0
                do { delivered = try await deliverBatch() } catch {
                    logger.warning("outbox poll failed", metadata: ["error": "\(String(reflecting: error))"])
                }
                if delivered == 0 {
                    if let wakeup { await wakeup.wait(upTo: pollInterval) } else { try? await Task.sleep(for: pollInterval) }
                }
            }
        }
    }

    /// `requestID`: the request that wrote the row, carried to the receiver (`X-Request-ID`).
    private struct Row {
        var id: Int64
        var key: UUID
        var target: String
        var method: String
        var path: String
        var body: String?
        var attempts: Int
        var max: Int
        var requestID: String?
        /// #49: the span of the transaction that wrote the row; its delivery links to it.
        var traceparent: String?
        typealias Columns = (Int64, UUID, String, String, String, String?, Int, Int, String?, String?)
        init(_ r: Columns) {
            id = r.0
            key = r.1
            target = r.2
            method = r.3
            path = r.4
            body = r.5
            attempts = r.6
            max = r.7
            requestID = r.8
            traceparent = r.9
        }
    }

    public static let defaultBatchSize = 32

    /// The claim of due rows (a periodic query: see `PeriodicQuery`).
    static func dueQuery(batchSize: Int) -> PostgresQuery {
        """
        UPDATE outbox SET attempts = attempts + 1, next_attempt_at = now() + interval '15 seconds'
        WHERE id IN (
            SELECT id FROM outbox WHERE status = 'pending' AND next_attempt_at <= now()
            ORDER BY id LIMIT \(batchSize) FOR UPDATE SKIP LOCKED)
        RETURNING id, idempotency_key, target_service, method, path, body::text, attempts, max_attempts, request_id, traceparent
        """
    }

    /// Claims due rows (leased for 15 s so another replica skips them: longer than a delivery's
    /// 10 s timeout, short enough that a killed sender's rows go out soon after, #34), sends them, records
    /// the outcome. Returns how many rows it attempted.
    @discardableResult
    public func deliverBatch() async throws -> Int {
        let rows = try await client.query(Self.dueQuery(batchSize: batchSize), logger: logger)
        var batch: [Row] = []
        for try await r in rows.decode(Row.Columns.self) { batch.append(Row(r)) }
        await withTaskGroup(of: Void.self) { group in
            for row in batch { group.addTask { await deliver(row) } }
        }
        return batch.count
    }

    /// Attempts one row right away (the caller has just committed it), with a short timeout: a
    /// row no one has tried yet, or one that is due.
    /// Returns the receiver's answer when it was delivered; otherwise the row stays pending
    /// (or leased by a worker) and is delivered later.
    public func deliverNow(id: Int64, timeout: Duration) async -> HTTPResponseData? {
        do {
            let rows = try await client.query(
                """
                UPDATE outbox SET attempts = attempts + 1, next_attempt_at = now() + interval '15 seconds'
                WHERE id = \(id) AND status = 'pending' AND (attempts = 0 OR next_attempt_at <= now())
                RETURNING id, idempotency_key, target_service, method, path, body::text, attempts, max_attempts, request_id, traceparent
                """,
                logger: logger
            )
            for try await r in rows.decode(Row.Columns.self) { return await deliver(Row(r), timeout: timeout) }
        } catch {
            logger.warning("immediate outbox delivery not attempted", metadata: ["id": "\(id)", "error": "\(error)"])
        }
        return nil
    }

    /// Asks the receiver again for its answer to a message, whatever the row's state (not dead):
    /// the receiver keeps its first response per Idempotency-Key, so this changes nothing there
    /// and tells the truth here: a row whose delivery timed out but landed, or one a worker
    /// delivered without anyone keeping the answer. A 2xx marks a pending row delivered; any
    /// other outcome leaves the row to the worker.
    public func confirm(id: Int64, timeout: Duration) async -> HTTPResponseData? {
        do {
            var found: Row?
            for try await r in try await client.query(
                """
                SELECT id, idempotency_key, target_service, method, path, body::text, attempts, max_attempts, request_id, traceparent
                FROM outbox WHERE id = \(id) AND status <> 'dead'
                """,
                logger: logger
            ).decode(Row.Columns.self) { found = Row(r) }
            guard let row = found, let request = request(for: row, timeout: timeout) else { return nil }
            let response = try await http.send(request)
            guard (200..<300).contains(response.status) else { return nil }
            try await client.query(
                """
                UPDATE outbox SET status = 'delivered', delivered_at = now(), last_error = NULL WHERE id = \(id) AND status = 'pending'
                """,
                logger: logger
            )
            return response
        } catch {
            logger.warning("outbox confirmation failed", metadata: ["id": "\(id)", "error": "\(error)"])
            return nil
        }
    }

    private func request(for row: Row, timeout: Duration) -> HTTPRequest? {
        guard let target = ServiceName(rawValue: row.target), let base = serviceURLs[target] else { return nil }
        var headers = credential.headers + [("Idempotency-Key", row.key.lowercasedString)]
        if row.body != nil { headers.append(("Content-Type", "application/json")) }
        // One id follows a change from the request that caused it into the receiver's log.
        if let id = row.requestID { headers.append(("X-Request-ID", id)) }
        return HTTPRequest(method: row.method, url: base + row.path, headers: headers, body: row.body.map { Data($0.utf8) }, timeout: timeout)
    }

    /// #49: a delivery is a span linked to the transaction that wrote the row (a child of it too
    /// when the writer delivers at once, in its own request), so that a message delivered
    /// minutes later is still part of the request's story. It is kept when the writer's trace
    /// was: the decision stored in the row's `traceparent`, never a second draw.
    @discardableResult
    private func deliver(_ row: Row, timeout: Duration = .seconds(10)) async -> HTTPResponseData? {
        let origin = Telemetry.stored(traceparent: row.traceparent)
        // In a request: a span when the request's records (a child). In a worker: a new trace
        // linked to the writer's when that one was kept; when it was not, no span, and the
        // receiver learns so from the writer's context.
        let inWorker = ServiceContext.current == nil
        guard Telemetry.isRecording || (inWorker && origin?.kept == true) else {
            guard inWorker, let origin else { return await attempt(row, timeout: timeout) }
            return await ServiceContext.$current.withValue(origin.context) { await attempt(row, timeout: timeout) }
        }
        let span = Telemetry.startSpan("outbox deliver", ofKind: .producer)
        if let origin { span.addLink(SpanLink(context: origin.context, attributes: [:])) }
        span.attributes["messaging.system"] = "outbox"
        span.attributes["messaging.destination.name"] = row.target
        span.attributes["messaging.message.id"] = "\(row.id)"
        span.attributes["outbox.attempt"] = row.attempts
        defer { span.end() }
        return await ServiceContext.$current.withValue(Telemetry.context(of: span)) {
            let answer = await attempt(row, timeout: timeout)
            if answer == nil { span.setStatus(SpanStatus(code: .error)) }
            return answer
        }
    }

    private func attempt(_ row: Row, timeout: Duration) async -> HTTPResponseData? {
        guard let request = request(for: row, timeout: timeout) else {
            await record(row, outcome: .dead("unknown target service \(row.target)"))
            return nil
        }
        do {
            let response = try await http.send(request)
            switch response.status {
            case 200..<300:
                await record(row, outcome: .delivered)
                return response
            // 404 is retried too: the receiver may not have been upgraded to this route yet.
            case 404, 408, 409, 423, 429, 500...: await record(row, outcome: .retry("HTTP \(response.status)"))
            default: await record(row, outcome: .dead("HTTP \(response.status): \(String(decoding: response.body.prefix(500), as: UTF8.self))"))
            }
        } catch {
            await record(row, outcome: .retry(String(describing: error)))
        }
        return nil
    }

    private enum Outcome {
        case delivered
        case retry(String)
        case dead(String)
    }

    private func record(_ row: Row, outcome: Outcome) async {
        do {
            switch outcome {
            case .delivered:
                try await client.query(
                    "UPDATE outbox SET status = 'delivered', delivered_at = now(), last_error = NULL WHERE id = \(row.id)",
                    logger: logger
                )
            case .retry(let error) where row.attempts < row.max:
                let delay = Double(backoff.delay(afterAttempt: row.attempts).milliseconds) / 1000
                try await client.query(
                    """
                    UPDATE outbox SET last_error = \(error), next_attempt_at = now() + make_interval(secs => \(delay))
                    WHERE id = \(row.id)
                    """,
                    logger: logger
                )
            case .retry(let error), .dead(let error):
                logger.error("outbox message dead", metadata: ["id": "\(row.id)", "path": "\(row.path)", "error": "\(error)"])
                try await client.query("UPDATE outbox SET status = 'dead', last_error = \(error) WHERE id = \(row.id)", logger: logger)
            }
        } catch {
            // The lease expires and the row is retried: a duplicate is harmless (idempotency key).
            logger.warning("could not record outbox outcome", metadata: ["id": "\(row.id)", "error": "\(error)"])
        }
    }
}

/// The receiving side of the outbox: the first delivery of a key runs the change and stores
/// the response in the same transaction; every redelivery gets the stored response and
/// changes nothing. A concurrent duplicate waits on the key's row lock, then sees the stored
/// response.
public struct IdempotencyStore: Sendable {
    public let client: DatabasePool
    public let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public struct StoredResponse: Sendable, Equatable {
        public var status: Int
        public var body: Data
        public var replayed: Bool
    }

    /// `fingerprint` names the request a key was first used for (e.g. its target): the same key
    /// with another fingerprint is refused with 422 `idempotency_key_reused` (Stripe's rule),
    /// rather than answered with the first request's response.
    public func run(
        key: String,
        scope: String,
        fingerprint: String? = nil,
        _ body: (PostgresConnection) async throws -> (status: Int, body: Data)
    ) async throws -> StoredResponse {
        try await client.withTransaction(logger: logger) { conn in
            let inserted = try await conn.run(
                """
                INSERT INTO idempotency_keys (scope, key, request_fingerprint) VALUES (\(scope), \(key), \(fingerprint))
                ON CONFLICT (scope, key) DO NOTHING RETURNING key
                """,
                logger: logger
            )
            var isNew = false
            for try await _ in inserted { isNew = true }
            if !isNew {
                let rows = try await conn.run(
                    """
                    SELECT status_code, response_body, request_fingerprint FROM idempotency_keys WHERE scope = \(scope) AND key = \(key)
                    """,
                    logger: logger
                )
                for try await (status, stored, first) in rows.decode((Int?, String?, String?).self) {
                    if first != fingerprint {
                        throw AppError(
                            .unprocessableContent,
                            "idempotency_key_reused",
                            "This Idempotency-Key was used for another request; use a new key for a new request"
                        )
                    }
                    return StoredResponse(status: status ?? 200, body: Data((stored ?? "").utf8), replayed: true)
                }
                throw AppError(.conflict, "idempotency_conflict", "Request with this Idempotency-Key is in progress")
            }
            let result = try await body(conn)
            let text = String(decoding: result.body, as: UTF8.self)
            try await conn.run(
                """
                UPDATE idempotency_keys SET status_code = \(result.status), response_body = \(text)
                WHERE scope = \(scope) AND key = \(key)
                """,
                logger: logger
            )
            return StoredResponse(status: result.status, body: result.body, replayed: false)
        }
    }
}

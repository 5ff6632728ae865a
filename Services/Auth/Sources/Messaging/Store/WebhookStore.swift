import AuthDomain
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit
import WireTypes

/// All of the webhooks' SQL (#33): the apps' endpoints, the events, and each delivery.
struct WebhookStore: Sendable {
    let db: DatabasePool
    let box: SecretBox
    let logger: Logger

    // MARK: endpoints

    struct Endpoint: Codable, Sendable {
        var id: UUID
        var url: String
        var events: [String]
        var description: String
        var disabled: Bool
        var disabledReason: String?
        var createdAt: Date
        var updatedAt: Date
        var rotationEndsAt: Date?
        enum CodingKeys: String, CodingKey {
            case id, url, events, description, disabled
            case disabledReason = "disabled_reason"
            case createdAt = "created_at"
            case updatedAt = "updated_at"
            case rotationEndsAt = "previous_secret_expires_at"
        }
    }

    static let endpointColumns = "id, url, events, description, disabled, disabled_reason, created_at, updated_at, previous_secret_expires_at"
    typealias EndpointRow = (UUID, String, [String], String, Bool, String?, Date, Date, Date?)
    static func endpoint(_ r: EndpointRow) -> Endpoint {
        Endpoint(
            id: r.0,
            url: r.1,
            events: r.2,
            description: r.3,
            disabled: r.4,
            disabledReason: r.5,
            createdAt: r.6,
            updatedAt: r.7,
            rotationEndsAt: r.8
        )
    }

    /// Nil when the app has its 20 endpoints already. Counted under a lock on the app's rows, in
    /// the caller's transaction, so two creations at once cannot make 21.
    func create(app: UUID, url: String, events: [String], description: String, secret: String, on conn: PostgresConnection) async throws -> Endpoint?
    {
        let sealed = try box.seal(secret)
        let id = UUID()
        try await conn.run("SELECT pg_advisory_xact_lock(hashtext('webhook_endpoints:' || \(app.lowercasedString)))", logger: logger)
        var count = 0
        for try await n in try await conn.run("SELECT count(*)::int FROM webhook_endpoints WHERE app_id = \(app)", logger: logger).decode(Int.self) {
            count = n
        }
        guard count < WebhookEndpointRules.maxEndpointsPerApp else { return nil }
        for try await r in try await conn.run(
            """
            INSERT INTO webhook_endpoints (id, app_id, url, events, description, secret_sealed)
            VALUES (\(id), \(app), \(url), \(events), \(description), \(sealed))
            RETURNING \(unescaped: Self.endpointColumns)
            """,
            logger: logger
        ).decode(EndpointRow.self) { return Self.endpoint(r) }
        return nil
    }

    func list(app: UUID) async throws -> [Endpoint] {
        var out: [Endpoint] = []
        for try await r in try await db.query(
            """
            SELECT \(unescaped: Self.endpointColumns) FROM webhook_endpoints WHERE app_id = \(app) ORDER BY created_at, id
            """,
            logger: logger
        ).decode(EndpointRow.self) { out.append(Self.endpoint(r)) }
        return out
    }

    func find(app: UUID, id: UUID) async throws -> Endpoint? {
        for try await r in try await db.query(
            """
            SELECT \(unescaped: Self.endpointColumns) FROM webhook_endpoints WHERE app_id = \(app) AND id = \(id)
            """,
            logger: logger
        ).decode(EndpointRow.self) { return Self.endpoint(r) }
        return nil
    }

    /// Changes what is given; re-enabling clears the failure clock. Nil for an unknown id.
    /// Every bind is cast: an absent field is bound as a NULL without a type, which PostgreSQL
    /// cannot type where nothing else fixes it (`$5 IS NULL` alone: a 500 before #45).
    func update(app: UUID, id: UUID, url: String?, events: [String]?, description: String?, disabled: Bool?) async throws -> Endpoint? {
        for try await r in try await db.query(
            """
            UPDATE webhook_endpoints SET url = COALESCE(\(url)::text, url), events = COALESCE(\(events)::text[], events),
                   description = COALESCE(\(description)::text, description),
                   disabled = COALESCE(\(disabled)::boolean, disabled),
                   disabled_reason = CASE WHEN \(disabled)::boolean IS NULL THEN disabled_reason WHEN \(disabled)::boolean THEN 'operator' ELSE NULL END,
                   failing_since = CASE WHEN \(disabled)::boolean = false THEN NULL ELSE failing_since END,
                   updated_at = now()
            WHERE app_id = \(app) AND id = \(id)
            RETURNING \(unescaped: Self.endpointColumns)
            """,
            logger: logger
        ).decode(EndpointRow.self) { return Self.endpoint(r) }
        return nil
    }

    func delete(app: UUID, id: UUID) async throws -> Bool {
        for try await _ in try await db.query("DELETE FROM webhook_endpoints WHERE app_id = \(app) AND id = \(id) RETURNING 1", logger: logger) {
            return true
        }
        return false
    }

    /// A new secret; the one in force keeps signing until `overlapUntil`. Nil for an unknown id.
    func rotate(app: UUID, id: UUID, secret: String, overlapUntil: Date) async throws -> Endpoint? {
        let sealed = try box.seal(secret)
        for try await r in try await db.query(
            """
            UPDATE webhook_endpoints SET previous_secret_sealed = secret_sealed, previous_secret_expires_at = \(overlapUntil),
                   secret_sealed = \(sealed), updated_at = now()
            WHERE app_id = \(app) AND id = \(id)
            RETURNING \(unescaped: Self.endpointColumns)
            """,
            logger: logger
        ).decode(EndpointRow.self) { return Self.endpoint(r) }
        return nil
    }

    // MARK: events

    /// Records an event once (by its id) and a delivery for each enabled endpoint of the app that
    /// wants its type, in the caller's transaction. False when the id was recorded before, or no
    /// endpoint wants it (then nothing is written: an app without webhooks pays one lookup).
    @discardableResult
    static func record(_ event: WebhookEvent, on conn: PostgresConnection, logger: Logger) async throws -> Bool {
        var inserted = false
        for try await _ in try await conn.run(Self.recordQuery(event), logger: logger) { inserted = true }
        return inserted
    }

    /// One statement (#45: the hand-over was four round trips, BEGIN to COMMIT): the event, and a
    /// delivery for each endpoint that wants it.
    static func recordQuery(_ event: WebhookEvent) throws -> PostgresQuery {
        let body = String(decoding: try JSON.encoder.encode(event), as: UTF8.self)
        return """
            WITH wanting AS (
                SELECT id FROM webhook_endpoints
                WHERE app_id = \(event.appID) AND NOT disabled AND ('*' = ANY (events) OR \(event.type) = ANY (events))
            ), recorded AS (
                INSERT INTO webhook_events (id, app_id, type, body)
                SELECT \(event.id), \(event.appID), \(event.type), \(body)::jsonb WHERE EXISTS (SELECT 1 FROM wanting)
                ON CONFLICT (id) DO NOTHING RETURNING id
            )
            INSERT INTO webhook_deliveries (endpoint_id, event_id) SELECT wanting.id, recorded.id FROM wanting, recorded
            RETURNING 1
            """
    }

    // MARK: deliveries

    struct Due: Sendable {
        var id: Int64
        var endpointID: UUID
        var url: String
        var eventID: UUID
        var body: String
        var attempt: Int
        var secrets: [String]
    }

    /// Claims due deliveries, at most `perEndpoint` in flight per endpoint (counting the ones
    /// other replicas hold), leased for `lease`: one slow or dead endpoint holds its own slots
    /// only, never another endpoint's or another app's.
    func claim(limit: Int, perEndpoint: Int, lease: Duration) async throws -> [Due] {
        let seconds = Double(lease.components.seconds)
        var rows: [(Int64, UUID, String, UUID, String, Int, ByteBuffer, ByteBuffer?, Date?)] = []
        for try await r in try await db.query(
            """
            -- Per endpoint, two index ranges: the slots it uses now (other replicas' too) and its
            -- first due rows, as many as it has free slots. Nothing reads the whole backlog
            -- (a claimed row keeps its next_attempt_at, so a lapsed lease is due by it too).
            WITH picked AS (
                SELECT d.id
                FROM webhook_endpoints e
                CROSS JOIN LATERAL (
                    SELECT GREATEST(\(perEndpoint) - count(*), 0) AS free FROM webhook_deliveries s
                    WHERE s.endpoint_id = e.id AND s.status = 'sending' AND s.locked_until > now()
                ) b
                CROSS JOIN LATERAL (
                    SELECT d.id FROM webhook_deliveries d
                    WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'sending') AND d.next_attempt_at <= now()
                      AND (d.status = 'pending' OR d.locked_until <= now())
                    ORDER BY d.next_attempt_at, d.id LIMIT b.free
                ) d
                WHERE NOT e.disabled
                LIMIT \(limit)
            )
            UPDATE webhook_deliveries d SET status = 'sending', attempts = d.attempts + 1,
                   locked_until = now() + make_interval(secs => \(seconds))
            FROM webhook_endpoints e, webhook_events v
            WHERE d.id = ANY(ARRAY(SELECT id FROM picked)) AND e.id = d.endpoint_id AND v.id = d.event_id AND NOT e.disabled
              AND ((d.status = 'pending' AND d.next_attempt_at <= now()) OR (d.status = 'sending' AND d.locked_until <= now()))
            RETURNING d.id, d.endpoint_id, e.url, d.event_id, v.body::text, d.attempts, e.secret_sealed,
                      e.previous_secret_sealed, e.previous_secret_expires_at
            """,
            logger: logger
        ).decode((Int64, UUID, String, UUID, String, Int, ByteBuffer, ByteBuffer?, Date?).self) { rows.append(r) }
        let now = Date()
        return rows.compactMap { r in
            // A secret neither data key opens (AUTH_DATA_KEY changed without a reseal) holds back
            // that endpoint only: its row waits out the lease, every other endpoint goes on.
            guard let current = try? box.open(r.6) else {
                logger.error("webhook secret unreadable; rotate it or reseal", metadata: ["endpoint": "\(r.1)"])
                return nil
            }
            var secrets = [current]
            if let previous = r.7, let until = r.8, until > now, let old = try? box.open(previous) { secrets.append(old) }
            return Due(id: r.0, endpointID: r.1, url: r.2, eventID: r.3, body: r.4, attempt: r.5, secrets: secrets)
        }
    }

    /// Events (and their deliveries with them) are kept `WEBHOOK_RETENTION_DAYS` (30): far longer
    /// than the last retry (about 38 h after the first attempt), long enough to replay.
    static func retention(_ env: EnvironmentVariables) -> [RetentionRule] {
        [
            RetentionRule(
                name: "webhook_events",
                table: "webhook_events",
                due: "created_at < $1",
                keep: .seconds(86_400 * env.int("WEBHOOK_RETENTION_DAYS", default: 30))
            )
        ]
    }

    enum Outcome: Sendable {
        case delivered(status: Int, latencyMs: Int)
        case retry(status: Int?, error: String?, latencyMs: Int?, after: TimeInterval)
        case failed(status: Int?, error: String?, latencyMs: Int?)
        /// 410 Gone: the endpoint is disabled, its pending deliveries cancelled.
        case gone(latencyMs: Int)
    }

    /// Records an attempt's outcome, if this attempt still holds the delivery (the attempt itself
    /// is kept whatever: the receiver saw it). Returns the endpoint's `failing_since` after a
    /// failure (nil otherwise). A 410 Gone goes through `recordGone`, which disables the endpoint.
    ///
    /// The outcome commits without waiting for its WAL flush: lost in a crash, the delivery is
    /// sent again when its lease ends (a receiver dedupes on `webhook-id`), and an event is never
    /// lost (its own write, at the hand-over, is durable). Waiting for the flush held each of an
    /// endpoint's 16 slots for a disk write: 258 deliveries/s to one endpoint at 500 offered (#45).
    func record(_ due: Due, _ outcome: Outcome, sentAt: Date) async throws -> Date? {
        let (kind, code, latency, error) = Self.columns(outcome)
        let after: Double? = if case .retry(_, _, _, let after) = outcome { after } else { nil }
        // One statement, its own transaction (#45: six round trips before).
        for try await since in try await db.query(
            Self.outcomeQuery(due, kind: kind, code: code, latency: latency, error: error, after: after, sentAt: sentAt),
            logger: logger
        ).decode(Date?.self) { return since }
        return nil
    }

    /// A 410 Gone: the attempt kept and the endpoint disabled, in the caller's transaction, which
    /// waits for its flush (the endpoint's disabling is the operator's to see).
    func recordGone(_ due: Due, latencyMs: Int, sentAt: Date, on conn: PostgresConnection) async throws {
        let (kind, code, latency, error) = Self.columns(.gone(latencyMs: latencyMs))
        try await conn.run(Self.outcomeQuery(due, kind: kind, code: code, latency: latency, error: error, after: nil, sentAt: sentAt), logger: logger)
        try await conn.run("SET LOCAL synchronous_commit TO on", logger: logger)
        try await Self.disable(endpoint: due.endpointID, reason: "gone (HTTP 410)", on: conn, logger: logger)
    }

    /// An outcome as the attempt's columns: kind, answer code, latency, error (at most 500 characters).
    static func columns(_ outcome: Outcome) -> (kind: String, code: Int?, latency: Int?, error: String?) {
        switch outcome {
        case .delivered(let status, let latency): ("delivered", status, latency, nil)
        case .gone(let latency): ("gone", 410, latency, nil)
        case .retry(let status, let error, let latency, _): ("retry", status, latency, error.map { String($0.prefix(500)) })
        case .failed(let status, let error, let latency): ("failed", status, latency, error.map { String($0.prefix(500)) })
        }
    }

    /// The attempt kept, the delivery moved on (if this attempt still holds it), the endpoint's
    /// failure clock started or cleared; answers the endpoint's `failing_since` (null once
    /// delivered).
    static func outcomeQuery(_ due: Due, kind: String, code: Int?, latency: Int?, error: String?, after: Double?, sentAt: Date) -> PostgresQuery {
        """
        WITH quick AS (SELECT set_config('synchronous_commit', 'off', true)),
        attempt AS (
            INSERT INTO webhook_delivery_attempts (delivery_id, attempt, sent_at, answer_code, latency_ms, error, outcome)
            SELECT \(due.id), \(due.attempt), \(sentAt), \(code)::integer, \(latency)::integer, \(error)::text, \(kind) FROM quick
        ), delivery AS (
            UPDATE webhook_deliveries SET
                status = CASE \(kind) WHEN 'delivered' THEN 'delivered' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
                delivered_at = CASE WHEN \(kind) = 'delivered' THEN now() ELSE delivered_at END,
                last_status = \(code)::integer, last_error = \(error)::text, last_latency_ms = \(latency)::integer, locked_until = NULL,
                next_attempt_at = CASE WHEN \(kind) = 'retry' THEN now() + make_interval(secs => \(after ?? 0)) ELSE next_attempt_at END
            WHERE id = \(due.id) AND attempts = \(due.attempt)
        )
        UPDATE webhook_endpoints SET failing_since = CASE WHEN \(kind) IN ('delivered', 'gone') THEN NULL ELSE COALESCE(failing_since, now()) END
        WHERE id = \(due.endpointID) AND (\(kind) NOT IN ('delivered', 'gone') OR failing_since IS NOT NULL)
        RETURNING failing_since
        """
    }

    /// Disables an endpoint and cancels what it still had to receive. Returns the app and URL
    /// when this call disabled it (to tell the operator once).
    @discardableResult
    static func disable(endpoint: UUID, reason: String, on conn: PostgresConnection, logger: Logger) async throws -> (app: UUID, url: String)? {
        var found: (UUID, String)?
        for try await r in try await conn.run(
            """
            UPDATE webhook_endpoints SET disabled = true, disabled_reason = \(reason), updated_at = now()
            WHERE id = \(endpoint) AND NOT disabled RETURNING app_id, url
            """,
            logger: logger
        ).decode((UUID, String).self) { found = r }
        guard let found else { return nil }
        try await conn.run(
            """
            UPDATE webhook_deliveries SET status = 'cancelled', locked_until = NULL
            WHERE endpoint_id = \(endpoint) AND status IN ('pending', 'sending')
            """,
            logger: logger
        )
        return found
    }

    struct DeliveryView: Codable, Sendable {
        var id: Int64
        var eventID: UUID
        var eventType: String
        var status: String
        var attempts: Int
        var lastStatus: Int?
        var lastError: String?
        var latencyMs: Int?
        var nextAttemptAt: Date?
        var createdAt: Date
        var deliveredAt: Date?
        /// Every attempt, oldest first (#45).
        var history: [AttemptView]
        enum CodingKeys: String, CodingKey {
            case id
            case eventID = "event_id"
            case eventType = "event_type"
            case status, attempts
            case lastStatus = "answer_code"
            case lastError = "last_error"
            case latencyMs = "latency_ms"
            case nextAttemptAt = "next_attempt_at"
            case createdAt = "created_at"
            case deliveredAt = "delivered_at"
            case history
        }
    }

    /// One attempt: when it was sent, the receiver's answer (none when it could not be reached or
    /// did not answer in time), its latency, the error, and what followed.
    struct AttemptView: Codable, Sendable, Equatable {
        var attempt: Int
        var sentAt: Date
        var answerCode: Int?
        var latencyMs: Int?
        var error: String?
        var outcome: String
        enum CodingKeys: String, CodingKey {
            case attempt
            case sentAt = "sent_at"
            case answerCode = "answer_code"
            case latencyMs = "latency_ms"
            case error, outcome
        }
    }

    /// The endpoint's deliveries, newest first (nil for an unknown endpoint of this app).
    func deliveries(app: UUID, endpoint: UUID, before: Int64? = nil, limit: Int) async throws -> [DeliveryView]? {
        guard try await find(app: app, id: endpoint) != nil else { return nil }
        var out: [DeliveryView] = []
        for try await r in try await db.query(
            """
            SELECT d.id, d.event_id, v.type, d.status, d.attempts, d.last_status, d.last_error, d.last_latency_ms,
                   CASE WHEN d.status = 'pending' THEN d.next_attempt_at END, d.created_at, d.delivered_at
            FROM webhook_deliveries d JOIN webhook_events v ON v.id = d.event_id
            WHERE d.endpoint_id = \(endpoint) AND d.id < \(before ?? Int64.max) ORDER BY d.id DESC LIMIT \(limit)
            """,
            logger: logger
        ).decode((Int64, UUID, String, String, Int, Int?, String?, Int?, Date?, Date, Date?).self) {
            out.append(
                DeliveryView(
                    id: r.0,
                    eventID: r.1,
                    eventType: r.2,
                    status: r.3,
                    attempts: r.4,
                    lastStatus: r.5,
                    lastError: r.6,
                    latencyMs: r.7,
                    nextAttemptAt: r.8,
                    createdAt: r.9,
                    deliveredAt: r.10,
                    history: []
                )
            )
        }
        guard !out.isEmpty else { return out }
        var attempts: [Int64: [AttemptView]] = [:]
        for try await r in try await db.query(
            """
            SELECT delivery_id, attempt, sent_at, answer_code, latency_ms, error, outcome FROM webhook_delivery_attempts
            WHERE delivery_id = ANY(\(out.map(\.id))) ORDER BY delivery_id, id
            """,
            logger: logger
        ).decode((Int64, Int, Date, Int?, Int?, String?, String).self) {
            attempts[r.0, default: []].append(AttemptView(attempt: r.1, sentAt: r.2, answerCode: r.3, latencyMs: r.4, error: r.5, outcome: r.6))
        }
        for i in out.indices { out[i].history = attempts[out[i].id] ?? [] }
        return out
    }

    /// Sends a delivery again now (whatever its state; its attempts start over). False for an
    /// unknown delivery of this app's endpoint, or one whose endpoint is disabled.
    func replay(app: UUID, endpoint: UUID, delivery: Int64) async throws -> Bool {
        for try await _ in try await db.query(
            """
            UPDATE webhook_deliveries d SET status = 'pending', attempts = 0, next_attempt_at = now(), locked_until = NULL
            FROM webhook_endpoints e
            WHERE d.id = \(delivery) AND d.endpoint_id = \(endpoint) AND e.id = d.endpoint_id AND e.app_id = \(app) AND NOT e.disabled
              AND d.status <> 'sending'
            RETURNING 1
            """,
            logger: logger
        ) {
            return true
        }
        return false
    }
}

/// An event as sent: `{"type", "id", "app_id", "created_at", "version", "data"}`.
struct WebhookEvent: Codable, Sendable {
    init(type: WebhookEventType, id: UUID = UUID(), appID: UUID, createdAt: Date, version: Int64, data: [String: JSONValue]) {
        self.init(type: type.rawValue, id: id, appID: appID, createdAt: createdAt, version: version, data: data)
    }
    init(type: String, id: UUID, appID: UUID, createdAt: Date, version: Int64, data: [String: JSONValue]) {
        self.type = type
        self.id = id
        self.appID = appID
        self.createdAt = createdAt
        self.version = version
        self.data = data
    }

    var type: String
    var id: UUID
    var appID: UUID
    var createdAt: Date
    var version: Int64
    var data: [String: JSONValue]
    enum CodingKeys: String, CodingKey {
        case type, id
        case appID = "app_id"
        case createdAt = "created_at"
        case version, data
    }

    /// Ids lowercase, as the `webhook-id` header carries them (a receiver compares the two).
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(type, forKey: .type)
        try c.encode(id.lowercasedString, forKey: .id)
        try c.encode(appID.lowercasedString, forKey: .appID)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(version, forKey: .version)
        try c.encode(data, forKey: .data)
    }
}

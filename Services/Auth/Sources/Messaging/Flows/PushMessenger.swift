import AuthDomain
import Foundation
import Logging
import PostgresNIO
import Prometheus
import ServiceKit
import WireTypes

/// The messenger (#30): a notification asked for by a service's outbox, by an operator or by a
/// test is recorded once per key and sent by a job, to each of the user's devices through APNs
/// or FCM, after the user's consent, the app's daily cap and its templates have had their say.
/// A broadcast (a content update reaching many players) is one notification and one job, sent a
/// batch of users at a time over the multiplexed connections.
struct PushMessenger: Sendable {
    let store: PushStore
    let apns: APNsClient
    let fcm: FCMClient
    let credentials: TenantSettings<PushCredentials>
    let options: TenantSettings<PushOptions>
    let registry: PrometheusCollectorRegistry
    let logger: Logger

    static let queue = "messaging"
    static let sendJob = "push.send"
    /// Users read and decided together; sends in flight at once within a batch.
    static let batchUsers = 500
    static let inFlight = 200
    /// A send the provider asked us to retry is tried again this many rounds, then given up.
    static let maxRounds = 6

    struct JobPayload: Codable, Sendable {
        var notificationID: Int64
        var round: Int
        enum CodingKeys: String, CodingKey {
            case notificationID = "notification_id"
            case round
        }
    }

    // MARK: asking

    /// Registers or moves a device's token (one token belongs to one user of one app; at most 20
    /// devices per user), the user's rows locked in a fixed order.
    func register(app: UUID, user: UUID, _ device: PushDevice) async throws -> PushStore.RegisterOutcome {
        try await store.db.withTransaction(logger: logger) { conn in try await store.register(app: app, user: user, device, on: conn) }
    }

    /// Records the notification once per (app, key) and queues its sending. Returns the id and
    /// whether this call created it (false: the same key was asked before).
    func request(
        app: UUID,
        key: String,
        kind: PushKind,
        users: [UUID],
        data: [String: String],
        requestedBy: String,
        queueJob: Bool = true
    ) async throws -> (id: Int64, created: Bool) {
        // The notification and its job in one transaction: a redelivery queues nothing again.
        let created = try await store.db.withTransaction(logger: logger) { conn -> Int64? in
            guard let id = try await store.request(app: app, key: key, kind: kind, users: users, data: data, requestedBy: requestedBy, on: conn)
            else { return nil }
            if queueJob {
                try await JobQueue.enqueue(
                    on: conn,
                    queue: Self.queue,
                    kind: Self.sendJob,
                    payload: JobPayload(notificationID: id, round: 1),
                    maxAttempts: 5,
                    uniqueKey: "push:\(id):1",
                    logger: logger
                )
            }
            return id
        }
        if let id = created { return (id, true) }
        guard let id = try await store.existing(app: app, key: key) else { throw AppError(AuthErrorCode.notificationConflict, "Try again") }
        return (id, false)
    }

    // MARK: sending

    /// The job: every user of the notification, a batch at a time. Sends the provider asked to
    /// retry are queued again (after its `Retry-After`, at least 5 s), the rest recorded.
    func run(_ job: Job) async throws {
        let payload = try job.decode(JobPayload.self)
        let retryAfter = try await deliver(notificationID: payload.notificationID, round: payload.round)
        guard let retryAfter else { return }
        let round = payload.round + 1
        let logger = self.logger
        try await store.db.withConnection { conn in
            try await JobQueue.enqueue(
                on: conn,
                queue: Self.queue,
                kind: Self.sendJob,
                payload: JobPayload(notificationID: payload.notificationID, round: round),
                runAfter: Double(retryAfter),
                maxAttempts: 5,
                uniqueKey: "push:\(payload.notificationID):\(round)",
                logger: logger
            )
        }
    }

    /// Sends what is not sent yet; returns the delay before another round when a provider asked
    /// for one (nil: nothing left to retry).
    @discardableResult
    func deliver(notificationID: Int64, round: Int = 1) async throws -> Int? {
        guard let n = try await store.notification(notificationID) else { return nil }
        let opts = try await options.value(for: n.appID) ?? PushOptions()
        let creds = try await credentials.value(for: n.appID) ?? PushCredentials()
        var retryAfter: Int?
        var start = 0
        while start < n.users.count {
            let batch = Array(n.users[start..<min(start + Self.batchUsers, n.users.count)])
            start += batch.count
            let audience = try await store.audience(app: n.appID, notification: n.id, users: batch)
            var rows: [PushStore.Delivery] = []
            var sends: [(user: UUID, device: PushDevice, send: PushSend)] = []
            for user in batch {
                guard let consent = audience.consent[user] else { continue }  // not a live user of this app
                let devices = audience.devices[user] ?? []
                if devices.isEmpty {
                    if !audience.done.contains(PushStore.Audience.doneKey(user, nil)) {
                        rows.append(.init(user: user, device: nil, provider: nil, outcome: "no_device", status: nil, reason: nil))
                    }
                    continue
                }
                for device in devices where !audience.done.contains(PushStore.Audience.doneKey(user, device.deviceID)) {
                    let decision = PushDecision.decide(
                        kind: n.kind,
                        data: n.data,
                        consent: consent,
                        options: opts,
                        sentToday: audience.sentToday[user] ?? 0,
                        locale: device.locale
                    )
                    if case .skip(let outcome) = decision {
                        rows.append(.init(user: user, device: device.deviceID, provider: nil, outcome: outcome, status: nil, reason: nil))
                        continue
                    }
                    sends.append(
                        (
                            user, device,
                            PushSend(
                                token: device.token,
                                environment: device.environment,
                                kind: n.kind,
                                decision: decision,
                                data: n.data,
                                id: UUID()
                            )
                        )
                    )
                }
            }
            // The sends, at most `inFlight` at once; HTTP/2 multiplexes them on one connection.
            var results: [(Int, PushResult, String)] = []
            var next = 0
            await withTaskGroup(of: (Int, PushResult, String).self) { group in
                func add(_ i: Int) {
                    let s = sends[i]
                    group.addTask { await send(s.send, app: n.appID, platform: s.device.platform, credentials: creds, index: i) }
                }
                while next < min(Self.inFlight, sends.count) {
                    add(next)
                    next += 1
                }
                for await r in group {
                    results.append(r)
                    if next < sends.count {
                        add(next)
                        next += 1
                    }
                }
            }
            var credentialErrors: [String: String] = [:]
            for (i, result, provider) in results {
                let s = sends[i]
                var outcome = result.outcome
                switch result.action {
                case .removeToken: try await store.removeDead(app: n.appID, token: s.device.token)
                case .retry(let after):
                    if round >= Self.maxRounds { outcome = "failed" } else { retryAfter = max(retryAfter ?? 5, min(after ?? 5, 3600)) }
                case .credentialsRefused: credentialErrors[provider] = "\(result.status.map(String.init) ?? "-") \(result.reason ?? "")"
                case .delivered, .failed: break
                }
                counter(provider: provider, outcome: outcome).increment()
                rows.append(
                    .init(user: s.user, device: s.device.deviceID, provider: provider, outcome: outcome, status: result.status, reason: result.reason)
                )
            }
            try await store.record(notification: n.id, app: n.appID, kind: n.kind, rows)
            for (provider, error) in credentialErrors {
                logger.error(
                    "push credentials refused; the operator must set them again",
                    metadata: ["app_id": "\(n.appID.lowercasedString)", "provider": "\(provider)", "error": "\(error)"]
                )
                await store.recordCredentialError(app: n.appID, provider: provider, error: error)
            }
        }
        return retryAfter
    }

    private func send(_ s: PushSend, app: UUID, platform: PushPlatform, credentials: PushCredentials, index: Int) async -> (Int, PushResult, String) {
        switch platform {
        case .ios:
            guard let c = credentials.apns else { return (index, PushResult(action: .failed, status: nil, reason: "no APNs key set"), "apns") }
            return (index, await apns.send(s, app: app, credentials: c), "apns")
        case .android:
            guard let c = credentials.fcm else {
                return (index, PushResult(action: .failed, status: nil, reason: "no FCM service account set"), "fcm")
            }
            return (index, await fcm.send(s, credentials: c), "fcm")
        }
    }

    static var sends: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "push_sends",
            unitName: "total",
            helpText: "Push sends by provider (apns, fcm) and outcome (sent, removed_token, retrying, failed, credentials_refused)"
        )
    }

    private func counter(provider: String, outcome: String) -> Counter {
        registry.makeCounter(descriptor: Self.sends, labels: [("provider", provider), ("outcome", outcome)])
    }
}

import AuthDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import Synchronization

/// The webhooks' sender (#33), a service of auth's group: claims due deliveries (at most
/// `perEndpoint` in flight for one endpoint, `maxInFlight` in all), posts each signed event, and
/// records the answer: a 2xx ends it, 410 disables the endpoint, anything else is tried again on
/// Standard Webhooks' schedule; an endpoint failing every attempt for 5 days is disabled and the
/// app's support address told. It looks for due deliveries every `pollInterval` (an event
/// reaches its receiver well within a second of its commit).
struct WebhookDelivery: Service {
    let db: DatabasePool
    let store: WebhookStore
    let sender: WebhookSender
    /// The core tells the app's operator (messaging sends no mail of its own).
    let notice: any DisabledEndpointNotice
    let logger: Logger
    var pollInterval: Duration = .milliseconds(200)
    var maxInFlight = 256
    /// One endpoint's share: a slow or dead one holds 16 slots at most, the rest go on.
    var perEndpoint = 16
    /// Longer than a send's 15 s timeout: a live sender never loses its delivery.
    var lease: Duration = .seconds(30)

    func run() async throws {
        final class Busy: Sendable { let count = Mutex(0) }
        let busy = Busy()
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                while !Task.isCancelled {
                    let free = maxInFlight - busy.count.withLock { $0 }
                    var claimed = 0
                    if free > 0 {
                        do {
                            let due = try await store.claim(limit: free, perEndpoint: perEndpoint, lease: lease)
                            claimed = due.count
                            for d in due {
                                busy.count.withLock { $0 += 1 }
                                group.addTask {
                                    await deliver(d)
                                    busy.count.withLock { $0 -= 1 }
                                }
                            }
                        } catch {
                            logger.warning("webhook claim failed", metadata: ["error": "\(String(reflecting: error))"])
                        }
                    }
                    // While deliveries are in flight a slot frees soon: look again shortly (a busy
                    // endpoint's next events wait for its slots, not for the poll).
                    let inFlight = busy.count.withLock { $0 }
                    if claimed == 0 || free == 0 { try? await Task.sleep(for: inFlight > 0 ? .milliseconds(10) : pollInterval) }
                }
            }
        }
    }

    /// Sends every due delivery once (tests and tools; `run` is the service).
    @discardableResult
    func runOnce() async throws -> Int {
        let due = try await store.claim(limit: maxInFlight, perEndpoint: perEndpoint, lease: lease)
        await withTaskGroup(of: Void.self) { group in
            for d in due { group.addTask { await deliver(d) } }
        }
        return due.count
    }

    func deliver(_ due: WebhookStore.Due) async {
        let outcome: WebhookStore.Outcome
        let sentAt = Date()
        do {
            let answer = try await sender.send(
                url: due.url,
                eventID: due.eventID,
                body: Data(due.body.utf8),
                secrets: due.secrets,
                timestamp: Int64(Date().timeIntervalSince1970)
            )
            switch WebhookRetry.decide(status: answer.status, attempt: due.attempt, jitter: Double.random(in: -0.1...0.1)) {
            case .delivered: outcome = .delivered(status: answer.status, latencyMs: answer.latencyMs)
            case .disableEndpoint: outcome = .gone(latencyMs: answer.latencyMs)
            case .retry(let after): outcome = .retry(status: answer.status, error: nil, latencyMs: answer.latencyMs, after: after)
            case .failed: outcome = .failed(status: answer.status, error: nil, latencyMs: answer.latencyMs)
            }
        } catch {
            let text = String(describing: error)
            if case .retry(let after) = WebhookRetry.decide(status: nil, attempt: due.attempt, jitter: Double.random(in: -0.1...0.1)) {
                outcome = .retry(status: nil, error: text, latencyMs: nil, after: after)
            } else {
                outcome = .failed(status: nil, error: text, latencyMs: nil)
            }
        }
        do {
            if case .gone(let latency) = outcome {
                try await db.withTransaction(logger: logger) { try await store.recordGone(due, latencyMs: latency, sentAt: sentAt, on: $0) }
            } else if let failingSince = try await store.record(due, outcome, sentAt: sentAt),
                Date().timeIntervalSince(failingSince) >= WebhookRetry.disableAfter,
                let (app, url) = try await db.withTransaction(
                    logger: logger,
                    {
                        try await WebhookStore.disable(endpoint: due.endpointID, reason: "failing for 5 days", on: $0, logger: logger)
                    }
                )
            {
                await notice.endpointDisabled(app: app, url: url)
            }
        } catch {
            // The lease runs out and another attempt is made: a receiver dedupes on webhook-id.
            logger.warning("could not record a webhook delivery", metadata: ["delivery": "\(due.id)", "error": "\(error)"])
        }
    }
}

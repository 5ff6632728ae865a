import Foundation
import OpenAPIRuntime

/// One event of the signed-in user's live stream (#46): the event as the documents type it,
/// and the cursor to resume after it (nil for the events a stream cannot resume after).
public struct LiveUpdate: Sendable {
    public var event: AuthAPI.Components.Schemas.LiveEvent
    public var cursor: String?
    public var type: AuthAPI.Components.Schemas.LiveEvent._TypePayload { event._type }
}

extension AppBackend {
    /// The signed-in user's own changes as they commit: a `state.snapshot` first (or every event
    /// after `cursor`), then each purchase, credit, consent, conflict, download and campaign of
    /// the user, from any device. It reconnects by itself with the last cursor (nothing is lost
    /// or repeated across a reconnect within the server's retention), waiting 0.5 s, 1 s, 2 s, …
    /// up to 30 s between failed attempts, and refreshes the access token once when it is
    /// refused. It ends after `session.revoked`, `account.deleted` or `stream.replaced` (another
    /// stream of this user took its place), or when the task is cancelled.
    ///
    ///     for try await update in backend.live() {
    ///         switch update.type {
    ///         case .subscription_updated: await store.reloadSubscription()
    ///         case .account_deleted: await session.signOut()
    ///         default: break
    ///         }
    ///     }
    public func live(after cursor: String? = nil, maxBackoff: Duration = .seconds(30)) -> AsyncThrowingStream<LiveUpdate, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var cursor = cursor
                var failures = 0
                var refreshed = false
                while !Task.isCancelled {
                    do {
                        let response = try await auth.getLiveEvents(query: .init(after: cursor))
                        switch response {
                        case .ok(let ok):
                            failures = 0
                            refreshed = false
                            for try await sse in try ok.body.textEventStream.asDecodedServerSentEvents() {
                                guard let data = sse.data,
                                    let event = try? Self.liveDecoder.decode(
                                        AuthAPI.Components.Schemas.LiveEvent.self,
                                        from: Data(data.utf8)
                                    )
                                else {
                                    // A type this client does not know yet: skipped, its cursor kept.
                                    if let id = sse.id { cursor = id }
                                    continue
                                }
                                if let id = sse.id { cursor = id }
                                continuation.yield(LiveUpdate(event: event, cursor: sse.id))
                                switch event._type {
                                case .session_revoked, .account_deleted, .stream_replaced:
                                    continuation.finish()
                                    return
                                default: break
                                }
                            }
                        case .unauthorized where !refreshed:
                            // The access token expired while the stream was away: one refresh.
                            refreshed = true
                            try await refresh()
                            continue
                        case .unauthorized, .forbidden:
                            continuation.finish(throwing: SignInRequired())
                            return
                        default:
                            failures += 1
                        }
                    } catch is CancellationError {
                        break
                    } catch is SignInRequired {
                        continuation.finish(throwing: SignInRequired())
                        return
                    } catch {
                        failures += 1
                    }
                    if failures > 0 {
                        let wait = min(maxBackoff, .milliseconds(500) * (1 << min(failures - 1, 6)))
                        try? await Task.sleep(for: wait)
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The events' dates are RFC 3339, with or without fractions of a second.
    static var liveDecoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { d in
            let text = try d.singleValueContainer().decode(String.self)
            let withFraction = ISO8601DateFormatter()
            withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            if let date = withFraction.date(from: text) ?? ISO8601DateFormatter().date(from: text) { return date }
            throw DecodingError.dataCorrupted(.init(codingPath: d.codingPath, debugDescription: "not an RFC 3339 date: \(text)"))
        }
        return decoder
    }
}

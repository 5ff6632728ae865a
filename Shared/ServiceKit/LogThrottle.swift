import Logging
import Synchronization

/// Says a repeated warning at most once per interval, with how many were held back: a
/// dependency's outage (subscription down, the database restarting) is one line per interval
/// in the log, not one per request.
public final class LogThrottle: Sendable {
    private let interval: Duration
    private let last = Mutex([String: (at: ContinuousClock.Instant, held: Int)]())

    public init(interval: Duration = .seconds(10)) { self.interval = interval }

    /// Logs `message` unless the same message was logged less than `interval` ago.
    public func warning(_ logger: Logger, _ message: Logger.Message, metadata: Logger.Metadata = [:]) {
        let key = message.description
        let now = ContinuousClock.now
        let held: Int? = last.withLock { seen in
            if let previous = seen[key], previous.at.duration(to: now) < interval {
                seen[key]?.held += 1
                return nil
            }
            defer { seen[key] = (now, 0) }
            return seen[key]?.held ?? 0
        }
        guard let held else { return }
        var metadata = metadata
        if held > 0 { metadata["repeated"] = "\(held) times since the last report" }
        logger.warning(message, metadata: metadata)
    }
}

import Foundation
import Logging
import ServiceKit
import Synchronization
import TestSupport
import XCTest

final class RateLimiterTests: XCTestCase {
    func testFixedWindowAllowsLimitThenRefusesUntilTheWindowTurns() async throws {
        let clock = MovableClock(Date(timeIntervalSince1970: 1_800_000_000))
        let runtime = kitRuntime(.auth, clock: clock)
        try await withMigratedRuntime(runtime) { runtime in
            let limiter = RateLimiter(client: runtime.db, clock: clock, logger: runtime.logger)
            let key = UUID().uuidString
            for i in 1...5 {
                let d = try await limiter.hit(scope: "test-login", key: key, limit: 5, window: 900)
                XCTAssertTrue(d.allowed, "hit \(i)")
                XCTAssertEqual(d.remaining, 5 - i)
            }
            clock.advance(by: 100)
            let refused = try await limiter.hit(scope: "test-login", key: key, limit: 5, window: 900)
            XCTAssertFalse(refused.allowed)
            XCTAssertEqual(refused.retryAfter, 800)
            // Another key is counted apart.
            let other = try await limiter.hit(scope: "test-login", key: key + "-other", limit: 5, window: 900)
            XCTAssertTrue(other.allowed)

            do {
                try await limiter.enforce(scope: "test-login", key: key, limit: 5, window: 900)
                XCTFail("expected 429")
            } catch let e as AppError {
                XCTAssertEqual(e.status.code, 429)
                XCTAssertEqual(e.extra["retry_after"], .int(800))
            }
            clock.advance(by: 800)
            let next = try await limiter.hit(scope: "test-login", key: key, limit: 5, window: 900)
            XCTAssertTrue(next.allowed)
        }
    }

    /// The count commits asynchronously, but only its own transaction: a pooled connection that
    /// served a hit must commit the next request's facts with the WAL flushed, as before.
    func testAsynchronousCommitOfACountDoesNotLeakToTheConnection() async throws {
        let runtime = kitRuntime(.auth)
        try await withMigratedRuntime(runtime) { runtime in
            let limiter = RateLimiter(client: runtime.db, clock: runtime.clock, logger: runtime.logger)
            let key = UUID().uuidString
            for _ in 1...5 {
                _ = try await limiter.hit(scope: "test-async", key: key, limit: 100, window: 60)
                let rows = try await runtime.db.query("SHOW synchronous_commit")
                for try await setting in rows.decode(String.self) {
                    XCTAssertEqual(setting, "on", "a later statement on the hit's connection commits synchronously")
                }
            }
            let counted = try await limiter.hit(scope: "test-async", key: key, limit: 100, window: 60)
            XCTAssertEqual(counted.remaining, 94, "every hit is counted")
        }
    }

    func testSlidingWindowCountsThePreviousWindowsOverlap() async throws {
        let clock = MovableClock(Date(timeIntervalSince1970: TimeInterval(1_800_000_000 - 1_800_000_000 % 60)))
        let runtime = kitRuntime(.auth, clock: clock)
        try await withMigratedRuntime(runtime) { runtime in
            let limiter = RateLimiter(client: runtime.db, clock: clock, logger: runtime.logger)
            let key = UUID().uuidString
            for _ in 1...10 {
                let d = try await limiter.hit(scope: "test-sliding", key: key, limit: 10, window: 60, mode: .sliding)
                XCTAssertTrue(d.allowed)
            }
            // 15 s into the next window, 3/4 of the previous 10 still count: 7 + 1 = 8 ≤ 10.
            clock.advance(by: 75)
            let a = try await limiter.hit(scope: "test-sliding", key: key, limit: 10, window: 60, mode: .sliding)
            XCTAssertTrue(a.allowed)
            _ = try await limiter.hit(scope: "test-sliding", key: key, limit: 10, window: 60, mode: .sliding)
            _ = try await limiter.hit(scope: "test-sliding", key: key, limit: 10, window: 60, mode: .sliding)
            let refused = try await limiter.hit(scope: "test-sliding", key: key, limit: 10, window: 60, mode: .sliding)
            XCTAssertFalse(refused.allowed, "4 in this window + 7 carried over = 11 > 10")
        }
    }
}

/// A burst of the same warning is one line, and the next report says how many were held back.
final class LogThrottleTests: XCTestCase {
    final class Sink: Sendable { let lines = Mutex([(String, Logger.Metadata?)]()) }
    struct Capture: LogHandler {
        let sink: Sink
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { sink.lines.withLock { $0.append((event.message.description, event.metadata)) } }
    }

    func testRepeatedWarningsAreSaidOncePerInterval() async throws {
        let sink = Sink()
        let logger = Logger(label: "throttle-test") { _ in Capture(sink: sink) }
        let throttle = LogThrottle(interval: .milliseconds(300))
        for _ in 0..<100 { throttle.warning(logger, "subscription unreachable") }
        throttle.warning(logger, "another warning")
        XCTAssertEqual(sink.lines.withLock { $0.map(\.0) }, ["subscription unreachable", "another warning"])
        try await Task.sleep(for: .milliseconds(350))
        throttle.warning(logger, "subscription unreachable")
        let last = sink.lines.withLock { $0.last }
        XCTAssertEqual(last?.0, "subscription unreachable")
        XCTAssertEqual(last?.1?["repeated"], "99 times since the last report")
    }
}

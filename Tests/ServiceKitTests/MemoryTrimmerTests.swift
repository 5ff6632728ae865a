import Logging
import ServiceLifecycle
import XCTest

@testable import ServiceKit

/// The trimmer is one of each service's long-running services: whether it trims or is switched
/// off (`MALLOC_TRIM_SECONDS=0`), it runs until the shutdown, because a service that returns
/// ends the whole process.
final class MemoryTrimmerTests: XCTestCase {
    func testTheTrimmerRunsUntilShutdownWhetherOnOrOff() async throws {
        let group = ServiceGroup(
            services: [MemoryTrimmer(interval: .zero), MemoryTrimmer(interval: .milliseconds(10))],
            gracefulShutdownSignals: [],
            logger: Logger(label: "trimmer-test")
        )
        let running = Task { try await group.run() }
        try await Task.sleep(for: .milliseconds(300))
        await group.triggerGracefulShutdown()
        // Switched off, the trimmer used to return at once: the group failed ("a service has
        // finished unexpectedly") and took the service down with it.
        try await running.value
    }
}

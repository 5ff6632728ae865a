import CCurl
import Foundation
import ServiceLifecycle

/// After a burst (a flood of requests, a push fan-out, a download) glibc keeps the freed heap
/// mapped, so a service's resident size stays at its peak for good and a container's limit is
/// met by memory nothing uses. Every `interval` the free pages go back to the OS
/// (`malloc_trim`: the top of each arena and the free pages inside it). It costs a walk of the
/// free lists, a millisecond or so, and nothing when there is nothing to give back.
/// `MALLOC_TRIM_SECONDS` (default 10; 0: never).
struct MemoryTrimmer: Service {
    let interval: Duration

    func run() async throws {
        // A service that returns ends the whole group: switched off, it waits for the shutdown.
        guard interval > .zero else { return try await gracefulShutdown() }
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                // Cancelled at the shutdown: a clean end, not an error.
                do { try await Task.sleep(for: interval) } catch { return }
                #if canImport(Glibc)
                _ = malloc_trim(0)
                #endif
            }
        }
    }
}

import CSwiftHooks
import NIOCore
import NIOPosix
import Synchronization

/// Swift concurrency's global executor, run on NIO's event loops.
///
/// Hummingbird and PostgresNIO do their I/O on the event loops; with Swift's own pool as the
/// global executor every route and query continuation would hop to that pool and back. NIO's
/// `unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor` moves global jobs
/// onto the loops, but runs each one *isolated to the loop* (the loop as its serial executor).
/// Every call into, or return from, a nonisolated async function (each middleware, `next`,
/// every library `async` function) then needs the generic executor instead, so the runtime
/// enqueues the task again: 50–80 enqueues per request measured on a cached read.
///
/// Here a global job runs as the default pool runs it: on the generic executor, with no task
/// executor. Nonisolated code then continues in place and only real suspensions (a read, a
/// query answer, an actor) enqueue. Jobs stay on the loop they were scheduled from (NIO's
/// `any()` prefers the current loop), so an answer is written from the thread that read it.
public enum EventLoopGlobalExecutor {
    typealias EnqueueGlobalHook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void

    /// Global jobs enqueued since `install()`; `/metrics` reports it, and a test holds the
    /// enqueues per request down with it.
    static let enqueued = Atomic<Int>(0)

    /// Jobs enqueued on the global executor so far (0 until installed).
    public static var enqueuedJobs: Int { enqueued.load(ordering: .relaxed) }

    /// Installs the hook; call once, first thing in `main`. Returns false (and leaves Swift's
    /// own pool in place) when another hook is already installed.
    @discardableResult
    public static func install() -> Bool {
        // Linked, not found with dlsym: a `--static-swift-stdlib` binary exports none of the
        // runtime's symbols, and there the lookup failed and left Swift's own pool in place.
        let slot = UnsafeMutableRawPointer(cswift_enqueue_global_hook_slot()).assumingMemoryBound(to: UnsafeRawPointer?.self)
        guard slot.pointee == nil else { return false }
        return withUnsafeTemporaryAllocation(of: EnqueueGlobalHook.self, capacity: 1) { hook in
            hook.baseAddress!.initialize(to: { job, _ in
                EventLoopGlobalExecutor.enqueued.add(1, ordering: .relaxed)
                MultiThreadedEventLoopGroup.singleton.any().execute {
                    job.runSynchronously(on: EventLoopGlobalExecutor.generic)
                }
            })
            // A thin function value is one code pointer.
            slot.pointee = hook.baseAddress!.withMemoryRebound(to: UnsafeRawPointer.self, capacity: 1) { $0.pointee }
            return true
        }
    }

    /// The runtime's generic executor (`SerialExecutorRef::generic()`: no identity, no
    /// implementation): what Swift's own pool passes when it runs a global job.
    static var generic: UnownedSerialExecutor {
        unsafeBitCast((UInt(0), UInt(0)), to: UnownedSerialExecutor.self)
    }
}

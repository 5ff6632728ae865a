import Foundation
import NIOCore
import NIOPosix
import ServiceKit
import Synchronization
import XCTest

/// The group commit, without a database: rows of concurrent callers written together, each
/// caller back only once its row is written, a refused row failing its own caller only.
final class GroupCommitTests: XCTestCase {
    final class Written: Sendable {
        let batches = Mutex<[[Int]]>([])
        var rows: [Int] { batches.withLock { $0.flatMap { $0 } } }
        var sizes: [Int] { batches.withLock { $0.map(\.count) } }
        /// The writes under way now and the most at once, for `slowly`.
        let running = Mutex((now: 0, most: 0))

        /// A write that takes 20 ms (a commit's fsync), counted while it runs.
        func slowly(_ batch: [Int]) async throws {
            running.withLock {
                $0.now += 1
                $0.most = max($0.most, $0.now)
            }
            try await Task.sleep(for: .milliseconds(20))
            batches.withLock { $0.append(batch) }
            running.withLock { $0.now -= 1 }
        }
    }

    func testConcurrentRowsAreWrittenTogetherOnceEachAndCallersWaitForTheirWrite() async throws {
        let written = Written()
        let commit = GroupCommit<Int>(maxBatch: 50) { batch in
            try await Task.sleep(for: .milliseconds(20))  // a commit's fsync: rows pile up meanwhile
            written.batches.withLock { $0.append(batch) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<300 {
                group.addTask {
                    try await commit.submit(i)
                    // Back only after the batch holding this row was written.
                    XCTAssertTrue(written.rows.contains(i), "row \(i) answered before it was written")
                }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(written.rows.sorted(), Array(0..<300), "each row once")
        XCTAssertLessThan(written.sizes.count, 300 / 2, "rows were grouped: \(written.sizes)")
        XCTAssertLessThanOrEqual(written.sizes.max() ?? 0, 50)
    }

    /// #48: with several writes in flight a row does not wait for a write under way when a
    /// slot is free, and never more than `inFlight` writes run at once.
    func testSeveralWritesOverlapUpToTheLimitAndEachRowIsWrittenOnce() async throws {
        let written = Written()
        let commit = GroupCommit<Int>(maxBatch: 50, inFlight: 4, write: written.slowly)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<300 {
                group.addTask {
                    try await commit.submit(i)
                    XCTAssertTrue(written.rows.contains(i), "row \(i) answered before it was written")
                }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(written.rows.sorted(), Array(0..<300), "each row once")
        XCTAssertEqual(written.running.withLock { $0.most }, 4, "writes overlapped up to the limit, never beyond")
        XCTAssertLessThan(written.sizes.count, 300 / 2, "rows were still grouped: \(written.sizes)")
    }

    /// #48: a write beyond the first starts only once enough rows wait for it; fewer wait for
    /// the write under way and go together after it.
    func testAnotherWriteStartsOnlyWhenEnoughRowsWait() async throws {
        let written = Written()
        let commit = GroupCommit<Int>(maxBatch: 50, inFlight: 4, extraWriteAt: 16, write: written.slowly)
        func submitAll(_ rows: Range<Int>) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in rows {
                    group.addTask {
                        try await commit.submit(i)
                        XCTAssertTrue(written.rows.contains(i), "row \(i) answered before it was written")
                    }
                }
                try await group.waitForAll()
            }
        }
        // A write under way, then 9 rows: too few for another write, they wait for it.
        let first = Task { try await commit.submit(0) }
        // (`most`, not `now`: a poll that wakes late must not miss a write already over.)
        while written.running.withLock({ $0.most }) == 0 { try await Task.sleep(for: .milliseconds(1)) }
        try await submitAll(1..<10)
        try await first.value
        XCTAssertEqual(written.running.withLock { $0.most }, 1, "9 rows waiting never started a second write: \(written.sizes)")
        XCTAssertLessThan(written.sizes.count, 10, "they went together after the write under way: \(written.sizes)")
        try await submitAll(10..<300)
        XCTAssertEqual(written.running.withLock { $0.most }, 4, "a burst overlapped up to the limit")
        XCTAssertEqual(written.rows.sorted(), Array(0..<300), "each row once")
    }

    func testALoneRowIsWrittenAtOnce() async throws {
        let written = Written()
        let commit = GroupCommit<Int> { batch in written.batches.withLock { $0.append(batch) } }
        try await commit.submit(7)
        try await commit.submit(8)
        XCTAssertEqual(written.sizes, [1, 1])
    }

    struct Refused: Error {}

    func testARefusedRowFailsItsOwnCallerOnly() async throws {
        let written = Written()
        let commit = GroupCommit<Int> { batch in
            try await Task.sleep(for: .milliseconds(10))
            if batch.contains(13) { throw Refused() }
            written.batches.withLock { $0.append(batch) }
        }
        let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
            for i in 0..<40 {
                group.addTask {
                    do {
                        try await commit.submit(i)
                        return (i, true)
                    } catch { return (i, false) }
                }
            }
            var out: [Int: Bool] = [:]
            for await (i, ok) in group { out[i] = ok }
            return out
        }
        XCTAssertEqual(outcomes.filter { !$0.value }.map(\.key), [13])
        XCTAssertEqual(written.rows.sorted(), (0..<40).filter { $0 != 13 })
    }

    /// A task executor on one event loop (as the services run requests on their connection's
    /// loop) that counts the jobs handed to it from any other thread.
    final class OnLoop: TaskExecutor {
        let loop: any EventLoop
        let fromElsewhere = Atomic<Int>(0)
        init(_ loop: any EventLoop) { self.loop = loop }
        func enqueue(_ job: consuming ExecutorJob) {
            if !loop.inEventLoop { fromElsewhere.add(1, ordering: .relaxed) }
            let job = UnownedJob(job)
            loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    /// #48: a caller is resumed from the loop it submitted on, not from the writer's thread,
    /// which would carry the rest of every request of the batch (and their answers back).
    /// A job handed to a loop from elsewhere is that resume; each task's start is the other.
    func testEachCallerIsResumedFromItsOwnLoop() async throws {
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let executors = loops.makeIterator().map(OnLoop.init)
        let written = Written()
        let commit = GroupCommit<Int>(maxBatch: 50, write: written.slowly)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask(executorPreference: executors[i % 2]) {
                    try await commit.submit(i)
                    XCTAssertTrue(executors[i % 2].loop.inEventLoop, "row \(i) goes on on its own loop")
                }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(written.rows.sorted(), Array(0..<40), "each row once")
        XCTAssertLessThan(written.sizes.count, 40 / 2, "rows were grouped: \(written.sizes)")
        for (n, executor) in executors.enumerated() {
            XCTAssertEqual(
                executor.fromElsewhere.load(ordering: .relaxed),
                20,
                "loop \(n): only its 20 tasks' starts came from another thread, no resume"
            )
        }
        try await loops.shutdownGracefully()
    }
}

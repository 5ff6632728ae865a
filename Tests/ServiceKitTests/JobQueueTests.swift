import Foundation
import PostgresNIO
import ServiceKit
import Synchronization
import TestSupport
import XCTest

final class JobQueueTests: XCTestCase {
    /// Two workers on one queue, 1,000 jobs: every job runs exactly once.
    func testTwoWorkersRunEachOfAThousandJobsExactlyOnce() async throws {
        let runtime = kitRuntime(.offline)
        try await withMigratedRuntime(runtime) { runtime in
            let queueName = "test-\(UUID().uuidString)"
            let queue = JobQueue(client: runtime.db, queue: queueName, logger: runtime.logger)
            try await runtime.db.withTransaction(logger: runtime.logger) { conn in
                for i in 0..<1000 {
                    try await JobQueue.enqueue(on: conn, queue: queueName, kind: "count", payload: ["n": i], logger: runtime.logger)
                }
            }
            let runs = Mutex([Int: Int]())
            let perWorker = Mutex([0, 0])
            func worker(_ index: Int) -> JobWorker {
                JobWorker(queue: queue, handlers: ["count": { job in
                    let n = try job.decode([String: Int].self)["n"]!
                    runs.withLock { $0[n, default: 0] += 1 }
                    perWorker.withLock { $0[index] += 1 }
                }], concurrency: 8)
            }
            let workers = [worker(0), worker(1)]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in workers {
                    group.addTask { while try await w.runOnce() > 0 {} }
                }
                try await group.waitForAll()
            }
            let counts = runs.withLock { $0 }
            XCTAssertEqual(counts.count, 1000)
            XCTAssertTrue(counts.values.allSatisfy { $0 == 1 }, "a job ran twice")
            let split = perWorker.withLock { $0 }
            XCTAssertEqual(split[0] + split[1], 1000)
            let rows = try await runtime.db.query("SELECT status, count(*)::int FROM jobs WHERE queue = \(queueName) GROUP BY status")
            var statuses: [String: Int] = [:]
            for try await (s, n) in rows.decode((String, Int).self) { statuses[s] = n }
            XCTAssertEqual(statuses, ["done": 1000])
        }
    }

    /// #14: a job that hangs holds its slot, never the start of the others: with two slots and
    /// one job stuck, twenty quick jobs queued after it all run while it is still stuck.
    func testAStuckJobNeverDelaysTheOthers() async throws {
        let runtime = kitRuntime(.offline)
        try await withMigratedRuntime(runtime) { runtime in
            let queueName = "test-\(UUID().uuidString)"
            let queue = JobQueue(client: runtime.db, queue: queueName, logger: runtime.logger)
            try await queue.enqueue(kind: "stuck", payload: [String: Int]())
            for i in 0..<20 { try await queue.enqueue(kind: "quick", payload: ["n": i]) }
            let release = Mutex(false)
            let quick = Mutex(0)
            let worker = JobWorker(queue: queue, handlers: [
                "stuck": { _ in while !release.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(20)) } },
                "quick": { _ in quick.withLock { $0 += 1 } },
            ], concurrency: 2, pollInterval: .milliseconds(20))
            let running = Task { try await worker.run() }
            var waited = 0
            while quick.withLock({ $0 }) < 20 && waited < 1500 {
                try await Task.sleep(for: .milliseconds(20)); waited += 1
            }
            XCTAssertEqual(quick.withLock { $0 }, 20, "every quick job ran while the stuck one held its slot")
            let stuck = try await runtime.db.query("SELECT count(*)::int FROM jobs WHERE queue = \(queueName) AND kind = 'stuck' AND status = 'running'")
            for try await n in stuck.decode(Int.self) { XCTAssertEqual(n, 1, "and it was still running") }
            release.withLock { $0 = true }
            var done = 0
            while done < 21 && waited < 3000 {
                for try await n in try await runtime.db.query("SELECT count(*)::int FROM jobs WHERE queue = \(queueName) AND status = 'done'").decode(Int.self) { done = n }
                try await Task.sleep(for: .milliseconds(20)); waited += 1
            }
            XCTAssertEqual(done, 21)
            running.cancel()
            _ = await running.result
        }
    }

    /// A job that throws is retried after a growing delay and ends dead after its attempts.
    func testFailingJobIsRetriedWithBackoffThenDead() async throws {
        let runtime = kitRuntime(.offline)
        try await withMigratedRuntime(runtime) { runtime in
            let queueName = "test-\(UUID().uuidString)"
            let queue = JobQueue(client: runtime.db, queue: queueName, logger: runtime.logger)
            let id = try await queue.enqueue(kind: "boom", payload: [String: Int](), maxAttempts: 3)!
            struct Boom: Error {}
            let attempts = Mutex([ContinuousClock.Instant]())
            let worker = JobWorker(queue: queue, handlers: ["boom": { _ in
                attempts.withLock { $0.append(.now) }
                throw Boom()
            }], backoff: Backoff(base: .milliseconds(300), cap: .seconds(5)))

            // Right after a failure the job is not due: the backoff holds it back.
            try await worker.runOnce()
            let early = try await worker.runOnce()
            XCTAssertEqual(early, 0, "retried before its backoff elapsed")
            let deadline = ContinuousClock.now + .seconds(20)
            while attempts.withLock({ $0.count }) < 3 && ContinuousClock.now < deadline {
                try await worker.runOnce()
                try await Task.sleep(for: .milliseconds(50))
            }
            let rows = try await runtime.db.query("SELECT status, attempts, last_error FROM jobs WHERE id = \(id)")
            for try await (status, n, error) in rows.decode((String, Int, String?).self) {
                XCTAssertEqual(status, "dead")
                XCTAssertEqual(n, 3)
                XCTAssertNotNil(error)
            }
            let times = attempts.withLock { $0 }
            XCTAssertEqual(times.count, 3)
            // Second gap (≈600 ms ± jitter) is longer than the first (≈300 ms ± jitter).
            XCTAssertGreaterThan(times[1] - times[0], .milliseconds(200))
            XCTAssertGreaterThan(times[2] - times[1], times[1] - times[0] - .milliseconds(100))
            let afterDeath = try await worker.runOnce()
            XCTAssertEqual(afterDeath, 0, "a dead job is not claimed again")
        }
    }

    func testUniqueKeyMakesASecondEnqueueANoOp() async throws {
        let runtime = kitRuntime(.offline)
        try await withMigratedRuntime(runtime) { runtime in
            let queue = JobQueue(client: runtime.db, queue: "test-unique", logger: runtime.logger)
            let key = UUID().uuidString
            let first = try await queue.enqueue(kind: "x", payload: ["a": 1], uniqueKey: key)
            let second = try await queue.enqueue(kind: "x", payload: ["a": 1], uniqueKey: key)
            XCTAssertNotNil(first)
            XCTAssertNil(second)
        }
    }
}

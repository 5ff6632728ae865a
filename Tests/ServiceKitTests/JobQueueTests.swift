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
                JobWorker(
                    queue: queue,
                    handlers: [
                        "count": { job in
                            let n = try job.decode([String: Int].self)["n"]!
                            runs.withLock { $0[n, default: 0] += 1 }
                            perWorker.withLock { $0[index] += 1 }
                        }
                    ],
                    concurrency: 8
                )
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
            let worker = JobWorker(
                queue: queue,
                handlers: [
                    "stuck": { _ in while !release.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(20)) } },
                    "quick": { _ in quick.withLock { $0 += 1 } },
                ],
                concurrency: 2,
                pollInterval: .milliseconds(20)
            )
            let running = Task { try await worker.run() }
            var waited = 0
            while quick.withLock({ $0 }) < 20 && waited < 1500 {
                try await Task.sleep(for: .milliseconds(20))
                waited += 1
            }
            XCTAssertEqual(quick.withLock { $0 }, 20, "every quick job ran while the stuck one held its slot")
            let stuck = try await runtime.db.query(
                "SELECT count(*)::int FROM jobs WHERE queue = \(queueName) AND kind = 'stuck' AND status = 'running'"
            )
            for try await n in stuck.decode(Int.self) { XCTAssertEqual(n, 1, "and it was still running") }
            release.withLock { $0 = true }
            var done = 0
            while done < 21 && waited < 3000 {
                for try await n in try await runtime.db.query("SELECT count(*)::int FROM jobs WHERE queue = \(queueName) AND status = 'done'").decode(
                    Int.self
                ) { done = n }
                try await Task.sleep(for: .milliseconds(20))
                waited += 1
            }
            XCTAssertEqual(done, 21)
            running.cancel()
            _ = await running.result
        }
    }

    /// #34: the job of a worker that died (claimed, then nothing: no heartbeat, no end) is
    /// claimed again once its short lease runs out, runs once more and ends; not before.
    func testTheJobOfADeadWorkerIsClaimedAgainWhenItsLeaseRunsOut() async throws {
        let runtime = kitRuntime(.offline)
        try await withMigratedRuntime(runtime) { runtime in
            let queueName = "test-\(UUID().uuidString)"
            let queue = JobQueue(client: runtime.db, queue: queueName, logger: runtime.logger)
            let id = try await queue.enqueue(kind: "work", payload: [String: Int]())!
            // The worker that dies: it claimed the job with a 2 s lease and is gone.
            let claimed = try await queue.claim(limit: 1, lease: .seconds(2))
            XCTAssertEqual(claimed.map(\.id), [id])
            let runs = Mutex(0)
            let survivor = JobWorker(queue: queue, handlers: ["work": { _ in runs.withLock { $0 += 1 } }], lease: .seconds(2))
            let early = try await survivor.runOnce()
            XCTAssertEqual(early, 0, "a job whose lease still runs is not taken")
            let deadline = ContinuousClock.now + .seconds(10)
            while runs.withLock({ $0 }) == 0 && ContinuousClock.now < deadline {
                try await survivor.runOnce()
                try await Task.sleep(for: .milliseconds(100))
            }
            XCTAssertEqual(runs.withLock { $0 }, 1)
            for try await (status, attempts) in try await runtime.db.query("SELECT status, attempts FROM jobs WHERE id = \(id)").decode(
                (String, Int).self
            ) {
                XCTAssertEqual(status, "done")
                XCTAssertEqual(attempts, 2)
            }
            // The dead worker's attempt cannot end the job any more (it is not its run now).
            try await runtime.db.query("UPDATE jobs SET status = 'running', locked_until = now() + interval '1 hour' WHERE id = \(id)")
            try await queue.complete(claimed[0])
            for try await status in try await runtime.db.query("SELECT status FROM jobs WHERE id = \(id)").decode(String.self) {
                XCTAssertEqual(status, "running", "a stale attempt ended the job")
            }
        }
    }

    /// #34: a job that runs longer than its lease keeps it by its heartbeat: a second worker
    /// polling all along never takes it, and it runs once.
    func testAHeartbeatKeepsALongJobFromASecondWorker() async throws {
        let runtime = kitRuntime(.offline)
        try await withMigratedRuntime(runtime) { runtime in
            let queueName = "test-\(UUID().uuidString)"
            let queue = JobQueue(client: runtime.db, queue: queueName, logger: runtime.logger)
            let id = try await queue.enqueue(kind: "long", payload: [String: Int]())!
            let runs = Mutex(0)
            let handlers: [String: JobHandler] = [
                "long": { _ in
                    runs.withLock { $0 += 1 }
                    try await Task.sleep(for: .seconds(4))  // four times the lease
                }
            ]
            let first = JobWorker(queue: queue, handlers: handlers, lease: .seconds(1))
            let second = JobWorker(queue: queue, handlers: handlers, lease: .seconds(1))
            let running = Task { try await first.runOnce() }
            try await Task.sleep(for: .milliseconds(200))
            var stolen = 0
            let until = ContinuousClock.now + .seconds(3)
            while ContinuousClock.now < until {
                stolen += try await second.runOnce()
                try await Task.sleep(for: .milliseconds(100))
            }
            XCTAssertEqual(stolen, 0, "the second worker took a job whose worker is alive")
            _ = try await running.value
            XCTAssertEqual(runs.withLock { $0 }, 1)
            for try await (status, attempts) in try await runtime.db.query("SELECT status, attempts FROM jobs WHERE id = \(id)").decode(
                (String, Int).self
            ) {
                XCTAssertEqual(status, "done")
                XCTAssertEqual(attempts, 1)
            }
        }
    }

    /// #34: a worker whose lease was lost (it stalled past it and another worker claimed the
    /// job) finds out at its next heartbeat, stops its handler and records nothing.
    func testAWorkerThatLostItsLeaseStopsBeforeItWritesAgain() async throws {
        let runtime = kitRuntime(.offline)
        try await withMigratedRuntime(runtime) { runtime in
            let queueName = "test-\(UUID().uuidString)"
            let queue = JobQueue(client: runtime.db, queue: queueName, logger: runtime.logger)
            let id = try await queue.enqueue(kind: "steps", payload: [String: Int]())!
            let steps = Mutex(0)
            let stopped = Mutex(false)
            let worker = JobWorker(
                queue: queue,
                handlers: [
                    "steps": { _ in
                        do {
                            for _ in 0..<50 {
                                try await Task.sleep(for: .milliseconds(100))
                                steps.withLock { $0 += 1 }
                            }
                        } catch is CancellationError {
                            stopped.withLock { $0 = true }
                            throw CancellationError()
                        }
                    }
                ],
                lease: .seconds(1)
            )
            let running = Task { try await worker.runOnce() }
            try await Task.sleep(for: .milliseconds(300))
            // Another worker claims it again (what a run-out lease allows): the attempt moves on.
            try await runtime.db.query("UPDATE jobs SET attempts = attempts + 1, locked_until = now() + interval '1 hour' WHERE id = \(id)")
            _ = try await running.value
            XCTAssertTrue(stopped.withLock { $0 }, "the handler was not stopped")
            XCTAssertLessThan(steps.withLock { $0 }, 20, "the handler went on after its lease was lost")
            for try await (status, attempts, error) in try await runtime.db.query("SELECT status, attempts, last_error FROM jobs WHERE id = \(id)")
                .decode(
                    (String, Int, String?).self
                )
            {
                XCTAssertEqual(status, "running", "the stale worker ended or failed the other worker's run")
                XCTAssertEqual(attempts, 2)
                XCTAssertNil(error)
            }
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
            let worker = JobWorker(
                queue: queue,
                handlers: [
                    "boom": { _ in
                        attempts.withLock { $0.append(.now) }
                        throw Boom()
                    }
                ],
                backoff: Backoff(base: .milliseconds(300), cap: .seconds(5))
            )

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

    /// A job whose write meets the erasure fence (its user was erased meanwhile) ends at its first
    /// attempt: nothing is left to do for that user, so it is neither retried nor dead.
    func testAJobWhoseUserIsErasedEndsWithoutRetry() async throws {
        let runtime = kitRuntime(.offline)
        try await withMigratedRuntime(runtime) { runtime in
            let queue = JobQueue(client: runtime.db, queue: "test-\(UUID().uuidString)", logger: runtime.logger)
            let id = try await queue.enqueue(kind: "erased", payload: [String: Int](), maxAttempts: 3)!
            let user = UUID()
            try await runtime.db.query(
                """
                INSERT INTO session_state (app_id, user_id, version, session_epoch, state)
                VALUES (\(user), \(user), 9, 2147483647, 'erased')
                """,
                logger: runtime.logger
            )
            let worker = JobWorker(
                queue: queue,
                handlers: [
                    "erased": { _ in
                        try await runtime.db.query(
                            "INSERT INTO user_consents (app_id, user_id, geolocation, changed_at) VALUES (\(user), \(user), true, now())",
                            logger: runtime.logger
                        )
                    }
                ],
                backoff: Backoff(base: .milliseconds(10), cap: .milliseconds(10))
            )
            try await worker.runOnce()
            let rows = try await runtime.db.query("SELECT status, attempts FROM jobs WHERE id = \(id)")
            for try await (status, attempts) in rows.decode((String, Int).self) {
                XCTAssertEqual(status, "done")
                XCTAssertEqual(attempts, 1)
            }
            for try await n in try await runtime.db.query("SELECT count(*)::int FROM user_consents WHERE user_id = \(user)").decode(Int.self) {
                XCTAssertEqual(n, 0)
            }
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

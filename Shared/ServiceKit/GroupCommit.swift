import Synchronization

/// Group commit: the rows of concurrent requests written together, one statement and one
/// commit for the lot, each request waiting until its row is stored (so an answer is never sent
/// for a row that is not). The first caller that finds no write under way writes what is
/// pending; rows that arrive meanwhile wait for the next write, which it makes as soon as its
/// own is done. Under no load a row is written alone, at once; under load a write carries every
/// row that arrived during the previous one (at most `maxBatch`).
///
/// A failed write fails the requests of that batch; when it held more than one row each row is
/// written again on its own, so one row the database refuses fails its own request only.
public final class GroupCommit<Item: Sendable>: Sendable {
    private typealias Waiter = (item: Item, done: CheckedContinuation<Void, any Error>)
    private struct State {
        var pending: [Waiter] = []
        var writing = false
    }

    private let state = Mutex(State())
    private let maxBatch: Int
    private let write: @Sendable ([Item]) async throws -> Void

    public init(maxBatch: Int = 500, write: @escaping @Sendable ([Item]) async throws -> Void) {
        self.maxBatch = max(1, maxBatch)
        self.write = write
    }

    /// Returns once `item` is stored (or throws what storing it threw).
    public func submit(_ item: Item) async throws {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            let lead = state.withLock { s -> Bool in
                s.pending.append((item, done))
                guard !s.writing else { return false }
                s.writing = true
                return true
            }
            // Unstructured on purpose: the writer outlives the request that started it when
            // other requests' rows arrived meanwhile; it ends when nothing is pending.
            if lead { Task { await self.drain() } }
        }
    }

    private func drain() async {
        while true {
            let batch = state.withLock { s -> [Waiter] in
                let n = min(s.pending.count, maxBatch)
                let taken = Array(s.pending.prefix(n))
                s.pending.removeFirst(n)
                if taken.isEmpty { s.writing = false }
                return taken
            }
            guard !batch.isEmpty else { return }
            do {
                try await write(batch.map(\.item))
                for w in batch { w.done.resume() }
            } catch  where batch.count > 1 {
                for w in batch {
                    do { try await write([w.item]); w.done.resume() } catch { w.done.resume(throwing: error) }
                }
            } catch {
                for w in batch { w.done.resume(throwing: error) }
            }
        }
    }
}

import Synchronization

/// Wakes one polling loop early: `signal()` from anywhere, `wait(upTo:)` in the loop. A signal
/// that comes while the loop is busy is kept, so the next wait returns at once: nothing that was
/// announced waits a whole poll interval.
public final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        /// The current wait has ended (its time ran out): a waiter registering late resumes at once.
        var closed = false
    }
    private let state = Mutex(State())

    public init() {}

    public func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns when signalled (or signalled since the last wait), after `timeout`, or when the
    /// task is cancelled. One waiting loop per `Wakeup`.
    public func wait(upTo timeout: Duration) async {
        state.withLock { $0.closed = false }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let now = self.state.withLock { s -> Bool in
                        if s.pending || s.closed {
                            s.pending = false
                            return true
                        }
                        s.waiter = c
                        return false
                    }
                    if now { c.resume() }
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
            let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
                s.closed = true
                let w = s.waiter
                s.waiter = nil
                return w
            }
            waiter?.resume()
        }
    }
}

import Foundation
import Synchronization

/// The time business rules read (lockouts, windows, expiries), so tests move it instead of
/// sleeping.
public protocol WallClock: Sendable {
    func now() -> Date
}

public struct SystemClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// A clock a test moves by hand.
public final class MovableClock: WallClock {
    private let current: Mutex<Date>
    public init(_ start: Date = Date()) { current = Mutex(start) }
    public func now() -> Date { current.withLock { $0 } }
    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
    public func set(_ date: Date) { current.withLock { $0 = date } }
}

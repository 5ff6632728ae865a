import Foundation

/// UC-SUB-2.2 access levels: free content always; premium content with an active, trial or
/// grace subscription; freemium content with a subscription or an unexpired credit unlock.
public enum AccessPolicy {
    public enum Via: String, Codable, Sendable { case free, subscription, credits }

    public static func decide(level: ContentRule.Level, hasSubscription: Bool, hasUnlock: Bool) -> Via? {
        switch level {
        case .free: return .free
        case .premium: return hasSubscription ? .subscription : nil
        case .freemium: return hasSubscription ? .subscription : (hasUnlock ? .credits : nil)
        }
    }

    /// At most this many devices of one user are active at a time.
    public static let maxActiveDevices = 5
    /// A device counts as active while it was seen this recently.
    public static let deviceActiveWindow: TimeInterval = 15 * 60
    /// A device seen within the window less this margin is active for any check running now
    /// (each takes its own `now`, milliseconds apart): its `last_seen` may be moved on without
    /// the locked count, since it is one of the active devices either way.
    public static let deviceRenewalMargin: TimeInterval = 60

    /// The `last_seen` after which a device is renewed without the count.
    public static func renewableSince(now: Date) -> Date {
        now.addingTimeInterval(-deviceActiveWindow + deviceRenewalMargin)
    }

    /// A device's `last_seen` is written again by one replica after this long, stretched by up
    /// to as much again per device (`spread` in 0..<1): devices first met together (a replica's
    /// start, a burst of players) are not all written again in the same second.
    public static let deviceRewriteInterval: TimeInterval = 60

    /// For a device this replica wrote as seen at `written`: whether it is still surely active
    /// (other replicas only move `last_seen` on), and whether to write it again now.
    public static func remembered(written: Date, now: Date, spread: Double = 0) -> (active: Bool, rewrite: Bool) {
        let active = written > renewableSince(now: now)
        let after = deviceRewriteInterval * (1 + min(max(spread, 0), 0.999))
        return (active, active && now.timeIntervalSince(written) >= after)
    }
}

/// A content's access rule (UC-SUB-3): free, premium, or freemium at a credit price for some hours.
public struct ContentRule: Codable, Sendable, Equatable {
    public enum Level: String, Codable, Sendable { case free, premium, freemium }
    public var contentID: String
    public var accessLevel: Level
    public var creditCost: Int
    public var unlockHours: Int

    package init(contentID: String, accessLevel: Level, creditCost: Int, unlockHours: Int) {
        self.contentID = contentID
        self.accessLevel = accessLevel
        self.creditCost = creditCost
        self.unlockHours = unlockHours
    }

    package enum CodingKeys: String, CodingKey {
        case contentID = "content_id"
        case accessLevel = "access_level"
        case creditCost = "credit_cost"
        case unlockHours = "unlock_hours"
    }
}

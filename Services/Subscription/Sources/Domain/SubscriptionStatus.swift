import Foundation

/// A subscription's status (UC-SUB-2), as the `subscriptions.status` CHECK constraint lists them.
public enum SubscriptionStatus: String, Codable, Sendable, CaseIterable {
    case trial
    case active
    /// The store could not renew but keeps access open until `grace_period_end`.
    case gracePeriod = "grace_period"
    case cancelled
    case expired
    /// Refunded or revoked by the store: access ends at once.
    case revoked

    /// Premium while trial, active, or in the store's grace period (seed UC-SUB-2.2).
    public var grantsAccess: Bool { self == .trial || self == .active || self == .gracePeriod }

    /// A status read from the database; anything unknown grants nothing.
    public init(stored: String) { self = SubscriptionStatus(rawValue: stored) ?? .expired }
}

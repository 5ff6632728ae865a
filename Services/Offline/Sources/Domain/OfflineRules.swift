import Foundation

/// UC-OFFLINE-3.1 / 3.6 limits by tier.
package struct OfflineLimits: Sendable, Equatable {
    package var tier: String
    /// nil: unlimited (PREMIUM).
    package var maxCategories: Int?
    package var maxItemsPerCategory: Int?
    package var storageLimitBytes: Int64

    package static let free = OfflineLimits(tier: "free", maxCategories: 3, maxItemsPerCategory: 50, storageLimitBytes: 50 * 1_000_000)
    package static let premium = OfflineLimits(tier: "premium", maxCategories: nil, maxItemsPerCategory: nil, storageLimitBytes: 500 * 1_000_000)

    package static func forPremium(_ isPremium: Bool) -> OfflineLimits { isPremium ? .premium : .free }
}

package enum OfflineRules {
    /// Expiration cache : 30 jours.
    package static let copyLifetime: TimeInterval = 30 * 86400
    /// Compression : gzip si item > 10 KB.
    package static let compressAbove = 10 * 1024
    /// Retry automatique : 3 tentatives par item.
    package static let itemAttempts = 3
    /// Tombstones are kept at least this long.
    package static let tombstoneWindow: TimeInterval = 30 * 86400
    /// Auto-cleanup : items > 90 jours non accédés; locations anonymised after 90 days.
    package static let staleAfter: TimeInterval = 90 * 86400
    /// Conflits > 7 jours → auto-résolution 'server_wins'.
    package static let conflictAutoResolveAfter: TimeInterval = 7 * 86400
    /// Max 10 conflits simultanés (sinon force 'server_wins').
    package static let maxOpenConflicts = 10
    /// User peut skip temporairement (max 3 fois).
    package static let maxConflictSkips = 3
    /// Max 100 actions en queue.
    package static let maxPendingActions = 100
    /// Retry : exponentiel backoff (2s, 4s, 8s, 16s, 32s), then failed: the first try and five
    /// retries.
    package static let maxActionAttempts = 6
    /// The wait after the `n`th failed attempt (2, 4, 8, 16, 32 s), times `jitter` (±20 % in
    /// use, so a fleet of devices that failed together does not retry together).
    package static func retryDelay(afterAttempt n: Int, jitter: Double = 1) -> TimeInterval { pow(2, Double(max(1, min(n, 5)))) * jitter }
    /// Answers and progress are never dropped from a full queue, whatever priority the app gave them.
    package static let neverDropped = ["answer_submit", "progress_save"]
    package static func isDroppable(actionType: String, priority: Int) -> Bool { priority >= 10 && !neverDropped.contains(actionType) }
    /// Priority : answer_submit = 5, progress_save = 7, autres = 10.
    package static func defaultPriority(actionType: String) -> Int {
        switch actionType {
        case "answer_submit": 5
        case "progress_save": 7
        default: 10
        }
    }
    /// One location update per 15 minutes per user; accuracy worse than 1 km refused.
    package static let locationInterval: TimeInterval = 15 * 60
    package static let worstAccuracyMeters = 1000.0
    package static let nearbyDefaultKm = 50.0
    package static let nearbyMaxKm = 200.0
    package static let nearbyLimit = 20
    /// Estimated download throughput for `estimated_time_seconds` (a conservative mobile link).
    package static let estimatedBytesPerSecond = 250_000.0

    package static func megabytes(_ bytes: Int64) -> Double { (Double(bytes) / 1_000_000 * 100).rounded() / 100 }
}

/// UC-OFFLINE-3.5 merge: for each top-level field named in `merge_data`, "local" takes the
/// local value and "server" the server's; fields not named keep the server's value.
package enum ConflictMerge {
    package enum MergeError: Error, Equatable {
        case badChoice(String)
        case notObjects
    }

    package static func merge(local: [String: Any], server: [String: Any], choices: [String: String]) throws -> [String: Any] {
        var out = server
        for (field, choice) in choices {
            switch choice {
            case "local": out[field] = local[field]
            case "server": out[field] = server[field]
            default: throw MergeError.badChoice(field)
            }
        }
        return out
    }
}

/// What a copy may still take (UC-OFFLINE-3.1 limits, on every path that adds to a copy: the
/// download job and `refresh`). An item already in the copy may change size; a new item needs a
/// place under the per-category count and room under the storage limit. What does not fit is
/// refused here and reported by the caller, never silently added.
package struct CopyBudget: Sendable, Equatable {
    package var itemCount: Int
    package var usedBytes: Int64
    package let limits: OfflineLimits

    package init(itemCount: Int, usedBytes: Int64, limits: OfflineLimits) {
        self.itemCount = itemCount
        self.usedBytes = usedBytes
        self.limits = limits
    }

    package enum Refusal: String, Sendable {
        case itemLimit = "item_limit"
        case storageLimit = "storage_limit"
    }

    /// Admits `newSize` bytes for an item (`oldSize` when the copy already holds it) and
    /// accounts for it; nil when admitted.
    package mutating func admit(newSize: Int64, oldSize: Int64?) -> Refusal? {
        if oldSize == nil, let max = limits.maxItemsPerCategory, itemCount >= max { return .itemLimit }
        let grown = newSize - (oldSize ?? 0)
        if grown > 0, usedBytes + grown > limits.storageLimitBytes { return .storageLimit }
        usedBytes += grown
        if oldSize == nil { itemCount += 1 }
        return nil
    }

    package mutating func remove(size: Int64) {
        usedBytes -= size
        itemCount -= 1
    }
}

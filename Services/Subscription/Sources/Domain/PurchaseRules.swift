import Foundation

/// A verified store purchase, whatever the store.
public struct StorePurchase: Sendable {
    public var store: String
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var purchaseDate: Date
    public var endDate: Date
    /// The store's expiry exactly as it sent it (milliseconds since 1970).
    public var expiresMS: Int64
    public var status: SubscriptionStatus
    public var autoRenew: Bool
    public var isTrial: Bool
    public var environment: String
    public var proof: String
    public var graceEnd: Date?
    public var appAccountToken: UUID?

    package init(
        store: String,
        transactionID: String,
        originalTransactionID: String,
        productID: String,
        purchaseDate: Date,
        endDate: Date,
        expiresMS: Int64,
        status: SubscriptionStatus,
        autoRenew: Bool,
        isTrial: Bool,
        environment: String,
        proof: String,
        graceEnd: Date? = nil,
        appAccountToken: UUID? = nil
    ) {
        self.store = store
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.purchaseDate = purchaseDate
        self.endDate = endDate
        self.expiresMS = expiresMS
        self.status = status
        self.autoRenew = autoRenew
        self.isTrial = isTrial
        self.environment = environment
        self.proof = proof
        self.graceEnd = graceEnd
        self.appAccountToken = appAccountToken
    }
}

/// UC-SUB-2.1: what a verified store transaction may do to the subscription it belongs to.
/// Order is decided by the store's own values (its transaction ids and its millisecond expiry
/// dates, compared exactly), never by our clock or a rounded copy of a date.
public enum PurchaseRules {
    /// What we already know about one store transaction id.
    public enum KnownTransaction: Equatable, Sendable { case unknown, active, revoked }

    public enum Effect: Equatable, Sendable {
        /// The same (or an older) period: answer the subscription as it is.
        case keep
        /// A later period reported by the store: move the end date (and the status) forward.
        case extend
        /// The transaction, or the subscription it belongs to, was refunded or revoked.
        case refuseRevoked
    }

    /// - Parameters:
    ///   - transaction: what we know of the incoming transaction id.
    ///   - incomingExpiresMS: the store's expiry of the incoming transaction, in its milliseconds.
    ///   - subscriptionStatus: the stored subscription's status.
    ///   - storedExpiresMS: the store's expiry last applied to it, in its milliseconds.
    public static func effect(
        transaction: KnownTransaction,
        incomingExpiresMS: Int64,
        subscriptionStatus: SubscriptionStatus,
        storedExpiresMS: Int64
    ) -> Effect {
        if transaction == .revoked { return .refuseRevoked }
        let later = incomingExpiresMS > storedExpiresMS
        if subscriptionStatus == .revoked {
            // A refund sticks: only a transaction the store issued after it (a new id with a
            // later period) brings access back; the pre-refund transaction replayed does not.
            return transaction == .unknown && later ? .extend : .refuseRevoked
        }
        return later ? .extend : .keep
    }

    /// StoreKit 2 `appAccountToken`: when the app set it (to the user's id at purchase), the
    /// transaction belongs to that user only; another account can neither buy nor restore with it.
    public static func accountTokenAllows(_ token: String?, user: UUID) -> Bool {
        guard let token, !token.isEmpty else { return true }
        return UUID(uuidString: token) == user
    }

    /// A store date in milliseconds, exactly (Apple sends integral milliseconds).
    public static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
}

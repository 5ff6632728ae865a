import ServiceCore

/// Every error code subscription answers beyond ServiceKit's shared ones (`invalid_request`, `validation_error`,
/// `not_found`, `invalid_token`, ...), with the status it is answered with. Handlers throw
/// `AppError(SubscriptionErrorCode.someCode, "message")`; the OpenAPI document's `Error` enum is generated from this
/// list (deploy/local/error_codes.py) and `make lint` checks the two agree. An app switches on the code.
package enum SubscriptionErrorCode: String, ErrorCatalogue {
    /// Premium content for a free user, or freemium content not unlocked (`access_level`, `credit_cost`)
    case accessDenied = "access_denied"
    /// Too many devices in use on this account
    case concurrentAccessLimit = "concurrent_access_limit"
    /// Idempotency-Key (1-100 characters) is required: a retry must not grant twice
    case idempotencyKeyRequired = "idempotency_key_required"
    /// Not enough credits
    case insufficientCredits = "insufficient_credits"
    /// Unknown or malformed notification
    case invalidNotification = "invalid_notification"
    /// Google Play does not know this purchase
    case invalidPurchaseToken = "invalid_purchase_token"
    /// Unknown push endpoint token
    case invalidPushToken = "invalid_push_token"
    /// Apple transaction validation failed
    case invalidReceipt = "invalid_receipt"
    /// There is no active subscription to cancel
    case noActiveSubscription = "no_active_subscription"
    /// Support granted this user no premium that is still running
    case noSupportPremium = "no_support_premium"
    /// Only freemium content is unlocked with credits
    case notUnlockable = "not_unlockable"
    /// The payment is not complete yet
    case paymentPending = "payment_pending"
    /// The purchase is for …
    case productMismatch = "product_mismatch"
    /// This purchase was made by another account of this app (its appAccountToken)
    case purchaseOwnedByAnotherUser = "purchase_owned_by_another_user"
    /// This app has no stored … settings
    case storeNotConfigured = "store_not_configured"
    /// Google Play cannot be reached; deliver again later
    case storeUnavailable = "store_unavailable"
    /// This subscription period has ended
    case subscriptionExpired = "subscription_expired"
    /// This purchase was refunded or revoked
    case transactionRevoked = "transaction_revoked"
    /// No plan sells product …
    case unknownProduct = "unknown_product"

    package var status: HTTPStatus {
        switch self {
        case .idempotencyKeyRequired, .invalidNotification, .invalidPurchaseToken, .invalidReceipt, .productMismatch, .subscriptionExpired,
            .transactionRevoked,
            .unknownProduct:
            .badRequest
        case .insufficientCredits: .init(code: 402)
        case .paymentPending, .purchaseOwnedByAnotherUser: .conflict
        case .accessDenied: .forbidden
        case .noActiveSubscription, .noSupportPremium: .notFound
        case .storeUnavailable: .serviceUnavailable
        case .concurrentAccessLimit: .tooManyRequests
        case .invalidPushToken: .unauthorized
        case .notUnlockable, .storeNotConfigured: .unprocessableContent
        }
    }
}

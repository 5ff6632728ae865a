import Foundation

/// What an App Store Server Notification (v2) does to a subscription.
public enum AppleNotificationEffect: Equatable, Sendable {
    case renewed  // SUBSCRIBED, DID_RENEW, REFUND_REVERSED, OFFER_REDEEMED...: active until the new end
    case gracePeriod  // DID_FAIL_TO_RENEW + GRACE_PERIOD: access continues until the grace end
    case billingRetry  // DID_FAIL_TO_RENEW without grace: access ends at the period end
    case expired  // EXPIRED, GRACE_PERIOD_EXPIRED
    case revoked  // REFUND, REVOKE: access removed at once
    case autoRenew(Bool)  // DID_CHANGE_RENEWAL_STATUS
    case none  // TEST and types that do not change access

    public static func of(type: String, subtype: String?) -> AppleNotificationEffect {
        switch type {
        case "SUBSCRIBED", "DID_RENEW", "REFUND_REVERSED", "OFFER_REDEEMED", "DID_CHANGE_RENEWAL_PREF": return .renewed
        case "DID_FAIL_TO_RENEW": return subtype == "GRACE_PERIOD" ? .gracePeriod : .billingRetry
        case "EXPIRED", "GRACE_PERIOD_EXPIRED": return .expired
        case "REFUND", "REVOKE": return .revoked
        case "DID_CHANGE_RENEWAL_STATUS": return .autoRenew(subtype == "AUTO_RENEW_ENABLED")
        default: return .none
        }
    }

    /// App Store Server Notifications v1 names onto the v2 types they mean (Apple's v1 table):
    /// CANCEL is a refund; INITIAL_BUY, RENEWAL, INTERACTIVE_RENEWAL and DID_RECOVER (billing
    /// recovered) start a new period; the others keep their name.
    public static func v2Type(ofV1 type: String, autoRenewStatus: String?) -> (type: String, subtype: String?) {
        switch type {
        case "CANCEL": return ("REFUND", nil)
        case "INITIAL_BUY", "INTERACTIVE_RENEWAL", "RENEWAL", "DID_RECOVER": return ("DID_RENEW", nil)
        case "DID_CHANGE_RENEWAL_STATUS":
            return ("DID_CHANGE_RENEWAL_STATUS", autoRenewStatus == "true" ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED")
        default: return (type, nil)
        }
    }

    /// Apple's grace period when the renewal info does not carry its end (seed: 16 days).
    public static let fallbackGraceDays = 16
}

import ServiceCore

/// Every error code ads answers beyond ServiceKit's shared ones (`invalid_request`, `validation_error`,
/// `not_found`, `invalid_token`, ...), with the status it is answered with. Handlers throw
/// `AppError(AdsErrorCode.someCode, "message")`; the OpenAPI document's `Error` enum is generated from this
/// list (deploy/local/error_codes.py) and `make lint` checks the two agree. An app switches on the code.
package enum AdsErrorCode: String, ErrorCatalogue {
    /// Report the impression (shown: true) before completing this ad
    case adNotShown = "ad_not_shown"
    /// This ad request is older than one hour; request a new ad
    case adRequestExpired = "ad_request_expired"
    /// Premium users see no ads
    case adsDisabledPremium = "ads_disabled_premium"
    /// This account is under 13 (COPPA); only the age gate with a birth date can change that
    case ageVerificationRequired = "age_verification_required"
    /// Reward already claimed; a campaign rewards each user once
    case alreadyClaimed = "already_claimed"
    /// You have already redeemed a referral code
    case alreadyReferred = "already_referred"
    /// This campaign has ended; progress is kept but earns no reward
    case campaignExpired = "campaign_expired"
    /// The campaign's conditions are not met yet
    case campaignNotCompleted = "campaign_not_completed"
    /// This campaign has not started yet
    case campaignNotStarted = "campaign_not_started"
    /// Ad consent is required in this region before any ad (GDPR)
    case consentRequired = "consent_required"
    /// Wait `cooldown_seconds` before the next ad
    case cooldownActive = "cooldown_active"
    /// Daily ad limit reached
    case dailyLimitReached = "daily_limit_reached"
    /// Too soon after the last interstitial; wait `cooldown_seconds`
    case intervalNotElapsed = "interval_not_elapsed"
    /// The callback's signature does not verify
    case invalidSignature = "invalid_signature"
    /// No active ad provider serves … ads for this app
    case noAdProvider = "no_ad_provider"
    /// You cannot redeem your own referral code
    case ownReferralCode = "own_referral_code"
    /// No ads for users under 13 (COPPA): content only
    case underAge = "under_age"
    /// Variant '…' has … assigned users; it cannot be removed
    case variantHasUsers = "variant_has_users"
    /// AdMob's verifier keys cannot be fetched now
    case verifierKeysUnavailable = "verifier_keys_unavailable"

    package var status: HTTPStatus {
        switch self {
        case .alreadyClaimed, .campaignExpired, .campaignNotCompleted, .campaignNotStarted, .ownReferralCode: .badRequest
        case .adNotShown, .alreadyReferred, .variantHasUsers: .conflict
        case .adsDisabledPremium, .ageVerificationRequired, .consentRequired, .invalidSignature, .underAge: .forbidden
        case .adRequestExpired: .gone
        case .noAdProvider, .verifierKeysUnavailable: .serviceUnavailable
        case .cooldownActive, .dailyLimitReached, .intervalNotElapsed: .tooManyRequests
        }
    }
}

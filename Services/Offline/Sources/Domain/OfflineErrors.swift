import ServiceCore

/// Every error code offline answers beyond ServiceKit's shared ones (`invalid_request`, `validation_error`,
/// `not_found`, `invalid_token`, ...), with the status it is answered with. Handlers throw
/// `AppError(OfflineErrorCode.someCode, "message")`; the OpenAPI document's `Error` enum is generated from this
/// list (deploy/local/error_codes.py) and `make lint` checks the two agree. An app switches on the code.
package enum OfflineErrorCode: String, ErrorCatalogue {
    /// This conflict was already resolved
    case alreadyResolved = "already_resolved"
    /// FREE keeps at most … categories offline; Premium removes the limit
    case categoryLimitExceeded = "category_limit_exceeded"
    /// This category is not in your offline copy
    case categoryNotDownloaded = "category_not_downloaded"
    /// Category … does not exist
    case categoryNotFound = "category_not_found"
    /// Location needs consent_given
    case consentRequired = "consent_required"
    /// This copy is older than the 30-day change history; download the category again
    case fullDownloadRequired = "full_download_required"
    /// Guests keep their progress on this device; create an account to save it in the cloud
    case guestNoCloudSave = "guest_no_cloud_save"
    /// The job is …
    case invalidJobState = "invalid_job_state"
    /// Send a location update first (POST /location/update)
    case locationRequired = "location_required"
    /// … action(s) for this content are not synced yet; sync first or repeat with ?force=true
    case pendingSyncActions = "pending_sync_actions"
    /// Syncing over mobile data is a Premium option; FREE syncs on Wi-Fi only
    case premiumRequired = "premium_required"
    /// The main app refused the resolution: …
    case resolutionRejected = "resolution_rejected"
    /// A conflict can be skipped at most … times
    case skipLimitReached = "skip_limit_reached"
    /// Not enough offline space: … MB needed, … MB available
    case storageLimitExceeded = "storage_limit_exceeded"
    /// 100 answers and progress saves are waiting: run POST /sync/execute first
    case syncQueueFull = "sync_queue_full"

    package var status: HTTPStatus {
        switch self {
        case .resolutionRejected: .badGateway
        case .storageLimitExceeded: .init(code: 507)
        case .alreadyResolved, .fullDownloadRequired, .invalidJobState, .locationRequired, .pendingSyncActions, .skipLimitReached: .conflict
        case .categoryLimitExceeded, .consentRequired, .guestNoCloudSave, .premiumRequired: .forbidden
        case .categoryNotDownloaded, .categoryNotFound: .notFound
        case .syncQueueFull: .tooManyRequests
        }
    }
}

import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit

/// AdMob's server-side verification callback (`GET /ads/v1/ads/ssv/admob`, no user token:
/// AdMob calls it). The app sets the SSV custom data to the `ad_request_id`; the signature
/// proves the view; `transaction_id` makes a replay harmless.
struct SSVController: Sendable {
    let db: DatabasePool
    let verifier: AdMobVerifier
    let ads: AdStore
    let rewarding: AdRewarding
    let delivery: RewardDelivery
    let clock: any WallClock
    let logger: Logger

    func addRoutes(to open: RouterGroup<ServiceRequestContext>) {
        open.get("ads/ssv/admob") { request, context in try await admob(request, context) }
    }

    func admob(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        guard let raw = request.uri.query, raw.utf8.count <= 8192 else { throw AppError.badRequest("The callback's query string is missing") }
        let callback: AdMobCallback
        do { callback = try await verifier.verify(rawQuery: raw) } catch let e as AdMobVerificationError {
            switch e {
            case .malformed(let why): throw AppError.badRequest("Malformed callback: \(why)")
            case .unknownKey, .badSignature:
                logger.warning("refused AdMob callback", metadata: ["reason": "\(e)"])
                throw AppError(AdsErrorCode.invalidSignature, "The callback's signature does not verify")
            case .keysUnavailable: throw AppError(AdsErrorCode.verifierKeysUnavailable, "AdMob's verifier keys cannot be fetched now")
            }
        }
        guard let custom = callback.customData, let requestID = UUID(uuidString: custom) else {
            throw AppError.validation("custom_data", "custom_data must be the ad_request_id")
        }
        guard callback.transactionID.utf8.count <= 200 else { throw AppError.validation("transaction_id", "transaction_id is too long") }
        let now = clock.now()
        let (status, outboxID) = try await db.withTransaction(logger: logger) { conn -> (String, Int64?) in
            guard let r = try await ads.lockRequest(id: requestID, on: conn), let user = r.userID else { throw AppError.notFound("Ad request") }
            guard r.adType == .rewarded else { throw AppError.validation("custom_data", "the ad request is not a rewarded ad") }
            if let claimed = callback.userID, !claimed.isEmpty, UUID(uuidString: claimed) != user {
                throw AppError.validation("user_id", "user_id does not match the ad request's user")
            }
            let fresh = try await ads.recordVerificationCallback(
                transactionID: callback.transactionID, request: r, keyID: callback.keyID,
                rewardAmount: callback.rewardAmount, now: now, on: conn)
            guard fresh else { return ("duplicate", nil) }
            switch try await rewarding.grant(r, user: user, now: now, on: conn) {
            case .granted(let outboxID):
                try await ads.markViewRewarded(request: r.id, amount: AdRules.rewardCredits, on: conn)
                return ("granted", outboxID)
            case .alreadyGranted: return ("duplicate", nil)
            case .dailyLimitReached: return ("daily_limit_reached", nil)
            }
        }
        if let outboxID { _ = await delivery.attempt(outboxID: outboxID) }
        return try context.json(["status": status])
    }
}

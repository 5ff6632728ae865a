import AdsDomain
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit

/// AdMob's server-side verification callback (`GET /ads/v1/ads/ssv/admob`, no user token:
/// AdMob calls it). The app sets the SSV custom data to the `ad_request_id`; the signature
/// proves the view; `transaction_id` makes a replay harmless.
struct SSVController: Sendable {
    let verifier: AdMobVerifier
    let confirming: SSVConfirmation
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
        let (status, outboxID) = try await confirming.confirm(callback, request: requestID, now: clock.now())
        if let outboxID { _ = await delivery.attempt(outboxID: outboxID) }
        return try context.json(["status": status])
    }
}

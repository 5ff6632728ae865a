import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit

/// UC-ADS-4.2 a rewarded view confirmed by the network's server-side callback (its signature
/// already verified): the callback is recorded once per `transaction_id` (a replay is harmless),
/// and the view earns its credit through the same path as the client's completion. The flow owns
/// the transaction (#50). Answers the outcome and the outbox row to attempt at once.
struct SSVConfirmation: Sendable {
    let db: DatabasePool
    let ads: AdStore
    let rewarding: AdRewarding
    let logger: Logger

    func confirm(_ callback: AdMobCallback, request requestID: UUID, now: Date) async throws -> (String, Int64?) {
        try await db.withTransaction(logger: logger) { conn -> (String, Int64?) in
            guard let r = try await ads.lockRequest(id: requestID, on: conn), let user = r.userID else { throw AppError.notFound("Ad request") }
            guard r.adType == .rewarded else { throw AppError.validation("custom_data", "the ad request is not a rewarded ad") }
            if let claimed = callback.userID, !claimed.isEmpty, UUID(uuidString: claimed) != user {
                throw AppError.validation("user_id", "user_id does not match the ad request's user")
            }
            let fresh = try await ads.recordVerificationCallback(
                transactionID: callback.transactionID,
                request: r,
                keyID: callback.keyID,
                rewardAmount: callback.rewardAmount,
                now: now,
                on: conn
            )
            guard fresh else { return ("duplicate", nil) }
            switch try await rewarding.grant(r, user: user, now: now, on: conn) {
            case .granted(let outboxID):
                try await ads.markViewRewarded(request: r.id, amount: AdRules.rewardCredits, on: conn)
                return ("granted", outboxID)
            case .alreadyGranted: return ("duplicate", nil)
            case .dailyLimitReached: return ("daily_limit_reached", nil)
            }
        }
    }
}

import AdsDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import ServiceLifecycle
import WireTypes

/// UC-ADS-4.4 "Notification : 1 jour avant expiration si proche completion" (#31): once per
/// user and campaign, a day before the campaign ends, a player at 60 % of the goal (or one step
/// short) who has not completed it is reminded through auth's messenger. The reminder row and
/// its outbox message are written in one transaction, so it is sent iff it was recorded; two
/// replicas sweeping at once record each reminder once (its key), and auth sends one push per key.
struct CampaignReminders: Service {
    let campaigns: CampaignStore
    let db: DatabasePool
    let clock: any WallClock
    let interval: Duration
    let logger: Logger

    static let batch = 500

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do { _ = try await runOnce() } catch {
                    logger.warning("campaign reminder sweep failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// Sweeps until nothing more is due; returns how many reminders it recorded.
    @discardableResult
    func runOnce() async throws -> Int {
        var total = 0
        while true {
            let now = clock.now()
            let n = try await db.withTransaction(logger: logger) { conn -> Int in
                let due = try await campaigns.dueReminders(now: now, batch: Self.batch, on: conn)
                for r in due {
                    let message = NotificationRequest(
                        appID: r.app,
                        key: "campaign-reminder:\(r.campaign.lowercasedString):\(r.user.lowercasedString)",
                        kind: "campaign_reminder",
                        data: [
                            "campaign": r.name, "campaign_id": r.campaign.lowercasedString, "remaining": String(max(0, r.required - r.progress)),
                            "reward": String(r.reward),
                        ]
                    )
                    try await Outbox.write(
                        OutboxMessage(
                            InternalRoutes.notifyUser,
                            path: InternalRoutes.notifyUser.path(user: r.user, app: r.app),
                            body: message
                        ),
                        on: conn,
                        logger: logger
                    )
                }
                return due.count
            }
            total += n
            if n < Self.batch { return total }
        }
    }
}

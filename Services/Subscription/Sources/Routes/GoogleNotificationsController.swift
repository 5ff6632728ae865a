import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// `POST /webhooks/google`: Real-time developer notifications through a Pub/Sub push. The
/// push body is never trusted for state: the subscription is re-read from Google. Deduplicated
/// on `messageId`; a push that cannot be processed answers 503 so Pub/Sub delivers it again.
struct GoogleNotificationsController {
    let db: DatabasePool
    let subscriptions: SubscriptionStore
    let notifications: StoreNotificationHandling
    let google: TenantSettings<GooglePlayConfig>
    let client: GooglePlayClient
    let pushToken: String?
    let clock: any WallClock
    let logger: Logger

    func addRoutes(to open: RouterGroup<ServiceRequestContext>) {
        open.post("webhooks/google") { request, context in try await receive(request, context) }
    }

    struct Push: Codable {
        struct Message: Codable {
            var data: String
            var messageId: String
        }
        var message: Message
    }
    struct DeveloperNotification: Decodable {
        var packageName: String
        var subscriptionNotification: Sub?
        struct Sub: Decodable {
            var notificationType: Int
            var purchaseToken: String
            var subscriptionId: String?
        }
    }

    func receive(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        if let pushToken {
            guard let given = request.uri.queryParameters.get("token"), ConstantTime.equals(String(given), pushToken) else {
                throw AppError(SubscriptionErrorCode.invalidPushToken, "Unknown push endpoint token")
            }
        }
        let push = try await request.decodeJSON(as: Push.self, context: context)
        guard let data = Data(base64Encoded: push.message.data),
            let n = try? JSONDecoder().decode(DeveloperNotification.self, from: data)
        else {
            throw AppError(SubscriptionErrorCode.invalidNotification, "Undecodable Pub/Sub message")
        }
        guard let (app, config) = try await google.all().first(where: { $0.value.packageName == n.packageName }) else {
            throw AppError(SubscriptionErrorCode.invalidNotification, "Unknown package")
        }
        let now = clock.now()
        if try await subscriptions.notificationSeen(store: "google", id: push.message.messageId, db: db) {
            return try context.json(["received": JSONValue.bool(true), "result": "duplicate"])
        }
        var fresh: GoogleSubscriptionPurchase?
        if let sub = n.subscriptionNotification {
            do { fresh = try await client.subscription(token: sub.purchaseToken, config: config, now: now) } catch {
                logger.warning("Google re-read failed; Pub/Sub will redeliver", metadata: ["error": "\(error)"])
                throw AppError(SubscriptionErrorCode.storeUnavailable, "Google Play cannot be reached; deliver again later")
            }
        }
        let result = try await notifications.receiveOnce(
            .init(
                app: app,
                store: "google",
                id: push.message.messageId,
                type: String(n.subscriptionNotification?.notificationType ?? 0),
                subtype: nil,
                originalTransaction: n.subscriptionNotification?.purchaseToken,
                payload: String(decoding: data, as: UTF8.self)
            ),
            now: now
        ) { conn in
            guard let sub = n.subscriptionNotification, let g = fresh else { return "ignored" }
            return try await notifications.applyGoogle(g, token: sub.purchaseToken, type: sub.notificationType, app: app, now: now, on: conn)
        }
        return try context.json(["received": JSONValue.bool(true), "result": .string(result)])
    }
}

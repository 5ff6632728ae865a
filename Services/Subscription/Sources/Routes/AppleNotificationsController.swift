import Crypto
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// `POST /webhooks/apple`: App Store Server Notifications v2. No user token: the
/// `signedPayload` is verified like a transaction (chain, OIDs, signature, bundle,
/// environment), then stored once per `notificationUUID` and applied.
struct AppleNotificationsController {
    let notifications: StoreNotificationHandling
    let apple: TenantSettings<AppleIAPConfig>
    let clock: any WallClock
    let logger: Logger

    func addRoutes(to open: RouterGroup<ServiceRequestContext>) {
        open.post("webhooks/apple") { request, context in try await receive(request, context) }
    }

    struct Body: Codable { var signedPayload: String }
    struct Notification: Decodable {
        var notificationType: String
        var subtype: String?
        var notificationUUID: String
        var data: DataPart?
        struct DataPart: Decodable {
            var bundleId: String?
            var signedTransactionInfo: String?
            var signedRenewalInfo: String?
        }
    }
    struct Renewal: Decodable {
        var gracePeriodExpiresDate: Double?
        var autoRenewStatus: Int?
    }

    /// App Store Server Notifications v1 (legacy): no signature, the app's shared secret in
    /// `password` instead. Apple's v1 type for a refund is `CANCEL` (there is no DID_CANCEL).
    struct V1: Decodable {
        var notificationType: String
        var password: String?
        var autoRenewStatus: String?
        var unifiedReceipt: Unified?
        struct Unified: Decodable {
            var latestReceiptInfo: [AppleReceiptVerifier.ReceiptTransaction]?
            enum CodingKeys: String, CodingKey { case latestReceiptInfo = "latest_receipt_info" }
        }
        enum CodingKeys: String, CodingKey {
            case notificationType = "notification_type"
            case password
            case autoRenewStatus = "auto_renew_status"
            case unifiedReceipt = "unified_receipt"
        }
    }

    func receive(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let raw = try await request.decodeJSON(as: [String: JSONValue].self, context: context)
        if raw["signedPayload"] == nil, raw["notification_type"] != nil {
            return try await receiveV1(
                try JSON.decoder.decode(V1.self, from: try JSON.encoder.encode(raw)),
                rawBody: try JSON.encoder.encode(raw),
                context
            )
        }
        guard case .string(let signed)? = raw["signedPayload"] else {
            throw AppError.badRequest("Missing field 'signedPayload'", field: "signedPayload")
        }
        let body = Body(signedPayload: signed)
        // Which app: the bundle id inside (read before verifying only to pick the app's keys).
        let parts = body.signedPayload.split(separator: ".")
        guard parts.count == 3, let raw = Base64URL.decode(parts[1]),
            let peek = try? JSONDecoder().decode(Notification.self, from: raw),
            let (app, config) = try await apple.all().first(where: { $0.value.bundleID == peek.data?.bundleId })
        else {
            throw AppError(SubscriptionErrorCode.invalidNotification, "Unknown or malformed notification")
        }
        let verifier = try config.verifier()
        let n: Notification
        var tx: AppStoreTransaction?
        var renewal: Renewal?
        do {
            n = try JSONDecoder().decode(Notification.self, from: try await verifier.verify(body.signedPayload, kind: .notification))
            if let s = n.data?.signedTransactionInfo {
                tx = try JSONDecoder().decode(AppStoreTransaction.self, from: try await verifier.verify(s, kind: .transaction))
            }
            if let s = n.data?.signedRenewalInfo {
                renewal = try JSONDecoder().decode(Renewal.self, from: try await verifier.verify(s, kind: .renewalInfo))
            }
        } catch {
            logger.warning("Apple notification refused", metadata: ["reason": "\(error)"])
            throw AppError(SubscriptionErrorCode.invalidNotification, "Notification signature validation failed")
        }
        let now = clock.now()
        let result = try await notifications.receiveOnce(
            .init(
                app: app,
                store: "apple",
                id: n.notificationUUID,
                type: n.notificationType,
                subtype: n.subtype,
                originalTransaction: tx?.originalTransactionId,
                payload: String(decoding: raw, as: UTF8.self)
            ),
            now: now
        ) { conn in
            try await notifications.applyApple(
                type: n.notificationType,
                subtype: n.subtype,
                notificationID: n.notificationUUID,
                tx: tx,
                graceExpires: renewal?.gracePeriodExpiresDate,
                app: app,
                now: now,
                on: conn
            )
        }
        return try context.json(["received": JSONValue.bool(true), "result": .string(result)])
    }

    func receiveV1(_ v1: V1, rawBody: Data, _ context: ServiceRequestContext) async throws -> Response {
        guard let password = v1.password,
            let (app, _) = try await apple.all().first(where: { $0.value.sharedSecret.map { ConstantTime.equals($0, password) } ?? false })
        else {
            throw AppError(.unauthorized, SubscriptionErrorCode.invalidNotification, "Unknown shared secret")
        }
        let latest = v1.unifiedReceipt?.latestReceiptInfo?.max { (Double($0.expiresDateMS ?? "0") ?? 0) < (Double($1.expiresDateMS ?? "0") ?? 0) }
        let tx = latest.map {
            AppStoreTransaction(
                transactionId: $0.transactionID,
                originalTransactionId: $0.originalTransactionID,
                productId: $0.productID,
                purchaseDate: Double($0.purchaseDateMS) ?? 0,
                expiresDate: $0.expiresDateMS.flatMap(Double.init),
                revocationDate: $0.cancellationDateMS.flatMap(Double.init),
                offerType: nil,
                offerDiscountType: nil,
                environment: nil,
                price: nil,
                currency: nil
            )
        }
        // v1 names onto the v2 effects.
        let (type, subtype) = AppleNotificationEffect.v2Type(ofV1: v1.notificationType, autoRenewStatus: v1.autoRenewStatus)
        // v1 carries no id: the body's digest deduplicates replays.
        let id = "v1:" + SHA256.hash(data: rawBody).hexEncoded
        let n = Notification(notificationType: type, subtype: subtype, notificationUUID: id, data: nil)
        let now = clock.now()
        // The shared secret is not kept with the stored body.
        var stored = (try? JSONDecoder().decode([String: JSONValue].self, from: rawBody)) ?? [:]
        stored["password"] = nil
        let result = try await notifications.receiveOnce(
            .init(
                app: app,
                store: "apple",
                id: id,
                type: v1.notificationType,
                subtype: subtype,
                originalTransaction: tx?.originalTransactionId,
                payload: String(decoding: try JSON.encoder.encode(stored), as: UTF8.self)
            ),
            now: now
        ) { conn in
            try await notifications.applyApple(
                type: n.notificationType,
                subtype: n.subtype,
                notificationID: n.notificationUUID,
                tx: tx,
                graceExpires: nil,
                app: app,
                now: now,
                on: conn
            )
        }
        return try context.json(["received": JSONValue.bool(true), "result": .string(result)])
    }
}

import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// UC-SUB-2.1 purchase and restore (App Store, StoreKit 2 signed transactions), UC-SUB-2.2
/// `GET /subscriptions/me`, and the entitlement other services ask for.
struct SubscriptionsController {
    let db: DatabasePool
    let subscriptions: SubscriptionStore
    let plans: PlanStore
    let apple: TenantSettings<AppleIAPConfig>
    let receipts: AppleReceiptVerifier
    let google: TenantSettings<GooglePlayConfig>
    let googleClient: GooglePlayClient
    /// UC-SUB-2.2 the user's subscription and features (cached), and the cancel request.
    let status: SubscriptionStatusCheck
    /// #45: the purchase answers once its access facts have landed.
    let factsAtOnce: AccessFactsAtOnce
    let clock: any WallClock
    let logger: Logger

    func addRoutes(user: RouterGroup<ServiceRequestContext>, internalGroup: RouterGroup<ServiceRequestContext>) {
        user.post("subscriptions/purchase") { request, context in try await purchase(request, context, restore: false) }
        user.post("subscriptions/restore") { request, context in try await purchase(request, context, restore: true) }
        user.get("subscriptions/me") { _, context in try await me(context) }
        user.post("subscriptions/cancel") { _, context in try await cancel(context) }
        internalGroup.on(InternalRoutes.entitlement) { request, context in try await entitlement(request, context) }
    }

    struct PurchaseBody: Codable {
        var store: String
        var signedTransaction: String?
        var receiptData: String?
        var planID: UUID?
        var purchaseToken: String?
        var productID: String?
        enum CodingKeys: String, CodingKey {
            case store
            case signedTransaction = "signed_transaction"
            case receiptData = "receipt_data"
            case planID = "plan_id"
            case purchaseToken = "purchase_token"
            case productID = "product_id"
        }
    }

    struct SubscriptionView: Codable {
        var id: UUID
        var status: SubscriptionStatus
        var planType: String
        var startDate: Date
        var trialEndDate: Date?
        var endDate: Date
        var autoRenew: Bool
        var gracePeriodEnd: Date?
        var expiredAt: Date?
        var features: JSONValue?
        var daysRemaining: Int?
        var billingIssue: Bool?
        enum CodingKeys: String, CodingKey {
            case id, status
            case planType = "plan_type"
            case startDate = "start_date"
            case trialEndDate = "trial_end_date"
            case endDate = "end_date"
            case autoRenew = "auto_renew"
            case gracePeriodEnd = "grace_period_end"
            case expiredAt = "expired_at"
            case features
            case daysRemaining = "days_remaining"
            case billingIssue = "billing_issue"
        }
        init(_ s: Subscription, features: JSONValue?) {
            id = s.id
            status = s.status
            planType = s.planType
            startDate = s.startDate
            trialEndDate = s.trialEndDate
            endDate = s.endDate
            autoRenew = s.autoRenew
            gracePeriodEnd = s.gracePeriodEnd
            expiredAt = s.expiredAt
            self.features = features
        }
    }

    struct PurchaseResponse: Codable {
        var subscription: SubscriptionView
        var activated: Bool
    }

    func purchase(_ request: Request, _ context: ServiceRequestContext, restore: Bool) async throws -> Response {
        let (app, user) = try context.requireUser()
        let body = try await request.decodeJSON(as: PurchaseBody.self, context: context)
        let now = clock.now()
        let purchase: StorePurchase
        var acknowledge: GoogleAcknowledgeJob?
        switch body.store {
        case "apple":
            guard let config = try await apple.value(for: app) else {
                throw AppError(SubscriptionErrorCode.storeNotConfigured, "App Store purchases are not configured for this app")
            }
            let (tx, proof) = try await appleTransaction(body, app: app, config: config)
            if tx.revocationDate != nil { throw AppError(SubscriptionErrorCode.transactionRevoked, "This purchase was refunded or revoked") }
            guard PurchaseRules.accountTokenAllows(tx.appAccountToken, user: user) else {
                throw AppError(
                    SubscriptionErrorCode.purchaseOwnedByAnotherUser,
                    "This purchase was made by another account of this app (its appAccountToken)",
                    extra: ["can_restore": false]
                )
            }
            purchase = tx.purchase(environment: config.environment.rawValue, proof: proof, now: now)
        case "google":
            (purchase, acknowledge) = try await googlePurchase(body, app: app, now: now)
        default:
            throw AppError.validation("store", "store must be 'apple' or 'google'")
        }
        let result = try await PurchaseRecording(db: db, subscriptions: subscriptions, plans: plans, logger: logger)
            .record(purchase, app: app, user: user, restore: restore, acknowledge: acknowledge, now: now)
        await factsAtOnce.deliver(result.3)
        return try context.json(
            PurchaseResponse(subscription: SubscriptionView(result.0, features: result.1), activated: result.0.grantsAccess),
            status: result.2 ? .created : .ok
        )
    }

    /// Reads the purchase from Google (never trusting the app's word for its state).
    func googlePurchase(_ body: PurchaseBody, app: UUID, now: Date) async throws -> (StorePurchase, GoogleAcknowledgeJob?) {
        guard let config = try await google.value(for: app) else {
            throw AppError(SubscriptionErrorCode.storeNotConfigured, "Google Play purchases are not configured for this app")
        }
        guard let token = body.purchaseToken, !token.isEmpty, token.utf8.count <= 4096 else {
            throw AppError.badRequest("Missing field 'purchase_token'", field: "purchase_token")
        }
        let g: GoogleSubscriptionPurchase
        do {
            g = try await googleClient.subscription(token: token, config: config, now: now)
        } catch let e as GooglePlayError where (400..<500).contains(e.status) {
            throw AppError(
                SubscriptionErrorCode.invalidPurchaseToken,
                "Google Play does not know this purchase",
                extra: ["google_status": .int(e.status)]
            )
        } catch {
            throw AppError(SubscriptionErrorCode.storeUnavailable, "Google Play cannot be reached; try again")
        }
        guard let product = g.productID else { throw AppError(SubscriptionErrorCode.invalidPurchaseToken, "No line item in the purchase") }
        if let wanted = body.productID, wanted != product { throw AppError(SubscriptionErrorCode.productMismatch, "The purchase is for \(product)") }
        guard let (status, autoRenew) = GoogleStateMapping.status(g.subscriptionState, expiry: g.expiry, now: now) else {
            throw AppError(SubscriptionErrorCode.paymentPending, "The payment is not complete yet")
        }
        let expiry = g.expiry ?? now
        let graceEnd = status == .gracePeriod ? max(expiry, now.addingTimeInterval(TimeInterval(GoogleStateMapping.fallbackGraceDays) * 86400)) : nil
        let purchase = StorePurchase(
            store: "google",
            transactionID: g.latestOrderId ?? token,
            originalTransactionID: token,
            productID: product,
            purchaseDate: GoogleSubscriptionPurchase.date(g.startTime) ?? now,
            endDate: expiry,
            expiresMS: PurchaseRules.milliseconds(expiry),
            status: status,
            autoRenew: autoRenew,
            isTrial: false,
            environment: "Production",
            proof: token,
            graceEnd: graceEnd
        )
        let ack =
            g.acknowledgementState == "ACKNOWLEDGEMENT_STATE_PENDING"
            ? GoogleAcknowledgeJob(appID: app, purchaseToken: token, productID: product) : nil
        return (purchase, ack)
    }

    /// StoreKit 2 signed transaction, or a legacy receipt checked with `verifyReceipt`.
    func appleTransaction(_ body: PurchaseBody, app: UUID, config: AppleIAPConfig) async throws -> (AppStoreTransaction, String) {
        if let jws = body.signedTransaction {
            guard !jws.isEmpty, jws.utf8.count <= 20_000 else { throw AppError.validation("signed_transaction", "Invalid signed_transaction") }
            let payload: Data
            do {
                payload = try await config.verifier().verify(jws, kind: .transaction)
            } catch let e as AppStoreVerificationError {
                logger.warning("App Store transaction refused", metadata: ["reason": "\(e)"])
                throw AppError(
                    SubscriptionErrorCode.invalidReceipt,
                    "Apple transaction validation failed",
                    extra: ["reason": .string(e.kind.rawValue)]
                )
            }
            guard let tx = try? JSONDecoder().decode(AppStoreTransaction.self, from: payload) else {
                throw AppError(SubscriptionErrorCode.invalidReceipt, "Apple transaction validation failed", extra: ["reason": "unreadable"])
            }
            return (tx, jws)
        }
        guard let receipt = body.receiptData, !receipt.isEmpty else {
            throw AppError.badRequest("Give 'signed_transaction' (StoreKit 2) or 'receipt_data'", field: "signed_transaction")
        }
        guard receipt.utf8.count <= 500_000 else { throw AppError.validation("receipt_data", "receipt_data is too large") }
        let verified: AppleReceiptVerifier.Verified
        do {
            verified = try await receipts.verify(receiptData: receipt, sharedSecret: config.sharedSecret)
        } catch AppleReceiptVerifier.Failure.status(let status) {
            logger.warning("verifyReceipt refused a receipt", metadata: ["status": "\(status)"])
            throw AppError(SubscriptionErrorCode.invalidReceipt, "Apple receipt validation failed", extra: ["apple_status": .int(status)])
        } catch AppleReceiptVerifier.Failure.unavailable(let status) {
            // Apple could not answer: nothing is known about the receipt, nothing is written.
            throw AppError(
                SubscriptionErrorCode.storeUnavailable,
                "The App Store cannot verify receipts right now; try again",
                extra: ["apple_status": .int(status), "retryable": true]
            )
        } catch {
            throw AppError(SubscriptionErrorCode.storeUnavailable, "The App Store cannot be reached; try again", extra: ["retryable": true])
        }
        // A receipt issued to another app (its bundle) buys nothing here.
        guard verified.bundleID == config.bundleID else {
            logger.warning("verifyReceipt: receipt of another app", metadata: ["bundle_id": "\(verified.bundleID ?? "none")"])
            throw AppError(SubscriptionErrorCode.invalidReceipt, "The receipt was issued to another app", extra: ["reason": "bundle_mismatch"])
        }
        let transactions = verified.transactions
        // The transaction of the plan bought (or of any plan the app sells), latest expiry first.
        let products: Set<String>
        if let planID = body.planID {
            let plan = try await db.withConnection { try await plans.active(app: app, on: $0) }.first { $0.id == planID }
            guard let product = plan?.appleProductID else { throw AppError.notFound("Plan") }
            products = [product]
        } else {
            products = Set(try await db.withConnection { try await plans.active(app: app, on: $0) }.compactMap(\.appleProductID))
        }
        guard
            let chosen = transactions.filter({ products.contains($0.productID) })
                .max(by: { (Double($0.expiresDateMS ?? "0") ?? 0) < (Double($1.expiresDateMS ?? "0") ?? 0) })
        else {
            throw AppError(SubscriptionErrorCode.productMismatch, "The receipt holds no purchase of this plan")
        }
        let tx = AppStoreTransaction(
            transactionId: chosen.transactionID,
            originalTransactionId: chosen.originalTransactionID,
            productId: chosen.productID,
            purchaseDate: Double(chosen.purchaseDateMS) ?? 0,
            expiresDate: chosen.expiresDateMS.flatMap(Double.init),
            revocationDate: chosen.cancellationDateMS.flatMap(Double.init),
            offerType: chosen.isTrialPeriod == "true" ? 1 : nil,
            offerDiscountType: chosen.isTrialPeriod == "true" ? "FREE_TRIAL" : nil,
            environment: nil,
            price: nil,
            currency: nil
        )
        return (tx, receipt)
    }

    struct MeResponse: Codable {
        var subscription: SubscriptionView?
        var isPremium: Bool
        var features: JSONValue
        var warning: String?
        /// In a grace period: whole days left before access ends (also inside `subscription`, as seed 7b shows it).
        var daysRemaining: Int?
        enum CodingKeys: String, CodingKey {
            case subscription
            case isPremium = "is_premium"
            case features
            case warning
            case daysRemaining = "days_remaining"
        }
        // A free user's answer says `"subscription": null` (seed 2.2), not a missing key.
        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(subscription, forKey: .subscription)
            try c.encode(isPremium, forKey: .isPremium)
            try c.encode(features, forKey: .features)
            try c.encodeIfPresent(warning, forKey: .warning)
            try c.encodeIfPresent(daysRemaining, forKey: .daysRemaining)
        }
    }

    /// The answer of every user without a subscription (most of them), encoded once.
    static let freeAnswer = ByteBuffer(
        bytes: try! JSON.encoder.encode(
            MeResponse(
                subscription: nil,
                isPremium: false,
                features: .object([:]),
                warning: nil,
                daysRemaining: nil
            )
        )
    )

    func me(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let (sub, features) = try await status.state(app: app, user: user)
        guard let sub else { return context.json(encoded: Self.freeAnswer) }
        var warning: String?
        var days: Int?
        var view = SubscriptionView(sub, features: nil)
        if sub.status == .gracePeriod {
            // Seed 2.2 7b: the store is retrying the payment; access lasts to the grace end.
            warning = "billing_retry_in_progress"
            let end = sub.gracePeriodEnd ?? sub.endDate
            days = max(0, Int((end.timeIntervalSince(clock.now()) / 86400).rounded(.up)))
            view.daysRemaining = days
            view.billingIssue = true
        } else if sub.status == .expired {
            warning = "subscription_expired"
        }
        return try context.json(
            MeResponse(
                subscription: view,
                isPremium: sub.grantsAccess,
                features: features,
                warning: warning,
                daysRemaining: days
            )
        )
    }

    struct CancelResponse: Codable {
        var subscription: SubscriptionView
        var manageURL: String
        var accessUntil: Date
        var message: String
        enum CodingKeys: String, CodingKey {
            case subscription
            case manageURL = "manage_url"
            case accessUntil = "access_until"
            case message
        }
    }

    /// UC-SUB-2.3: stores own cancellation. Record the user's intent and send them to the
    /// store's page; the store's notification then turns auto-renew off, access lasts to the end.
    func cancel(_ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let sub = try await status.requestCancel(app: app, user: user, now: clock.now())
        let url = sub.store == "apple" ? "https://apps.apple.com/account/subscriptions" : "https://play.google.com/store/account/subscriptions"
        return try context.json(
            CancelResponse(
                subscription: SubscriptionView(sub, features: nil),
                manageURL: url,
                accessUntil: sub.endDate,
                message: "Cancel in the store; premium access continues until the end of the period"
            )
        )
    }

    func entitlement(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (user, app) = try request.internalUserAndApp(context)
        let (sub, features) = try await status.state(app: app, user: user)
        return try context.json(
            Entitlement(isPremium: sub?.grantsAccess ?? false, status: sub?.grantsAccess == true ? "premium" : "free", features: features)
        )
    }
}

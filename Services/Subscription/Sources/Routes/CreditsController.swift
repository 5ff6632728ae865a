import Foundation
import Hummingbird
import NIOCore
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// UC-SUB-2.4 credits: balance, history, unlocking freemium content, and the internal earn
/// endpoint through which ads grants rewards.
struct CreditsController {
    let db: DatabasePool
    let ledger: CreditLedger
    /// The balance from this replica's memory while it is true (#35).
    let reads: AccessReads
    var subscriptions: SubscriptionStore { SubscriptionStore(logger: logger) }
    let idempotency: IdempotencyStore
    let clock: any WallClock
    let logger: Logger

    func addRoutes(user: RouterGroup<ServiceRequestContext>, internalGroup: RouterGroup<ServiceRequestContext>) {
        user.get("credits/balance") { _, context in
            let (app, userID) = try context.requireUser()
            // One integer: written as bytes, not through JSONEncoder (7 % of this read's CPU).
            let balance = try await reads.balance(app: app, user: userID)
            return context.json(encoded: ByteBuffer(string: #"{"balance":\#(balance)}"#))
        }
        user.get("credits/transactions") { request, context in try await transactions(request, context) }
        user.post("content/:id/unlock") { request, context in try await unlock(request, context) }
        internalGroup.on(InternalRoutes.earnCredits) { request, context in try await earn(request, context) }
    }

    struct Page: Codable {
        var transactions: [CreditTransaction]
        var nextBefore: Int64?
        enum CodingKeys: String, CodingKey {
            case transactions
            case nextBefore = "next_before"
        }
    }

    func transactions(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, userID) = try context.requireUser()
        let q = request.uri.queryParameters
        let limit: Int
        if let raw = q.get("limit") {
            guard let l = Int(raw), (1...100).contains(l) else { throw AppError.badRequest("limit must be 1 to 100", field: "limit") }
            limit = l
        } else {
            limit = 20
        }
        var before: Int64?
        if let raw = q.get("before") {
            guard let b = Int64(raw), b > 0 else { throw AppError.badRequest("before must be a transaction id", field: "before") }
            before = b
        }
        let rows = try await db.withConnection { try await ledger.transactions(app: app, user: userID, before: before, limit: limit, on: $0) }
        return try context.json(Page(transactions: rows, nextBefore: rows.count == limit ? rows.last?.id : nil))
    }

    func unlock(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, userID) = try context.requireUser()
        guard let contentID = context.parameters.get("id"), !contentID.isEmpty, contentID.utf8.count <= 200 else {
            throw AppError.badRequest("Invalid content id", field: "id")
        }
        if let key = request.headers[.idempotencyKey], key.utf8.count > 200 {
            throw AppError.badRequest("Idempotency-Key is too long", field: "Idempotency-Key")
        }
        let result = try await CreditUnlocking(db: db, ledger: ledger, subscriptions: subscriptions, idempotency: idempotency, logger: logger)
            .unlock(app: app, user: userID, content: contentID, idempotencyKey: request.headers[.idempotencyKey], now: clock.now())
        return Response(
            status: .init(code: result.status),
            headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: result.body))
        )
    }

    struct EarnResponse: Codable {
        var credited: Bool
        var balance: Int
        var transaction: CreditTransaction
    }

    static let sources: Set<String> = ["ad_reward", "promo", "campaign", "purchase_bonus", "referral"]

    func earn(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let body = try await request.decodeJSON(as: CreditEarnRequest.self, context: context)
        guard (1...1000).contains(body.amount) else { throw AppError.validation("amount", "amount must be 1 to 1000") }
        guard Self.sources.contains(body.source) else {
            throw AppError.validation("source", "source must be one of \(Self.sources.sorted().joined(separator: ", "))")
        }
        guard !body.referenceID.isEmpty, body.referenceID.utf8.count <= 200 else {
            throw AppError.validation("reference_id", "reference_id must be 1 to 200 bytes")
        }
        let now = clock.now()
        let (tx, created) = try await CreditEarning(db: db, ledger: ledger, logger: logger).earn(body, now: now)
        return try context.json(EarnResponse(credited: created, balance: tx.balanceAfter, transaction: tx))
    }
}

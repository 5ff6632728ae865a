import Foundation
import Hummingbird
import Logging
import ServiceKit
import SubscriptionDomain
import WireTypes

/// `/admin/users/{id}/credits`: support grants or takes back credits with a reason (#16),
/// through the ledger (so they show in the user's history and export), once per
/// `Idempotency-Key`; the operator's request is in `operator_audit`.
struct SupportCreditsController {
    let db: DatabasePool
    let ledger: CreditLedger
    let grants: SupportGrants
    let clock: any WallClock

    struct Body: Decodable {
        var amount: Int
        var reason: String
    }
    struct Adjusted: Encodable {
        var transaction: CreditTransaction
        var balance: Int
        var replayed: Bool
    }
    struct Shown: Encodable {
        var balance: Int
        var transactions: [CreditTransaction]
    }

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/users/:id/credits") { _, context in
            let app = try context.requireApp()
            let user = try Self.userID(context)
            let shown = try await db.withConnection { conn in
                Shown(
                    balance: try await ledger.balance(app: app, user: user, on: conn),
                    transactions: try await ledger.transactions(app: app, user: user, before: nil, limit: 50, on: conn)
                )
            }
            return try context.json(shown)
        }
        admin.post("admin/users/:id/credits") { request, context in
            let app = try context.requireApp()
            let user = try Self.userID(context)
            let key = try Self.requiredKey(request)
            let body = try await request.decodeJSON(as: Body.self, context: context)
            guard body.amount != 0, abs(body.amount) <= 100_000 else {
                throw AppError.validation("amount", "amount must be non-zero, at most 100000 either way")
            }
            let reason = try OperatorReason.checked(body.reason)
            let now = clock.now()
            let outcome = try await grants.adjustCredits(app: app, user: user, amount: body.amount, reason: reason, key: key, now: now)
            switch outcome {
            case .done(let tx, let created):
                return try context.json(Adjusted(transaction: tx, balance: tx.balanceAfter, replayed: !created), status: created ? .created : .ok)
            case .insufficient(let balance):
                throw AppError(
                    .conflict,
                    SubscriptionErrorCode.insufficientCredits,
                    "The user has \(balance) credits; nothing was taken",
                    extra: ["balance": .int(balance)]
                )
            case .keyReused:
                throw AppError(.unprocessableContent, "idempotency_key_reused", "This Idempotency-Key was used for another amount")
            }
        }
    }

    /// Support's grants happen once per key: a retry answers the first.
    static func requiredKey(_ request: Request) throws -> String {
        guard let key = request.headers[.idempotencyKey], (1...100).contains(key.count) else {
            throw AppError(
                SubscriptionErrorCode.idempotencyKeyRequired,
                "Idempotency-Key (1-100 characters) is required: a retry must not grant twice",
                extra: ["field": "Idempotency-Key"]
            )
        }
        return key
    }

    static func userID(_ context: ServiceRequestContext) throws -> UUID {
        guard let id = context.parameters.get("id", as: UUID.self) else { throw AppError.validation("id", "the user id must be a UUID") }
        return id
    }
}

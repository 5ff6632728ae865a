import AuthDomain
import AuthMessaging
import Foundation
import Logging
import ServiceKit
import WireTypes

/// What the other services tell auth about a user: subscription's premium status (ordered by
/// its versions; a suspended account stays suspended) and its ask for the purchase confirmation
/// mail (sent once per subscription; a failed send is a 503 so the outbox asks again). The flow
/// owns the transactions (#50).
struct ServiceFacts: Sendable {
    let db: DatabasePool
    let logger: Logger
    let clock: any WallClock
    let users: UserStore
    let mailer: any Mailer
    let emails: EmailComposer
    let facts: FactPublisher

    /// The user as it stands after the fact (unchanged when the fact is old); nil when unknown.
    func status(_ body: UserStatusUpdate, userID: UUID) async throws -> User? {
        try await db.withTransaction(logger: logger) { conn -> User? in
            guard let current = try await users.find(.id(userID), appID: body.appID, on: conn, forUpdate: true) else { return nil }
            // Subscription's versions order its answers: an older or repeated one changes nothing.
            let outcome = try await facts.facts.advance(app: body.appID, user: userID, fact: "status", version: body.version, on: conn)
            guard outcome.applied else { return current }
            // A suspended account stays suspended whatever its subscription does.
            if current.status == .suspended { return current }
            // #46: the app's streams hear each new premium fact (a purchase, a renewal, a
            // refund, an expiry, a cancel, a support grant), with subscription's version.
            try await MessagingOutbox.live(
                .subscriptionUpdated,
                app: body.appID,
                user: userID,
                version: body.version,
                data: [
                    "premium": .bool(body.status == .premium), "status": .string(body.status.rawValue), "version": .int(Int(body.version)),
                ],
                on: conn,
                logger: logger
            )
            return try await users.setStatus(userID, appID: body.appID, status: body.status, reason: nil, on: conn)
        }
    }

    /// `sent`, `already_sent` or `no_email`.
    func purchaseConfirmation(_ body: PurchaseConfirmation, userID: UUID) async throws -> String {
        try await db.withTransaction(logger: logger) { conn in
            guard let user = try await users.find(.id(userID), appID: body.appID, on: conn) else {
                // An erased account gets no mail, and the outbox stops asking (410 is final).
                if try await facts.facts.isErased(app: body.appID, user: userID, on: conn) {
                    throw AppError(AuthErrorCode.userErased, "This account was deleted")
                }
                throw AppError.notFound("User")
            }
            guard let email = user.email else { return "no_email" }
            guard
                try await SentEmailStore(logger: logger).claim(
                    app: body.appID,
                    user: userID,
                    kind: "purchase_confirmation",
                    reference: body.subscriptionID.lowercasedString,
                    now: clock.now(),
                    on: conn
                )
            else {
                return "already_sent"
            }
            do {
                try await mailer.send(try await emails.purchaseConfirmation(app: body.appID, to: email, body))
            } catch {
                logger.warning("purchase confirmation not sent; the outbox retries", metadata: ["error": "\(error)"])
                throw AppError(AuthErrorCode.mailUnavailable, "The mail server did not accept the message; try again")
            }
            return "sent"
        }
    }
}

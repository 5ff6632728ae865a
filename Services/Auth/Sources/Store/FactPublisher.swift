import AuthDomain
import AuthMessaging
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// Auth owns the facts about a user's sessions and consents. Each change gets the user's next
/// version in the caller's transaction, is stored in auth's own schema (auth's replicas read
/// it) and is written to the outbox for every service that acts on it.
struct FactPublisher: Sendable {
    let logger: Logger
    var facts: UserFactStore { UserFactStore(logger: logger) }

    /// Every service but auth refuses tokens on what it is told.
    static let sessionReceivers: [ServiceName] = [.subscription, .offline, .ads]
    /// The consents other services act on, and who acts on each.
    static let consentReceivers: [String: [ServiceName]] = [
        ConsentFact.geolocation: [.offline],
        ConsentFact.personalizedAds: [.ads],
    ]

    enum SessionEnd: Sendable {
        /// Logout of one device: that token family.
        case one(UUID)
        /// Logout of every device, password reset.
        case all
        case suspended(reason: String)
        /// The suspension is lifted (tokens of the suspended epoch stay refused).
        case reinstated
        /// Deletion executed, guest expired.
        case erased
    }

    /// Records the end and queues it for the other services; the caller applies the returned
    /// fact to its own registry once the transaction has committed.
    func endSessions(app: UUID, user: UUID, _ end: SessionEnd, on conn: PostgresConnection) async throws -> SessionFact {
        let version = try await facts.nextVersion(app: app, user: user, on: conn)
        let raise: Bool
        switch end {
        case .one, .reinstated: raise = false
        case .all, .suspended, .erased: raise = true
        }
        // A guest that expired has no row left: its epoch no longer matters, it is erased.
        let epoch = try await sessionEpoch(user: user, raise: raise, on: conn) ?? Int(Int32.max)
        var fact = SessionFact(appID: app, userID: user, version: version, sessionEpoch: epoch, state: .active)
        switch end {
        case .one(let sid): fact.revokedSessionID = sid
        case .all, .reinstated: break
        case .suspended(let reason):
            fact.state = .suspended
            fact.reason = reason
        case .erased: fact.state = .erased
        }
        try await facts.record(fact, on: conn)
        // #46: the streams this ends close at commit (the event is not kept: it is never resumed).
        switch end {
        case .one(let sid):
            try await MessagingOutbox.endStreams(
                .sessionRevoked,
                app: app,
                user: user,
                version: version,
                data: ["session_id": .string(sid.lowercasedString), "reason": .string("logout")],
                on: conn,
                logger: logger
            )
        case .all:
            try await MessagingOutbox.endStreams(
                .sessionRevoked,
                app: app,
                user: user,
                version: version,
                data: ["session_epoch": .int(epoch), "reason": .string("logout_all")],
                on: conn,
                logger: logger
            )
        case .suspended:
            try await MessagingOutbox.endStreams(
                .sessionRevoked,
                app: app,
                user: user,
                version: version,
                data: ["session_epoch": .int(epoch), "reason": .string("suspended")],
                on: conn,
                logger: logger
            )
        case .erased:
            try await MessagingOutbox.endStreams(.accountDeleted, app: app, user: user, version: version, data: [:], on: conn, logger: logger)
        case .reinstated: break
        }
        for service in Self.sessionReceivers {
            try await Outbox.write(
                try OutboxMessage(InternalRoutes.sessions, to: service, path: InternalRoutes.sessions.path(user: user, app: app), body: fact),
                on: conn,
                logger: logger
            )
        }
        return fact
    }

    /// The user's session epoch, raised first when asked (nil: no such user row).
    func sessionEpoch(user: UUID, raise: Bool, on conn: PostgresConnection) async throws -> Int? {
        let rows =
            raise
            ? try await conn.run("UPDATE users SET session_epoch = session_epoch + 1 WHERE id = \(user) RETURNING session_epoch", logger: logger)
            : try await conn.run("SELECT session_epoch FROM users WHERE id = \(user)", logger: logger)
        for try await e in rows.decode(Int.self) { return e }
        return nil
    }

    /// A consent changed at auth (or was answered on another service's screen and accepted
    /// here): its next version is recorded and sent to the services that act on it.
    @discardableResult
    func consentChanged(app: UUID, user: UUID, consent: String, value: Bool, on conn: PostgresConnection) async throws -> Int64 {
        let version = try await facts.nextVersion(app: app, user: user, on: conn)
        _ = try await facts.advance(app: app, user: user, fact: "consent.\(consent)", version: version, on: conn)
        let fact = ConsentFact(appID: app, userID: user, consent: consent, value: value, version: version)
        try await MessagingOutbox.webhook(
            .consentChanged,
            app: app,
            version: version,
            data: ["user_id": .string(user.lowercasedString), "consent": .string(consent), "value": .bool(value)],
            on: conn,
            logger: logger
        )
        for service in Self.consentReceivers[consent] ?? [] {
            try await Outbox.write(
                try OutboxMessage(
                    InternalRoutes.consentFact,
                    to: service,
                    path: InternalRoutes.consentFact.path(user: user, consent: consent, app: app),
                    body: fact
                ),
                on: conn,
                logger: logger
            )
        }
        return version
    }

    /// The version of auth's current answer for a consent (0 before any change).
    func consentVersion(app: UUID, user: UUID, consent: String, on conn: PostgresConnection) async throws -> Int64 {
        try await facts.version(app: app, user: user, fact: "consent.\(consent)", on: conn) ?? 0
    }
}

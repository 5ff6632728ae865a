import AuthDomain
import Foundation
import Logging
import PostgresNIO
import ServiceKit
import WireTypes

/// What auth's core tells its messaging, in the core's own transaction (#50). With the
/// composition (`AuthMessaging`) it is the module's only door: the core names no store, stream,
/// sender or provider of it, and the module calls nothing of the core back.
package enum MessagingOutbox {
    /// A fact for the app's webhooks (#33), recorded with the transaction that made it and sent
    /// after its commit. False when no endpoint of the app wants it (nothing written).
    @discardableResult
    package static func webhook(
        _ type: WebhookEventType,
        app: UUID,
        version: Int64,
        data: [String: JSONValue],
        createdAt: Date = Date(),
        on conn: PostgresConnection,
        logger: Logger
    ) async throws -> Bool {
        try await WebhookStore.record(
            WebhookEvent(type: type, appID: app, createdAt: createdAt, version: version, data: data),
            on: conn,
            logger: logger
        )
    }

    /// An event the user's live streams hear and keep (a stream that comes back resumes after it).
    package static func live(
        _ type: LiveEventType,
        app: UUID,
        user: UUID,
        version: Int64,
        data: [String: JSONValue],
        on conn: PostgresConnection,
        logger: Logger
    ) async throws {
        try await LiveStore.record(app: app, user: user, type: type, version: version, data: data, on: conn, logger: logger)
    }

    /// An event that ends the user's streams (a revoked session, an erasure): heard at commit, not kept.
    package static func endStreams(
        _ type: LiveEventType,
        app: UUID,
        user: UUID,
        version: Int64,
        data: [String: JSONValue],
        on conn: PostgresConnection,
        logger: Logger
    ) async throws {
        try await LiveStore.announce(app: app, user: user, type: type, version: version, data: data, on: conn, logger: logger)
    }

    /// A device signed out: it hears nothing more (#30).
    package static func forgetDevice(app: UUID, user: UUID, device: String, on conn: PostgresConnection, logger: Logger) async throws {
        try await PushStore.remove(app: app, user: user, device: device, on: conn, logger: logger)
    }

    /// The user signed out everywhere: no device of theirs hears anything more.
    package static func forgetDevices(app: UUID, user: UUID, on conn: PostgresConnection, logger: Logger) async throws {
        try await PushStore.removeAll(app: app, user: user, on: conn, logger: logger)
    }

    /// The user is erased: the events their streams kept go too.
    package static func forgetLiveEvents(app: UUID, user: UUID, on conn: PostgresConnection, logger: Logger) async throws {
        _ = try await LiveStore.erase(user: user, app: app, on: conn, logger: logger)
    }
}

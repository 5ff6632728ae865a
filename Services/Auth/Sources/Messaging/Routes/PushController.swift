import AuthDomain
import Foundation
import Hummingbird
import ServiceKit
import WireTypes

/// The messenger's routes: the app registers its devices (`/auth/push-tokens`), the operator
/// sets the app's keys, options and sends (`/admin/push/...`), the other services ask for a
/// notification through their outbox (`/internal/users/{id}/notifications`, `/internal/notifications`).
struct PushController: Sendable {
    let messenger: PushMessenger
    var store: PushStore { messenger.store }

    // MARK: the app

    func addUserRoutes(to user: RouterGroup<ServiceRequestContext>) {
        user.put("auth/push-tokens") { request, context in
            let (app, userID) = try context.requireUser()
            let body = try await request.decodeJSON(as: PushTokenRegistration.self, context: context)
            let device = try body.checked(acceptLanguage: request.headers[.acceptLanguage])
            switch try await messenger.register(app: app, user: userID, device) {
            case .tooManyDevices:
                throw AppError(
                    AuthErrorCode.tooManyDevices,
                    "At most \(PushTokenRegistration.maxDevices) devices per user; remove one first",
                    extra: ["field": .string("device_id")]
                )
            case .registered:
                guard let listed = try await store.devices(app: app, user: userID).first(where: { $0.deviceID == device.deviceID }) else {
                    throw AppError(AuthErrorCode.deviceChanged, "The device was removed meanwhile; register it again")
                }
                return try context.json(listed)
            }
        }
        user.get("auth/push-tokens") { _, context in
            let (app, userID) = try context.requireUser()
            return try context.json(["devices": try await store.devices(app: app, user: userID)])
        }
        user.delete("auth/push-tokens/:device_id") { _, context in
            let (app, userID) = try context.requireUser()
            guard let device = context.parameters.get("device_id"), (1...200).contains(device.utf8.count) else {
                throw AppError.badRequest("device_id must be 1 to 200 characters", field: "device_id")
            }
            guard try await store.remove(app: app, user: userID, device: device) else { throw AppError.notFound("Device") }
            return try context.json(["removed": true])
        }
    }

    // MARK: the operator

    struct APNsBody: Decodable {
        var teamID: String
        var keyID: String
        var privateKey: String
        var topic: String
        var environment: String?
        enum CodingKeys: String, CodingKey {
            case teamID = "team_id"
            case keyID = "key_id"
            case privateKey = "private_key"
            case topic, environment
        }
    }
    struct FCMBody: Decodable {
        var serviceAccount: FCMCredentials.ServiceAccount
        enum CodingKeys: String, CodingKey { case serviceAccount = "service_account" }
    }
    struct SendBody: Decodable {
        var userID: UUID
        var title: String?
        var body: String?
        var key: String?
        enum CodingKeys: String, CodingKey {
            case userID = "user_id"
            case title, body, key
        }
    }

    struct RecentSends: Encodable {
        var sends: [PushStore.RecentSend]
        var nextBefore: String?
        enum CodingKeys: String, CodingKey {
            case sends
            case nextBefore = "next_before"
        }
    }

    func addAdminRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("admin/push") { _, context in try await shown(try context.requireApp(), context) }
        // The recent sends, newest first, paged by `before` (the last id of the previous page).
        admin.get("admin/push/sends") { request, context in
            let app = try context.requireApp()
            let page = PageQuery(request)
            let (limit, before) = (try page.limit(max: 100), try page.id("before"))
            let sends = try await store.db.withConnection { try await store.recentSends(app: app, before: before, limit: limit, on: $0) }
            return try context.json(RecentSends(sends: sends, nextBefore: sends.count == limit ? sends.last.map { String($0.id) } : nil))
        }
        admin.put("admin/push/apns") { request, context in
            let app = try context.requireApp()
            let b = try await request.decodeJSON(as: APNsBody.self, context: context)
            let settings = APNsCredentials.Settings(teamID: b.teamID, keyID: b.keyID, topic: b.topic, environment: b.environment, privateKey: nil)
            let creds = try APNsCredentials(settings, privateKeyPEM: b.privateKey)
            let shown: JSONValue = .object([
                "team_id": .string(b.teamID), "key_id": .string(b.keyID), "topic": .string(b.topic),
                "environment": .string(creds.environment.rawValue),
            ])
            guard
                try await store.setCredentials(
                    app: app,
                    provider: "apns",
                    settings: shown,
                    secret: b.privateKey,
                    fingerprint: creds.fingerprint
                ) != nil
            else { throw AppError.notFound("Application") }
            messenger.credentials.invalidate()
            return try await self.shown(app, context)
        }
        admin.put("admin/push/fcm") { request, context in
            let app = try context.requireApp()
            let b = try await request.decodeJSON(as: FCMBody.self, context: context)
            let creds = try FCMCredentials(b.serviceAccount)
            let secret = String(decoding: try JSON.encoder.encode(b.serviceAccount), as: UTF8.self)
            let shown: JSONValue = .object(["project_id": .string(creds.projectID), "client_email": .string(creds.clientEmail)])
            guard
                try await store.setCredentials(
                    app: app,
                    provider: "fcm",
                    settings: shown,
                    secret: secret,
                    fingerprint: creds.fingerprint
                ) != nil
            else { throw AppError.notFound("Application") }
            messenger.credentials.invalidate()
            return try await self.shown(app, context)
        }
        admin.delete("admin/push/:provider") { _, context in
            let app = try context.requireApp()
            guard let provider = context.parameters.get("provider"), ["apns", "fcm"].contains(provider) else {
                throw AppError.badRequest("provider must be apns or fcm", field: "provider")
            }
            guard try await store.deleteCredentials(app: app, provider: provider) else { throw AppError.notFound("Credentials") }
            messenger.credentials.invalidate()
            return Response(status: .noContent)
        }
        admin.put("admin/push/settings") { request, context in
            let app = try context.requireApp()
            let o = try await request.decodeJSON(as: PushOptions.self, context: context)
            try o.check()
            guard try await store.setOptions(app: app, o) != nil else { throw AppError.notFound("Application") }
            messenger.options.invalidate()
            return try await self.shown(app, context)
        }
        // A test to one user's devices, answered with each device's provider result.
        admin.post("admin/push/test") { request, context in
            let app = try context.requireApp()
            let b = try await request.decodeJSON(as: SendBody.self, context: context)
            return try await sendNow(app: app, user: b.userID, kind: .test, data: [:], key: "test:\(UUID().lowercasedString)", context)
        }
        // What the operator writes to one user (counted apart from the daily cap).
        admin.post("admin/push/send") { request, context in
            let app = try context.requireApp()
            let b = try await request.decodeJSON(as: SendBody.self, context: context)
            guard let title = b.title, (1...100).contains(title.count) else {
                throw AppError.validation("title", "title must be 1 to 100 characters")
            }
            guard let text = b.body, (1...400).contains(text.count) else { throw AppError.validation("body", "body must be 1 to 400 characters") }
            let key = try Self.checkedKey(b.key ?? "operator:\(UUID().lowercasedString)")
            return try await sendNow(app: app, user: b.userID, kind: .operatorMessage, data: ["title": title, "body": text], key: key, context)
        }
    }

    /// Sent inside the request (the operator waits for the providers' answers); a send the
    /// provider asked to retry goes on in the background job.
    private func sendNow(
        app: UUID,
        user: UUID,
        kind: PushKind,
        data: [String: String],
        key: String,
        _ context: ServiceRequestContext
    ) async throws -> Response {
        // Checked first: an unknown user (or another app's) leaves no notification behind.
        guard try await store.isUser(app: app, user: user) else { throw AppError.notFound("User") }
        let (id, created) = try await messenger.request(
            app: app,
            key: key,
            kind: kind,
            users: [user],
            data: data,
            requestedBy: "operator",
            queueJob: false
        )
        if created, let retryAfter = try await messenger.deliver(notificationID: id) {
            try await store.db.withConnection { conn in
                try await JobQueue.enqueue(
                    on: conn,
                    queue: PushMessenger.queue,
                    kind: PushMessenger.sendJob,
                    payload: PushMessenger.JobPayload(notificationID: id, round: 2),
                    runAfter: Double(retryAfter),
                    uniqueKey: "push:\(id):2",
                    logger: messenger.logger
                )
            }
        }
        let rows = try await store.deliveries(notification: id)
        guard !rows.isEmpty else { throw AppError.notFound("User") }
        return try context.json([
            "notification_id": JSONValue.int(Int(id)),
            "results": try JSON.decoder.decode(JSONValue.self, from: JSON.encoder.encode(rows)),
        ])
    }

    private func shown(_ app: UUID, _ context: ServiceRequestContext) async throws -> Response {
        let creds = try await store.shownCredentials(app: app)
        let options = try await messenger.options.value(for: app) ?? PushOptions()
        return try context.json(Shown(credentials: creds, settings: options))
    }

    struct Shown: Encodable {
        var credentials: [PushStore.ShownCredentials]
        var settings: PushOptions
    }

    // MARK: the other services

    /// The sender's key (e.g. `credit:<ledger id>`): the same key twice is one notification.
    static func checkedKey(_ key: String) throws -> String {
        guard (1...200).contains(key.utf8.count), !key.contains(where: { $0.isWhitespace }) else {
            throw AppError.validation("key", "key must be 1 to 200 characters without spaces")
        }
        return key
    }

    static func checkedData(_ data: [String: String]?) throws -> [String: String] {
        let data = data ?? [:]
        guard data.count <= 20, data.allSatisfy({ (1...64).contains($0.key.count) && $0.value.count <= 500 }) else {
            throw AppError.validation("data", "data is at most 20 string values (keys up to 64, values up to 500 characters)")
        }
        return data
    }

    func addInternalRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.on(InternalRoutes.notifyUser) { request, context in
            let (userID, appID) = try request.internalUserAndApp(context)
            let b = try await request.decodeJSON(as: NotificationRequest.self, context: context)
            guard b.appID == appID else { throw AppError.validation("app_id", "the query and the body name different applications") }
            return try await accept(b, users: [userID], context)
        }
        // One message for many players (a content update): one notification, one job.
        group.on(InternalRoutes.notifyUsers) { request, context in
            let b = try await request.decodeJSON(as: NotificationRequest.self, context: context)
            guard let users = b.userIDs, (1...PushController.maxBroadcast).contains(users.count) else {
                throw AppError.validation("user_ids", "user_ids lists 1 to \(PushController.maxBroadcast) users")
            }
            return try await accept(b, users: Array(Set(users)), context)
        }
    }

    /// The users one broadcast message may name (about 0.9 MB of ids, under the 1 MiB body limit).
    static let maxBroadcast = 25_000

    private func accept(_ b: NotificationRequest, users: [UUID], _ context: ServiceRequestContext) async throws -> Response {
        guard let kind = PushKind(rawValue: b.kind), PushKind.requestable.contains(kind) else {
            throw AppError.validation("kind", "kind must be one of \(PushKind.requestable.map(\.rawValue).sorted().joined(separator: ", "))")
        }
        let key = try Self.checkedKey(b.key)
        let data = try Self.checkedData(b.data)
        let (id, created) = try await messenger.request(
            app: b.appID,
            key: key,
            kind: kind,
            users: users,
            data: data,
            requestedBy: context.callingService?.rawValue ?? "service"
        )
        return try context.json(["notification_id": JSONValue.int(Int(id)), "created": .bool(created)], status: created ? .accepted : .ok)
    }
}

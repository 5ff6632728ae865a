import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-SUB-2.2: what a content needs and whether this user has it, with the ways to unlock it.
struct ContentController {
    let db: DatabasePool
    let ledger: CreditLedger
    let plans: PlanStore
    let subscriptions: SubscriptionsController
    let access: AccessStore
    let clock: any WallClock
    let logger: Logger

    func addRoutes(to user: RouterGroup<ServiceRequestContext>) {
        user.get("content/:id") { request, context in try await describe(request, context) }
        user.post("content/:id/check-access") { request, context in try await checkAccess(request, context) }
    }

    struct ViaSubscription: Codable { var available: Bool; var plans: [Plan] }
    struct ViaCredits: Codable {
        var cost: Int; var durationHours: Int; var userCanAfford: Bool; var userBalance: Int
        enum CodingKeys: String, CodingKey { case cost; case durationHours = "duration_hours"; case userCanAfford = "user_can_afford"; case userBalance = "user_balance" }
    }
    struct UnlockOptions: Codable {
        var viaSubscription: ViaSubscription?
        var viaCredits: ViaCredits?
        enum CodingKeys: String, CodingKey { case viaSubscription = "via_subscription"; case viaCredits = "via_credits" }
    }
    struct ContentInfo: Codable { var contentID: String; var accessLevel: ContentRule.Level
        enum CodingKeys: String, CodingKey { case contentID = "content_id"; case accessLevel = "access_level" } }
    struct Description: Codable {
        var content: ContentInfo; var hasAccess: Bool; var via: AccessPolicy.Via?; var unlockedUntil: Date?; var unlockOptions: UnlockOptions?
        enum CodingKeys: String, CodingKey {
            case content, hasAccess = "has_access", via, unlockedUntil = "unlocked_until", unlockOptions = "unlock_options"
        }
    }

    func contentID(_ context: ServiceRequestContext) throws -> String {
        guard let id = context.parameters.get("id"), !id.isEmpty, id.utf8.count <= 200 else { throw AppError.badRequest("Invalid content id", field: "id") }
        return id
    }

    /// Reads everything the decision needs.
    func evaluate(app: UUID, user: UUID, content: String) async throws -> (ContentRule, Description) {
        let now = clock.now()
        let (sub, _) = try await subscriptions.state(app: app, user: user)
        let hasSubscription = sub?.grantsAccess ?? false
        let (rule, unlock, balance, planList) = try await db.withConnection { conn -> (ContentRule?, ContentUnlock?, Int, [Plan]) in
            guard let rule = try await ledger.rule(app: app, content: content, on: conn) else { return (nil, nil, 0, []) }
            let unlock = rule.accessLevel == .freemium ? try await ledger.activeUnlock(app: app, user: user, content: content, now: now, on: conn) : nil
            let balance = rule.accessLevel == .freemium ? try await ledger.balance(app: app, user: user, on: conn) : 0
            let planList = hasSubscription || rule.accessLevel == .free ? [] : try await plans.active(app: app, on: conn)
            return (rule, unlock, balance, planList)
        }
        guard let rule else { throw AppError.notFound("Content") }
        let via = AccessPolicy.decide(level: rule.accessLevel, hasSubscription: hasSubscription, hasUnlock: unlock != nil)
        var options: UnlockOptions?
        if via == nil {
            options = UnlockOptions(
                viaSubscription: ViaSubscription(available: !planList.isEmpty, plans: planList),
                viaCredits: rule.accessLevel == .freemium
                    ? ViaCredits(cost: rule.creditCost, durationHours: rule.unlockHours, userCanAfford: balance >= rule.creditCost, userBalance: balance)
                    : nil)
        }
        return (rule, Description(content: ContentInfo(contentID: rule.contentID, accessLevel: rule.accessLevel), hasAccess: via != nil, via: via,
                                  unlockedUntil: via == .credits ? unlock?.expiresAt : nil, unlockOptions: options))
    }

    func describe(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        return try context.json(try await evaluate(app: app, user: user, content: try contentID(context)).1)
    }

    /// Logs the decision (`access_logs`) and answers 403 when refused. Every check names its
    /// device (`X-Device-ID`, required): without it the 5-device limit could be skipped.
    func checkAccess(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (app, user) = try context.requireUser()
        let content = try contentID(context)
        guard let raw = request.headers[.xDeviceID]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty, raw.utf8.count <= 200 else {
            throw AppError(.badRequest, "invalid_request", "Header 'X-Device-ID' is required (1 to 200 characters): access is counted per device",
                           extra: ["field": "X-Device-ID"])
        }
        let device = raw
        let now = clock.now()
        if let active = try await access.admitDevice(app: app, user: user, device: device, limit: AccessPolicy.maxActiveDevices,
                                                     since: now.addingTimeInterval(-AccessPolicy.deviceActiveWindow), now: now, db: db) {
            throw AppError(.tooManyRequests, "concurrent_access_limit", "Too many devices in use on this account",
                           extra: ["active_devices": .int(active), "max_devices": .int(AccessPolicy.maxActiveDevices)])
        }
        let (rule, d) = try await evaluate(app: app, user: user, content: content)
        let status = d.via == .subscription ? "premium" : "free"
        try await access.log(app: app, user: user, content: content, granted: d.hasAccess, userStatus: status, via: d.via?.rawValue,
                             device: device, now: now, db: db)
        guard d.hasAccess else {
            let options = String(decoding: try JSON.encoder.encode(d.unlockOptions), as: UTF8.self)
            throw AppError(.forbidden, "access_denied", rule.accessLevel == .premium ? "This content is for premium members" : "Unlock this content to play it",
                           extra: ["access_level": .string(rule.accessLevel.rawValue),
                                   "unlock_options": (try? JSONDecoder().decode(JSONValue.self, from: Data(options.utf8))) ?? .null])
        }
        return try context.json(["access_granted": JSONValue.bool(true), "via": .string(d.via!.rawValue),
                                 "access_level": .string(rule.accessLevel.rawValue)])
    }
}

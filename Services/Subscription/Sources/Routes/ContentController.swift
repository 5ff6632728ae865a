import Foundation
import Hummingbird
import NIOCore
import PostgresNIO
import ServiceKit
import SubscriptionDomain
import WireTypes

/// UC-SUB-2.2: what a content needs and whether this user has it, with the ways to unlock it.
struct ContentController {
    let status: SubscriptionStatusCheck
    let access: AccessStore
    let reads: AccessReads
    let admission: DeviceAdmission
    /// Each decision is logged before it is answered, the decisions of concurrent checks in
    /// one write (group commit).
    let decisions: GroupCommit<AccessStore.Decision>
    let clock: any WallClock
    let logger: Logger

    /// `logging`: the check writes only its decision and the device's sighting, which no cache
    /// reads, so it keeps the user's cached answers (its next check is answered from memory).
    func addRoutes(to user: RouterGroup<ServiceRequestContext>, logging: RouterGroup<ServiceRequestContext>) {
        user.get("content/:id") { request, context in try await describe(request, context) }
        logging.post("content/:id/check-access") { request, context in try await checkAccess(request, context) }
    }

    struct ViaSubscription: Codable {
        var available: Bool
        var plans: [Plan]
    }
    struct ViaCredits: Codable {
        var cost: Int
        var durationHours: Int
        var userCanAfford: Bool
        var userBalance: Int
        enum CodingKeys: String, CodingKey {
            case cost
            case durationHours = "duration_hours"
            case userCanAfford = "user_can_afford"
            case userBalance = "user_balance"
        }
    }
    struct UnlockOptions: Codable {
        var viaSubscription: ViaSubscription?
        var viaCredits: ViaCredits?
        enum CodingKeys: String, CodingKey {
            case viaSubscription = "via_subscription"
            case viaCredits = "via_credits"
        }
    }
    struct ContentInfo: Codable {
        var contentID: String
        var accessLevel: ContentRule.Level
        enum CodingKeys: String, CodingKey {
            case contentID = "content_id"
            case accessLevel = "access_level"
        }
    }
    struct Description: Codable {
        var content: ContentInfo
        var hasAccess: Bool
        var via: AccessPolicy.Via?
        var unlockedUntil: Date?
        var unlockOptions: UnlockOptions?
        enum CodingKeys: String, CodingKey {
            case content
            case hasAccess = "has_access"
            case via
            case unlockedUntil = "unlocked_until"
            case unlockOptions = "unlock_options"
        }
    }

    func contentID(_ context: ServiceRequestContext) throws -> String {
        guard let id = context.parameters.get("id"), !id.isEmpty, id.utf8.count <= 200 else {
            throw AppError.badRequest("Invalid content id", field: "id")
        }
        return id
    }

    /// Reads everything the decision needs.
    func evaluate(app: UUID, user: UUID, content: String) async throws -> (ContentRule, Description) {
        let now = clock.now()
        let (sub, _) = try await status.state(app: app, user: user)
        let hasSubscription = sub?.grantsAccess ?? false
        guard let rule = try await reads.rule(app: app, content: content) else { throw AppError.notFound("Content") }
        let unlock = rule.accessLevel == .freemium ? try await reads.activeUnlock(app: app, user: user, content: content, now: now) : nil
        let balance = rule.accessLevel == .freemium ? try await reads.balance(app: app, user: user) : 0
        let planList = hasSubscription || rule.accessLevel == .free ? [] : try await reads.plans(app: app)
        let via = AccessPolicy.decide(level: rule.accessLevel, hasSubscription: hasSubscription, hasUnlock: unlock != nil)
        var options: UnlockOptions?
        if via == nil {
            options = UnlockOptions(
                viaSubscription: ViaSubscription(available: !planList.isEmpty, plans: planList),
                viaCredits: rule.accessLevel == .freemium
                    ? ViaCredits(
                        cost: rule.creditCost,
                        durationHours: rule.unlockHours,
                        userCanAfford: balance >= rule.creditCost,
                        userBalance: balance
                    )
                    : nil
            )
        }
        return (
            rule,
            Description(
                content: ContentInfo(contentID: rule.contentID, accessLevel: rule.accessLevel),
                hasAccess: via != nil,
                via: via,
                unlockedUntil: via == .credits ? unlock?.expiresAt : nil,
                unlockOptions: options
            )
        )
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
        guard let raw = request.headers.value(.xDeviceID)?.trimmingWhitespace, !raw.isEmpty, raw.utf8.count <= 200 else {
            throw AppError(
                .badRequest,
                "invalid_request",
                "Header 'X-Device-ID' is required (1 to 200 characters): access is counted per device",
                extra: ["field": "X-Device-ID"]
            )
        }
        let device = raw
        let now = clock.now()
        // The content first: a check of a content that does not exist is a 404 that neither
        // counts nor renews the device.
        let (rule, d) = try await evaluate(app: app, user: user, content: content)
        let renewal: DeviceAdmission.Renewal?
        switch try await admission.admit(app: app, user: user, device: device, now: now) {
        case .admitted(let due): renewal = due
        case .refused(let active):
            throw AppError(
                SubscriptionErrorCode.concurrentAccessLimit,
                "Too many devices in use on this account",
                extra: ["active_devices": .int(active), "max_devices": .int(AccessPolicy.maxActiveDevices)]
            )
        }
        let status = d.via == .subscription ? "premium" : "free"
        try await decisions.submit(
            AccessStore.Decision(
                app: app,
                user: user,
                content: content,
                granted: d.hasAccess,
                userStatus: status,
                via: d.via?.rawValue,
                device: device,
                at: now,
                renewsDevice: renewal != nil
            )
        )
        if let renewal { admission.renewed(renewal, at: now) }
        guard d.hasAccess else {
            let options = String(decoding: try JSON.encoder.encode(d.unlockOptions), as: UTF8.self)
            throw AppError(
                SubscriptionErrorCode.accessDenied,
                rule.accessLevel == .premium ? "This content is for premium members" : "Unlock this content to play it",
                extra: [
                    "access_level": .string(rule.accessLevel.rawValue),
                    "unlock_options": (try? JSONDecoder().decode(JSONValue.self, from: Data(options.utf8))) ?? .null,
                ]
            )
        }
        return context.json(encoded: Self.granted[Granted(via: d.via!, level: rule.accessLevel)]!)
    }

    struct Granted: Hashable {
        var via: AccessPolicy.Via
        var level: ContentRule.Level
    }
    /// Every granted answer (a way in, a level), encoded once: the check is the hottest write path.
    static let granted: [Granted: ByteBuffer] = {
        var out: [Granted: ByteBuffer] = [:]
        for via in [AccessPolicy.Via.free, .subscription, .credits] {
            for level in [ContentRule.Level.free, .premium, .freemium] {
                let body: [String: JSONValue] = [
                    "access_granted": .bool(true), "via": .string(via.rawValue), "access_level": .string(level.rawValue),
                ]
                out[Granted(via: via, level: level)] = ByteBuffer(bytes: try! JSON.encoder.encode(body))
            }
        }
        return out
    }()
}

import AuthDomain
import Foundation
import ServiceKit
import WireTypes

/// The live events an app's stream carries (#46): the user's own changes, in the webhook
/// body's shape.
public enum LiveEventType: String, Codable, Sendable, CaseIterable {
    case snapshot = "state.snapshot"
    case reset = "stream.reset"
    case replaced = "stream.replaced"
    case closing = "stream.closing"
    case subscriptionUpdated = "subscription.updated"
    case creditsUpdated = "credits.updated"
    case consentUpdated = "consent.updated"
    case syncConflictOpened = "sync.conflict_opened"
    case downloadCompleted = "download.completed"
    case campaignCompleted = "campaign.completed"
    case sessionRevoked = "session.revoked"
    case accountDeleted = "account.deleted"

    /// The WebSocket close code a stream ends with after this event (nil: it goes on).
    var closeCode: UInt16? {
        switch self {
        case .sessionRevoked: 4001
        case .accountDeleted: 4003
        case .replaced: 4008
        case .closing: 1012
        default: nil
        }
    }
}

/// Where a stream is in one user's events: the event's number in the user's sequence and the
/// first eight hex digits of its id. The id is the epoch: after a failover or a point-in-time
/// restore the same number may name another event, and the id then differs, so the cursor is
/// refused (`stream.reset`) instead of skipping what was written since. Opaque to the client.
public struct LiveCursor: Sendable, Equatable, CustomStringConvertible {
    public var seq: Int64
    public var tag: String

    public init(seq: Int64, tag: String) {
        self.seq = seq
        self.tag = tag
    }
    public init(seq: Int64, id: UUID) { self.init(seq: seq, tag: Self.tag(of: id)) }

    /// Before any event of the user.
    public static let start = LiveCursor(seq: 0, tag: "00000000")

    static func tag(of id: UUID) -> String { String(id.lowercasedString.replacingOccurrences(of: "-", with: "").prefix(8)) }

    public var description: String { "\(seq)-\(tag)" }

    /// `<seq>-<8 hex>`; anything else (too long, another shape) is not a cursor.
    public init?(_ raw: String) {
        guard raw.utf8.count <= 29 else { return nil }
        let parts = raw.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let seq = Int64(parts[0]), seq >= 0, parts[0].allSatisfy(\.isASCII), parts[0].allSatisfy(\.isNumber),
            parts[1].utf8.count == 8, parts[1].utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        else { return nil }
        self.init(seq: seq, tag: String(parts[1]))
    }
}

/// The decisions of the live streams, without I/O.
public enum LiveRules {
    /// The session a stream was opened with (from its token or its ticket).
    public struct Session: Sendable, Equatable {
        public var appID: UUID
        public var userID: UUID
        public var sessionID: UUID?
        public var sessionEpoch: Int?
        public init(appID: UUID, userID: UUID, sessionID: UUID?, sessionEpoch: Int?) {
            self.appID = appID
            self.userID = userID
            self.sessionID = sessionID
            self.sessionEpoch = sessionEpoch
        }
    }

    /// The longest `Last-Event-ID` or `after` taken (a cursor is at most 29 bytes).
    public static let maxCursorLength = 64

    /// What a client asked to resume from: nothing (start with a snapshot), a cursor, or
    /// something that is not one (400).
    public enum Resume: Equatable, Sendable {
        case fresh
        case after(LiveCursor)
        case malformed(String)
    }

    public static func resume(lastEventID: String?, after: String?) -> Resume {
        // The header wins: a browser's EventSource sends it on its own reconnects.
        guard let raw = lastEventID ?? after else { return .fresh }
        let field = lastEventID != nil ? "Last-Event-ID" : "after"
        guard raw.utf8.count <= maxCursorLength else { return .malformed("\(field) must be at most \(maxCursorLength) characters") }
        if raw.isEmpty { return .fresh }
        guard let cursor = LiveCursor(raw) else { return .malformed("\(field) is not a cursor this server issued") }
        return .after(cursor)
    }

    /// Whether an event ends this stream: a revoked session (this one, or every session of an
    /// epoch above the stream's), a suspension, an erasure. Other sessions' ends pass by.
    public static func ends(_ session: Session, type: LiveEventType, data: [String: JSONValue]) -> Bool {
        switch type {
        case .accountDeleted: return true
        case .sessionRevoked:
            if case .string(let sid)? = data["session_id"] { return UUID(uuidString: sid) == session.sessionID }
            if case .int(let epoch)? = data["session_epoch"] { return (session.sessionEpoch ?? 0) < epoch }
            return true
        default: return false
        }
    }

    /// Whether a stored event is shown on this stream: another session's end is not its own.
    public static func shows(_ session: Session, type: LiveEventType, data: [String: JSONValue]) -> Bool {
        type != .sessionRevoked || ends(session, type: type, data: data)
    }

    /// The live event a webhook event of another service becomes for its user (nil: none;
    /// subscriptions reach the stream by auth's own premium fact, which carries the version
    /// the app compares).
    public static func fromWebhook(type: String, data: [String: JSONValue]) -> (LiveEventType, [String: JSONValue])? {
        switch type {
        case "credits.earned", "credits.spent":
            var out: [String: JSONValue] = [:]
            out["balance"] = data["balance"]
            out["delta"] = data["amount"]
            out["source"] = data["source"]
            out["transaction_id"] = data["transaction_id"]
            return (.creditsUpdated, out)
        case "sync.conflict_opened":
            return (.syncConflictOpened, data.filter { ["conflict_id", "entity_type", "entity_id"].contains($0.key) })
        case "campaign.completed":
            return (.campaignCompleted, data.filter { ["campaign_id", "variant", "progress"].contains($0.key) })
        case "download.completed":
            return (.downloadCompleted, data.filter { ["job_id", "status"].contains($0.key) })
        default: return nil
        }
    }

    /// What a stream does with one of its user's events, given the last one it sent: one it
    /// sent or covered is skipped, the next one is sent as the notification carried it, and
    /// after a gap (or without the body) the stream reads the table from its last.
    public enum EventStep: Equatable, Sendable { case skip, send, catchUp }

    public static func step(last: Int64, seq: Int64, carriesBody: Bool) -> EventStep {
        if seq <= last { return .skip }
        return seq == last + 1 && carriesBody ? .send : .catchUp
    }

    /// Which of a user's open streams gets `stream.replaced`: the oldest ones beyond `max`.
    public static func replaced(openedInOrder: [UInt64], max: Int) -> [UInt64] {
        guard openedInOrder.count > max else { return [] }
        return Array(openedInOrder.sorted().prefix(openedInOrder.count - max))
    }

    /// One Server-Sent Event: `id:` only for events a client may resume after.
    public static func sse(cursor: String?, type: String, json: String) -> String {
        var out = ""
        if let cursor { out += "id: \(cursor)\n" }
        out += "event: \(type)\ndata: \(json)\n\n"
        return out
    }

    /// A WebSocket text frame's object: the event with `"cursor"` added (the JSON of an object
    /// ends with `}`).
    public static func socketText(cursor: String?, json: String) -> String {
        guard let cursor, json.hasSuffix("}") else { return json }
        let head = json.dropLast()
        return head + (head.hasSuffix("{") ? "" : ",") + "\"cursor\":\"\(cursor)\"}"
    }
}

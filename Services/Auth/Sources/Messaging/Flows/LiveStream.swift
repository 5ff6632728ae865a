import Foundation
import Logging
import ServiceKit
import WireTypes

/// One open stream (#46), the same for SSE and WebSocket: a snapshot or the events after the
/// client's cursor, then each new event of its user in commit order, once, until its session
/// ends, it is replaced, or the replica stops.
///
/// A stream's task lives as long as the stream, so every read of the store runs in a child task
/// (`inChildTask`): the frames a query needs are freed with it instead of staying on each of
/// 10,000 open streams.
struct LiveStream: Sendable {
    enum Frame: Sendable, Equatable {
        /// `cursor` nil: an event the client cannot resume after (reset, a stream's end).
        case event(cursor: String?, type: String, json: String)
        case heartbeat
        /// The stream ends after the frame before (WebSocket close code).
        case close(code: UInt16, reason: String)
    }

    let store: LiveStore
    let hub: LiveHub
    let sessions: SessionRegistry
    let session: LiveRules.Session

    /// Runs until the stream ends; `emit` throws when the client has gone.
    func run(resume: LiveRules.Resume, subscription: LiveHub.Subscription, emit: (Frame) async throws -> Void) async throws {
        var last: Int64
        switch resume {
        case .after(let cursor) where try await inChildTask({ [store, session] in try await store.isValid(cursor, app: session.appID, user: session.userID) }):
            last = cursor.seq
            last = try await catchUp(after: last, emit: emit)
        case .after:
            hub.count("reset")
            try await emit(.event(cursor: nil, type: LiveEventType.reset.rawValue, json: body(.reset, ["reason": .string("unknown_or_expired_cursor")])))
            guard let head = try await snapshot(emit: emit) else { return }
            last = head
        case .fresh, .malformed:
            guard let head = try await snapshot(emit: emit) else { return }
            last = head
        }
        for await signal in subscription.signals {
            switch signal {
            case .event(let e):
                if e.seq <= last { continue }
                if e.seq == last + 1, let json = e.body {
                    try await emit(.event(cursor: e.cursor.description, type: e.type, json: json))
                    hub.count("sent")
                    last = e.seq
                } else {
                    last = try await catchUp(after: last, emit: emit)
                }
            case .catchUp:
                last = try await catchUp(after: last, emit: emit)
            case .terminal(let type, let json):
                let data = Self.data(of: json)
                guard LiveRules.ends(session, type: type, data: data), let code = type.closeCode else { continue }
                try await emit(.event(cursor: nil, type: type.rawValue, json: json))
                try await emit(.close(code: code, reason: type.rawValue))
                return
            case .heartbeat:
                // A session ended while this replica's notification was lost still ends here.
                let verdict = sessions.snapshot.verdict(
                    app: session.appID, user: session.userID, session: session.sessionID, sessionEpoch: session.sessionEpoch)
                switch verdict {
                case .allowed: try await emit(.heartbeat)
                case .erased:
                    try await emit(.event(cursor: nil, type: LiveEventType.accountDeleted.rawValue, json: body(.accountDeleted, [:])))
                    try await emit(.close(code: 4003, reason: LiveEventType.accountDeleted.rawValue))
                    return
                case .sessionEnded, .suspended:
                    try await emit(.event(cursor: nil, type: LiveEventType.sessionRevoked.rawValue, json: body(.sessionRevoked, [:])))
                    try await emit(.close(code: 4001, reason: LiveEventType.sessionRevoked.rawValue))
                    return
                }
            case .replaced, .closing:
                let type: LiveEventType = if case .replaced = signal { .replaced } else { .closing }
                try await emit(.event(cursor: nil, type: type.rawValue, json: body(type, [:])))
                try await emit(.close(code: type.closeCode ?? 1000, reason: type.rawValue))
                return
            }
        }
    }

    /// Sends every kept event after `seq`, in order; returns the last one sent.
    private func catchUp(after seq: Int64, emit: (Frame) async throws -> Void) async throws -> Int64 {
        var last = seq
        while true {
            let page = try await inChildTask { [store, session, last] in try await store.events(app: session.appID, user: session.userID, after: last) }
            for e in page {
                try await emit(.event(cursor: e.cursor.description, type: e.type, json: e.body ?? "{}"))
                last = e.seq
            }
            hub.count("replayed", page.count)
            if page.count < 200 { return last }
        }
    }

    /// `state.snapshot`, the facts auth holds now with their versions, at the head of the
    /// user's events (read first: an event after it is sent after, one before is in the facts).
    /// nil when the user is gone (the stream ends as deleted).
    private func snapshot(emit: (Frame) async throws -> Void) async throws -> Int64? {
        let (head, found) = try await inChildTask { [store, session] in
            (try await store.head(app: session.appID, user: session.userID), try await store.facts(app: session.appID, user: session.userID))
        }
        guard let facts = found else {
            try await emit(.event(cursor: nil, type: LiveEventType.accountDeleted.rawValue, json: body(.accountDeleted, [:])))
            try await emit(.close(code: 4003, reason: LiveEventType.accountDeleted.rawValue))
            return nil
        }
        hub.count("snapshot")
        let data: [String: JSONValue] = [
            "user_id": .string(session.userID.lowercasedString),
            "premium": .object(["active": .bool(facts.status == "premium"), "version": .int(Int(facts.premiumVersion))]),
            "consents": .object(["values": .object(facts.consents.mapValues(JSONValue.bool)), "version": .int(Int(facts.consentsVersion))]),
            "account": .object(["status": .string(facts.status)])
        ]
        try await emit(.event(cursor: head.description, type: LiveEventType.snapshot.rawValue, json: body(.snapshot, data, version: head.seq)))
        return head.seq
    }

    private func body(_ type: LiveEventType, _ data: [String: JSONValue], version: Int64 = 0) -> String {
        let event = WebhookEvent(type: type.rawValue, id: UUID(), appID: session.appID, createdAt: Date(), version: version, data: data)
        return (try? String(decoding: JSON.encoder.encode(event), as: UTF8.self)) ?? "{}"
    }

    static func data(of json: String) -> [String: JSONValue] {
        guard case .object(let o)? = try? JSONDecoder().decode(JSONValue.self, from: Data(json.utf8)), case .object(let d)? = o["data"] else { return [:] }
        return d
    }
}

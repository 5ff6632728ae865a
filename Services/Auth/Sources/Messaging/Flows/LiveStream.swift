import AuthDomain
import Foundation
import Logging
import NIOCore
import ServiceKit
import WireTypes

/// Where a stream's frames go, on its channel's event loop: chunks of one SSE answer, or
/// WebSocket frames.
protocol LiveFrameSink: AnyObject {
    /// Writes and flushes one frame; the future completes once it was written.
    func write(_ frame: LiveStream.Frame) -> EventLoopFuture<Void>
    /// Ends the stream's answer (what was written goes out first) and its connection.
    func close()
}

/// One open stream (#46), the same for SSE and WebSocket: a snapshot or the events after the
/// client's cursor, then each new event of its user in commit order, once, until its session
/// ends, it is replaced, or the replica stops.
///
/// A stream holds no task while it waits. Its state lives on its channel's event loop, the hub
/// hands it signals there, and each read of the store runs in a short task whose answer comes
/// back to the loop. A suspended task per stream kept the frames of the request that opened it
/// (~25 KB each; 10,000 streams held 325 MB of auth's memory).
final class LiveStream: Sendable {
    enum Frame: Sendable, Equatable {
        /// `cursor` nil: an event the client cannot resume after (reset, a stream's end).
        case event(cursor: String?, type: String, json: String)
        case heartbeat
        /// The stream ends after the frame before (WebSocket close code).
        case close(code: UInt16, reason: String)
    }

    /// What a read of the store found, handed back to the loop.
    private enum Read: Sendable {
        /// The user's facts now (nil: the user is gone) at the head of their events; `reset`
        /// when the client's cursor was refused first.
        case snapshot(head: LiveCursor, facts: LiveStore.Facts?, reset: Bool)
        /// Kept events after the stream's last, one page.
        case page([LiveStore.Stored])
    }

    /// The stream's state; touched on its event loop only.
    private struct Machine {
        var sink: (any LiveFrameSink)?
        /// The user's last event this stream sent (or that its snapshot covers).
        var last: Int64 = 0
        /// A read is under way: signals wait for it, in order.
        var reading = false
        var waiting: [LiveHub.Signal] = []
        /// Events came while `waiting` was full: read the table once the read ends.
        var missed = false
        var ended = false
        /// Frames handed to the channel and not written yet.
        var unwritten = 0
    }

    /// Events kept while a read is under way; beyond it the stream reads them from the table.
    static let waitingLimit = 64

    let session: LiveRules.Session
    let eventLoop: any EventLoop
    private let store: LiveStore
    private let hub: LiveHub
    private let sessions: SessionRegistry
    private let machine: NIOLoopBoundBox<Machine>

    /// Made on `eventLoop`.
    init(session: LiveRules.Session, store: LiveStore, hub: LiveHub, sessions: SessionRegistry, eventLoop: any EventLoop) {
        self.session = session
        self.store = store
        self.hub = hub
        self.sessions = sessions
        self.eventLoop = eventLoop
        machine = NIOLoopBoundBox(Machine(), eventLoop: eventLoop)
    }

    /// On the loop, once the stream is registered with the hub: the snapshot, or the events
    /// after the client's cursor (an event committed meanwhile is either read or heard).
    func start(resume: LiveRules.Resume, sink: any LiveFrameSink) {
        machine.value.sink = sink
        let (store, session) = (store, session)
        switch resume {
        case .after(let cursor):
            machine.value.last = cursor.seq
            read {
                guard try await store.isValid(cursor, app: session.appID, user: session.userID) else {
                    return try await Self.snapshot(store, session, reset: true)
                }
                return .page(try await store.events(app: session.appID, user: session.userID, after: cursor.seq))
            }
        case .fresh, .malformed:
            read { try await Self.snapshot(store, session, reset: false) }
        }
    }

    /// From any thread: one signal of the hub, handled on the loop.
    func receive(_ signal: LiveHub.Signal) {
        if eventLoop.inEventLoop {
            handle(signal)
        } else {
            eventLoop.execute { self.handle(signal) }
        }
    }

    /// The connection closed (the client left, or the stream ended it).
    func closed() {
        eventLoop.execute {
            self.machine.value.ended = true
            self.machine.value.sink = nil
        }
        hub.close(self)
    }

    private func handle(_ signal: LiveHub.Signal) {
        var m = machine.value
        guard !m.ended else { return }
        guard m.reading else { return step(signal) }
        switch signal {
        case .event where m.waiting.count >= Self.waitingLimit: m.missed = true
        case .heartbeat where m.waiting.contains(where: { if case .heartbeat = $0 { true } else { false } }): break
        default: m.waiting.append(signal)
        }
        machine.value = m
    }

    /// One signal, no read under way.
    private func step(_ signal: LiveHub.Signal) {
        switch signal {
        case .event(let e):
            switch LiveRules.step(last: machine.value.last, seq: e.seq, carriesBody: e.body != nil) {
            case .skip: return
            case .send:
                emit(.event(cursor: e.cursor.description, type: e.type, json: e.body ?? "{}"))
                hub.count("sent")
                machine.value.last = e.seq
            case .catchUp: catchUp()
            }
        case .catchUp:
            catchUp()
        case .terminal(let type, let json):
            guard LiveRules.ends(session, type: type, data: Self.data(of: json)), let code = type.closeCode else { return }
            end(with: .event(cursor: nil, type: type.rawValue, json: json), code: code, reason: type.rawValue)
        case .heartbeat:
            // A session ended while this replica's notification was lost still ends here.
            switch sessions.snapshot.verdict(app: session.appID, user: session.userID, session: session.sessionID, sessionEpoch: session.sessionEpoch)
            {
            case .allowed: emit(.heartbeat)
            case .erased: end(.accountDeleted)
            case .sessionEnded, .suspended: end(.sessionRevoked)
            }
        case .replaced: end(.replaced)
        case .closing: end(.closing)
        }
    }

    private func catchUp() {
        let (store, session, last) = (store, session, machine.value.last)
        read { .page(try await store.events(app: session.appID, user: session.userID, after: last)) }
    }

    /// Runs `work` off the loop; its answer is applied on the loop, then what waited meanwhile.
    private func read(_ work: @escaping @Sendable () async throws -> Read) {
        machine.value.reading = true
        eventLoop.makeFutureWithTask(work).whenComplete { result in
            guard !self.machine.value.ended else { return }
            self.machine.value.reading = false
            switch result {
            case .success(let found): self.apply(found)
            case .failure(let error):
                // The client comes back with its cursor; nothing is lost.
                self.hub.logger.warning("a live stream could not read its events", metadata: ["error": "\(String(reflecting: error))"])
                self.end(.closing)
            }
            self.drain()
        }
    }

    private func apply(_ found: Read) {
        switch found {
        case .snapshot(let head, let facts, let reset):
            if reset {
                hub.count("reset")
                emit(.event(cursor: nil, type: LiveEventType.reset.rawValue, json: body(.reset, ["reason": .string("unknown_or_expired_cursor")])))
            }
            guard let facts else { return end(.accountDeleted) }
            hub.count("snapshot")
            let data: [String: JSONValue] = [
                "user_id": .string(session.userID.lowercasedString),
                "premium": .object(["active": .bool(facts.status == "premium"), "version": .int(Int(facts.premiumVersion))]),
                "consents": .object(["values": .object(facts.consents.mapValues(JSONValue.bool)), "version": .int(Int(facts.consentsVersion))]),
                "account": .object(["status": .string(facts.status)]),
            ]
            emit(.event(cursor: head.description, type: LiveEventType.snapshot.rawValue, json: body(.snapshot, data, version: head.seq)))
            machine.value.last = head.seq
        case .page(let events):
            for e in events {
                emit(.event(cursor: e.cursor.description, type: e.type, json: e.body ?? "{}"))
                machine.value.last = e.seq
            }
            hub.count("replayed", events.count)
            if events.count == LiveStore.pageSize { catchUp() }
        }
    }

    /// The signals that waited for a read, in order, until one starts another read.
    private func drain() {
        while !machine.value.reading, !machine.value.ended {
            if machine.value.waiting.isEmpty {
                guard machine.value.missed else { return }
                machine.value.missed = false
                catchUp()
                return
            }
            step(machine.value.waiting.removeFirst())
        }
    }

    private func emit(_ frame: Frame) {
        guard let sink = machine.value.sink, !machine.value.ended else { return }
        machine.value.unwritten += 1
        sink.write(frame).whenComplete { _ in self.machine.value.unwritten -= 1 }
        // A client this far behind is let go; it resumes from its cursor (nothing lost, nothing
        // held without bound).
        if machine.value.unwritten > hub.buffer {
            machine.value.ended = true
            sink.close()
        }
    }

    /// The stream's end as its event says it, then the close frame.
    private func end(_ type: LiveEventType) {
        end(with: .event(cursor: nil, type: type.rawValue, json: body(type, [:])), code: type.closeCode ?? 1000, reason: type.rawValue)
    }

    private func end(with event: Frame, code: UInt16, reason: String) {
        emit(event)
        emit(.close(code: code, reason: reason))
        machine.value.ended = true
        machine.value.sink?.close()
    }

    private static func snapshot(_ store: LiveStore, _ session: LiveRules.Session, reset: Bool) async throws -> Read {
        // The head first: an event after it is sent after the snapshot, one before is in the facts.
        let head = try await store.head(app: session.appID, user: session.userID)
        return .snapshot(head: head, facts: try await store.facts(app: session.appID, user: session.userID), reset: reset)
    }

    private func body(_ type: LiveEventType, _ data: [String: JSONValue], version: Int64 = 0) -> String {
        let event = WebhookEvent(type: type.rawValue, id: UUID(), appID: session.appID, createdAt: Date(), version: version, data: data)
        return (try? String(decoding: JSON.encoder.encode(event), as: UTF8.self)) ?? "{}"
    }

    static func data(of json: String) -> [String: JSONValue] {
        guard case .object(let o)? = try? JSONDecoder().decode(JSONValue.self, from: Data(json.utf8)), case .object(let d)? = o["data"] else {
            return [:]
        }
        return d
    }
}

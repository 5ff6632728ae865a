import AsyncHTTPClient
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOWebSocket
import PostgresNIO
import ServiceKit
import Synchronization
import TestSupport
import WSClient
import WireTypes
import XCTest

/// The app's live stream (#46) through the gateway, with real clients: Server-Sent Events read
/// as they arrive (AsyncHTTPClient, one client per stream so that a disconnect is a closed
/// socket) and a WebSocket (swift-websocket's client).
final class LiveStackTests: XCTestCase {
    let http = DocumentedHTTPClient()
    let gateway = TestEnvironment.gatewayURL
    deinit { http.shutdown() }

    var client: StackClient { StackClient(http: http, gateway: gateway) }
    var admin: [(String, String)] {
        get throws { try DemoApp.tenantHeaders() + [("Authorization", "Bearer local-admin-token"), ("Content-Type", "application/json")] }
    }

    struct Event: Sendable, Equatable {
        var cursor: String?
        var type: String
        var data: [String: JSONValue]
    }

    /// One SSE stream: what arrived so far, in order.
    final class SSE: Sendable {
        let status: Int
        let contentType: String?
        let body: String
        private let client: HTTPClient
        private let received = Mutex<[Event]>([])
        private let ended = Mutex(false)

        init(status: Int, contentType: String?, body: String, client: HTTPClient) {
            self.status = status
            self.contentType = contentType
            self.body = body
            self.client = client
        }

        var events: [Event] { received.withLock { $0 } }
        var isEnded: Bool { ended.withLock { $0 } }

        static func open(_ url: String, headers: [(String, String)]) async throws -> SSE {
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            var request = HTTPClientRequest(url: url)
            for (k, v) in headers { request.headers.add(name: k, value: v) }
            let response = try await client.execute(request, timeout: .hours(1))
            let type = response.headers.first(name: "content-type")
            guard response.status == .ok else {
                let body = try await response.body.collect(upTo: 1 << 20)
                try? await client.shutdown()
                return SSE(status: Int(response.status.code), contentType: type, body: String(buffer: body), client: client)
            }
            let sse = SSE(status: 200, contentType: type, body: "", client: client)
            Task {
                var text = ""
                do {
                    for try await chunk in response.body {
                        text += String(buffer: chunk)
                        while let end = text.range(of: "\n\n") {
                            let block = String(text[..<end.lowerBound])
                            text = String(text[end.upperBound...])
                            if let e = Self.parse(block) { sse.received.withLock { $0.append(e) } }
                        }
                    }
                } catch {}
                sse.ended.withLock { $0 = true }
            }
            return sse
        }

        static func parse(_ block: String) -> Event? {
            var id: String?
            var type: String?
            var data = ""
            for line in block.split(separator: "\n") {
                if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { type = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { data += line.dropFirst(6) }
            }
            guard let type, case .object(let o)? = try? JSONDecoder().decode(JSONValue.self, from: Data(data.utf8)) else { return nil }
            guard case .object(let d)? = o["data"] else { return nil }
            return Event(cursor: id, type: type, data: d)
        }

        func disconnect() async { try? await client.shutdown() }
        /// A stream a test left open closes with it (a client must be shut down before it goes).
        deinit { client.shutdown { _ in } }
    }

    func sse(_ s: StackSession, after: String? = nil, extra: [(String, String)] = []) async throws -> SSE {
        let headers = s.headers.filter { $0.0 != "Content-Type" } + (after.map { [("Last-Event-ID", $0)] } ?? []) + extra
        return try await SSE.open(gateway + "/auth/v1/live/events", headers: headers)
    }

    /// Waits until `count` events (after the first `from`) have arrived; fails past `seconds`.
    @discardableResult
    func events(_ stream: SSE, from: Int = 0, count: Int, seconds: Double = 5, _ what: String) async throws -> [Event] {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            let got = stream.events
            if got.count >= from + count { return Array(got[from..<(from + count)]) }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTFail("not within \(seconds) s: \(what); got \(stream.events.map(\.type))")
        return []
    }

    func setConsent(_ s: StackSession, analytics: Bool) async throws {
        let (code, body) = try await client.call("PATCH", "/auth/v1/auth/privacy", s.headers, #"{"consent_analytics":\#(analytics)}"#)
        XCTAssertEqual(code, 200, "\(body)")
    }

    func seq(_ cursor: String?) -> Int64 { Int64(cursor?.split(separator: "-").first ?? "") ?? -1 }

    // MARK: SSE

    func testEachEventOfTheUsersOwnArrivesInCommitOrderAndAResumeMissesNothing() async throws {
        let a = try await client.guest()
        let b = try await client.guest()
        let stream = try await sse(a)
        XCTAssertEqual(stream.status, 200, stream.body)
        XCTAssertEqual(stream.contentType, "text/event-stream")
        let other = try await sse(b)

        let first = try await events(stream, count: 1, "the snapshot")
        XCTAssertEqual(first.first?.type, "state.snapshot")
        XCTAssertEqual(first.first?.data["user_id"], .string(a.userID.lowercasedString))
        guard case .object(let premium)? = first.first?.data["premium"] else { return XCTFail("no premium in \(first)") }
        XCTAssertEqual(premium["active"], .bool(false))
        XCTAssertNotNil(first.first?.cursor)

        // A consent, a support credit, a support grant of premium: each on A's stream alone.
        try await setConsent(a, analytics: true)
        var got = try await events(stream, from: 1, count: 1, "consent.updated")
        XCTAssertEqual(got.first?.type, "consent.updated")
        guard case .object(let consents)? = got.first?.data["consents"] else { return XCTFail("no consents in \(got)") }
        XCTAssertEqual(consents["analytics"], .bool(true))

        let uid = a.userID.lowercasedString
        let (credited, creditBody) = try await client.call(
            "POST",
            "/subscription/v1/admin/users/\(uid)/credits",
            try admin + [("Idempotency-Key", UUID().uuidString)],
            #"{"amount":5,"reason":"live stream test"}"#
        )
        XCTAssertEqual(credited, 201, "\(creditBody)")
        got = try await events(stream, from: 2, count: 1, "credits.updated")
        XCTAssertEqual(got.first?.type, "credits.updated")
        XCTAssertEqual(got.first?.data["balance"], .int(5))
        XCTAssertEqual(got.first?.data["delta"], .int(5))

        let (granted, grantBody) = try await client.call(
            "POST",
            "/subscription/v1/admin/users/\(uid)/premium",
            try admin + [("Idempotency-Key", UUID().uuidString)],
            #"{"days":3,"reason":"live stream test"}"#
        )
        XCTAssertEqual(granted, 201, "\(grantBody)")
        got = try await events(stream, from: 3, count: 1, "subscription.updated")
        XCTAssertEqual(got.first?.type, "subscription.updated")
        XCTAssertEqual(got.first?.data["premium"], .bool(true))

        // A download job of the user finishes on offline's worker: download.completed.
        let (accepted, job) = try await client.call("POST", "/offline/v1/categories/download", a.headers, #"{"category_ids":["capitals-europe"]}"#)
        XCTAssertEqual(accepted, 202, "\(job)")
        got = try await events(stream, from: 4, count: 1, seconds: 30, "download.completed")
        XCTAssertEqual(got.first?.type, "download.completed")
        XCTAssertEqual(got.first?.data["job_id"], job["job_id"])

        let seen = stream.events
        XCTAssertEqual(seen.map(\.type), ["state.snapshot", "consent.updated", "credits.updated", "subscription.updated", "download.completed"])
        let numbers = seen.map { seq($0.cursor) }
        XCTAssertEqual(numbers, numbers.sorted(), "cursors increase")
        XCTAssertEqual(Set(numbers.dropFirst()).count, 4, "each event once")
        // B heard only its own snapshot.
        XCTAssertEqual(other.events.map(\.type), ["state.snapshot"])

        // Away while three things happen: exactly those three, in order, on the way back.
        let cursor = try XCTUnwrap(seen.last?.cursor)
        await stream.disconnect()
        try await setConsent(a, analytics: false)
        try await setConsent(a, analytics: true)
        try await setConsent(a, analytics: false)
        let back = try await sse(a, after: cursor)
        let missed = try await events(back, count: 3, "the three missed events")
        XCTAssertEqual(missed.map(\.type), ["consent.updated", "consent.updated", "consent.updated"])
        let analytics: [JSONValue?] = missed.map { e -> JSONValue? in
            guard case .object(let c)? = e.data["consents"] else { return nil }
            return c["analytics"]
        }
        XCTAssertEqual(analytics, [.bool(false), .bool(true), .bool(false)])
        XCTAssertEqual(missed.map { seq($0.cursor) }, [1, 2, 3].map { seq(cursor) + $0 })
        // ?after= does the same.
        let byQuery = try await SSE.open(gateway + "/auth/v1/live/events?after=\(missed[0].cursor!)", headers: a.headers)
        let replayed = try await events(byQuery, count: 2, "after= replays")
        XCTAssertEqual(replayed.map(\.cursor), missed.dropFirst().map(\.cursor))
        await byQuery.disconnect()

        // A cursor this server never issued for this user: reset, then a snapshot.
        let stale = try await sse(a, after: "999999-0a1b2c3d")
        let reset = try await events(stale, count: 2, "reset and snapshot")
        XCTAssertEqual(reset.map(\.type), ["stream.reset", "state.snapshot"])
        XCTAssertNil(reset.first?.cursor)
        await stale.disconnect()

        // Logging out this device ends its streams (session.revoked, then the end).
        let (out, _) = try await client.call("POST", "/auth/v1/auth/logout", a.headers, #"{"refresh_token":"\#(a.refresh)"}"#)
        XCTAssertEqual(out, 200)
        let ended = try await events(back, from: 3, count: 1, "session.revoked")
        XCTAssertEqual(ended.first?.type, "session.revoked")
        let deadline = ContinuousClock.now + .seconds(5)
        while !back.isEnded && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertTrue(back.isEnded, "the stream closes within 5 s")
        // And it does not open again with that token.
        let refused = try await sse(a)
        XCTAssertEqual(refused.status, 401)
        await other.disconnect()
    }

    func testEveryRefusalIsAnEnvelopeBeforeTheStreamStarts() async throws {
        let a = try await client.guest()
        let tenant = try DemoApp.tenantHeaders()
        let token = a.headers.first { $0.0 == "Authorization" }!
        let cases: [(String, [(String, String)], String, Int, String)] = [
            ("no token", tenant, "", 401, "unauthorized"),
            ("a bad token", tenant + [("Authorization", "Bearer not.a.token")], "", 401, "invalid_token"),
            ("another app's id with A's token", [("X-App-ID", UUID().uuidString), token], "", 401, "invalid_token"),
            ("no app", [token], "", 401, "missing_api_key"),
            ("a malformed cursor", a.headers, "?after=latest", 400, "invalid_request"),
            ("an unknown ticket", [], "?ticket=lvt_nothing", 401, "invalid_ticket"),
        ]
        for (why, headers, query, status, code) in cases {
            let s = try await SSE.open(gateway + "/auth/v1/live/events" + query, headers: headers)
            XCTAssertEqual(s.status, status, why)
            XCTAssertNotEqual(s.contentType, "text/event-stream", why)
            let envelope = try? JSONDecoder().decode([String: JSONValue].self, from: Data(s.body.utf8))
            XCTAssertEqual(envelope?["error"], .string(code), "\(why): \(s.body)")
        }
        let huge = try await SSE.open(gateway + "/auth/v1/live/events", headers: a.headers + [("Last-Event-ID", String(repeating: "1", count: 4000))])
        XCTAssertEqual(huge.status, 400, huge.body)

        // A ticket: once, then never again; an expired one never.
        let (issued, body) = try await client.call("POST", "/auth/v1/live/tickets", a.headers)
        XCTAssertEqual(issued, 201, "\(body)")
        XCTAssertEqual(body["expires_in"], .int(60))
        guard case .string(let ticket)? = body["ticket"] else { return XCTFail("no ticket") }
        let once = try await SSE.open(gateway + "/auth/v1/live/events?ticket=\(ticket)", headers: [])
        XCTAssertEqual(once.status, 200)
        let byTicket = try await events(once, count: 1, "snapshot by ticket")
        XCTAssertEqual(byTicket.first?.type, "state.snapshot")
        await once.disconnect()
        let twice = try await SSE.open(gateway + "/auth/v1/live/events?ticket=\(ticket)", headers: [])
        XCTAssertEqual(twice.status, 401, "a used ticket")
        let (issued2, body2) = try await client.call("POST", "/auth/v1/live/tickets", a.headers)
        XCTAssertEqual(issued2, 201)
        guard case .string(let late)? = body2["ticket"] else { return XCTFail("no ticket") }
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.stackDatabase)) { db in
            try await db.query(
                "UPDATE auth.live_tickets SET expires_at = now() - interval '1 second' WHERE used_at IS NULL AND user_id = \(a.userID)"
            )
        }
        let expired = try await SSE.open(gateway + "/auth/v1/live/events?ticket=\(late)", headers: [])
        XCTAssertEqual(expired.status, 401, "an expired ticket")

        // The socket route without an upgrade, or with a bad handshake: the envelope, nothing opened.
        let plain = try await http.send(HTTPRequest(method: "GET", url: gateway + "/auth/v1/live/socket", headers: a.headers))
        XCTAssertEqual(plain.status, 426)
        let badVersion = try await http.send(
            HTTPRequest(
                method: "GET",
                url: gateway + "/auth/v1/live/socket",
                headers: a.headers + [
                    ("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "8"),
                    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                ]
            )
        )
        XCTAssertEqual(badVersion.status, 400)
        XCTAssertEqual((try? JSONDecoder().decode([String: JSONValue].self, from: badVersion.body))?["error"], .string("invalid_websocket_handshake"))
        let unauthorized = try await http.send(
            HTTPRequest(
                method: "GET",
                url: gateway + "/auth/v1/live/socket",
                headers: tenant + [
                    ("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"),
                    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                ]
            )
        )
        XCTAssertEqual(unauthorized.status, 401, "no upgrade without a token")
        XCTAssertEqual((try? JSONDecoder().decode([String: JSONValue].self, from: unauthorized.body))?["error"], .string("unauthorized"))
    }

    func testTheEleventhStreamReplacesTheOldestAndAnErasureEndsThemAll() async throws {
        let a = try await client.guest()
        var streams: [SSE] = []
        for i in 0..<10 {
            let s = try await sse(a)
            XCTAssertEqual(s.status, 200)
            try await events(s, count: 1, "snapshot \(i)")
            streams.append(s)
        }
        let eleventh = try await sse(a)
        try await events(eleventh, count: 1, "the eleventh's snapshot")
        let replaced = try await events(streams[0], from: 1, count: 1, "stream.replaced on the oldest")
        XCTAssertEqual(replaced.first?.type, "stream.replaced")
        for s in streams.dropFirst() { XCTAssertEqual(s.events.map(\.type), ["state.snapshot"], "the others go on") }

        // The deletion runs (its due date moved to now): account.deleted on every stream, then the end.
        let (scheduled, _) = try await client.call("DELETE", "/auth/v1/auth/me", a.headers)
        XCTAssertEqual(scheduled, 202)
        try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.stackDatabase)) { db in
            try await db.query(
                "UPDATE auth.deletions SET scheduled_for = now() - interval '1 second' WHERE user_id = \(a.userID) AND status = 'scheduled'"
            )
            try await db.query("UPDATE auth.jobs SET run_at = now() WHERE kind = 'execute_deletion' AND status = 'pending'")
        }
        let deleted = try await events(eleventh, from: 1, count: 1, seconds: 15, "account.deleted")
        XCTAssertEqual(deleted.first?.type, "account.deleted")
        for s in streams.dropFirst() + [eleventh] {
            let deadline = ContinuousClock.now + .seconds(5)
            while !s.isEnded && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            XCTAssertTrue(s.isEnded)
            XCTAssertEqual(s.events.last?.type, "account.deleted")
        }
        // The user's events went with the account.
        let left = try await withPostgres(TestEnvironment.adminClient(database: TestEnvironment.stackDatabase)) { db in
            for try await n in try await db.query(
                "SELECT (SELECT count(*) FROM auth.live_events WHERE user_id = \(a.userID)) + (SELECT count(*) FROM auth.live_counters WHERE user_id = \(a.userID))"
            ).decode(Int.self) { return n }
            return -1
        }
        XCTAssertEqual(left, 0)
    }

    // MARK: WebSocket

    /// A WebSocket stream's text frames and how it closed.
    final class Socket: Sendable {
        let frames = Mutex<[Event]>([])
        let closed = Mutex<(code: Int, reason: String?)?>(nil)
        let failed = Mutex<String?>(nil)

        static func open(_ url: String, headers: HTTPFields = [:]) -> (Socket, Task<Void, Never>) {
            let socket = Socket()
            let task = Task {
                do {
                    var configuration = WebSocketClientConfiguration()
                    configuration.additionalHeaders = headers
                    let close = try await WebSocketClient.connect(url: url, configuration: configuration, logger: Logger(label: "live-test")) {
                        inbound,
                        _,
                        _ in
                        for try await message in inbound.messages(maxSize: 1 << 20) {
                            guard case .text(let text) = message,
                                case .object(let o)? = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)),
                                case .string(let type)? = o["type"], case .object(let d)? = o["data"]
                            else { continue }
                            let cursor: String? = if case .string(let c)? = o["cursor"] { c } else { nil }
                            socket.frames.withLock { $0.append(Event(cursor: cursor, type: type, data: d)) }
                        }
                    }
                    let code = close.map { Int(UInt16(webSocketErrorCode: $0.closeCode)) } ?? 0
                    socket.closed.withLock { $0 = (code, close?.reason) }
                } catch {
                    socket.failed.withLock { $0 = "\(error)" }
                }
            }
            return (socket, task)
        }

        func wait(count: Int, seconds: Double = 5) async throws -> [Event] {
            let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
            while ContinuousClock.now < deadline {
                let got = frames.withLock { $0 }
                if got.count >= count { return got }
                if let f = failed.withLock({ $0 }) {
                    XCTFail("socket failed: \(f)")
                    return got
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            XCTFail("not within \(seconds) s: \(count) frames; got \(frames.withLock { $0.map(\.type) })")
            return frames.withLock { $0 }
        }
    }

    func testTheWebSocketCarriesTheSameEventsWithCursorsAndClosesWith4001() async throws {
        let a = try await client.guest()
        let ws = gateway.replacingOccurrences(of: "http://", with: "ws://") + "/auth/v1/live/socket"
        // By ticket, as a browser does.
        let (issued, body) = try await client.call("POST", "/auth/v1/live/tickets", a.headers)
        XCTAssertEqual(issued, 201)
        guard case .string(let ticket)? = body["ticket"] else { return XCTFail("no ticket") }
        let (socket, task) = Socket.open(ws + "?ticket=\(ticket)")
        defer { task.cancel() }
        let first = try await socket.wait(count: 1)
        XCTAssertEqual(first.first?.type, "state.snapshot")
        XCTAssertNotNil(first.first?.cursor)
        try await setConsent(a, analytics: true)
        let second = try await socket.wait(count: 2)
        XCTAssertEqual(second.last?.type, "consent.updated")
        XCTAssertGreaterThan(seq(second.last?.cursor), seq(first.first?.cursor))

        // The same ticket opens nothing a second time.
        let (again, againTask) = Socket.open(ws + "?ticket=\(ticket)")
        defer { againTask.cancel() }
        let deadline = ContinuousClock.now + .seconds(5)
        while again.failed.withLock({ $0 }) == nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertNotNil(again.failed.withLock { $0 }, "a used ticket upgrades nothing")
        XCTAssertEqual(again.frames.withLock { $0.count }, 0)

        // With headers, resuming after the snapshot: the consent change, and only it.
        var headers = HTTPFields()
        for (k, v) in a.headers { headers.append(HTTPField(name: HTTPField.Name(k)!, value: v)) }
        let (resumed, resumedTask) = Socket.open(ws + "?after=\(first.first!.cursor!)", headers: headers)
        defer { resumedTask.cancel() }
        let replay = try await resumed.wait(count: 1)
        XCTAssertEqual(replay.map(\.type), ["consent.updated"])
        XCTAssertEqual(replay.first?.cursor, second.last?.cursor)

        // Logout everywhere: both sockets get session.revoked and close with 4001.
        let (out, _) = try await client.call("POST", "/auth/v1/auth/logout", a.headers, #"{"all":true}"#)
        XCTAssertEqual(out, 200)
        for s in [socket, resumed] {
            let end = ContinuousClock.now + .seconds(5)
            while s.closed.withLock({ $0 }) == nil && ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(20)) }
            XCTAssertEqual(s.closed.withLock { $0?.code }, 4001)
            XCTAssertEqual(s.frames.withLock { $0.last?.type }, "session.revoked")
        }
    }
}

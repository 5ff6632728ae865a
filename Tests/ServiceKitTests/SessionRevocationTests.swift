import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// The revocation set (pure rules), and the mechanism around it: a fact told to one replica is
/// refused there at once, by another replica within its poll, and by a replica started later
/// from its first request.
final class SessionRevocationTests: XCTestCase {
    let app = UUID(), user = UUID(), session = UUID()

    func fact(_ version: Int64, epoch: Int = 0, _ state: SessionFact.State = .active, sid: UUID? = nil, reason: String? = nil) -> SessionFact {
        SessionFact(appID: app, userID: user, version: version, sessionEpoch: epoch, state: state, reason: reason, revokedSessionID: sid)
    }

    // MARK: rules

    func testVersionsOnlyMoveForward() {
        XCTAssertTrue(FactVersion.isNewer(1, than: nil))
        XCTAssertTrue(FactVersion.isNewer(5, than: 4))
        XCTAssertFalse(FactVersion.isNewer(4, than: 4), "a replay is not newer")
        XCTAssertFalse(FactVersion.isNewer(3, than: 4))
    }

    func testVerdicts() {
        var s = SessionRevocations()
        XCTAssertEqual(s.verdict(app: app, user: user, session: session, sessionEpoch: 0), .allowed)
        // One device logged out: that session only.
        XCTAssertTrue(s.apply(fact(1, sid: session)))
        XCTAssertEqual(s.verdict(app: app, user: user, session: session, sessionEpoch: 0), .sessionEnded)
        XCTAssertEqual(s.verdict(app: app, user: user, session: UUID(), sessionEpoch: 0), .allowed)
        // Every device: tokens of an older epoch (and tokens that carry none) are refused.
        XCTAssertTrue(s.apply(fact(2, epoch: 1)))
        XCTAssertEqual(s.verdict(app: app, user: user, session: UUID(), sessionEpoch: 0), .sessionEnded)
        XCTAssertEqual(s.verdict(app: app, user: user, session: nil, sessionEpoch: nil), .sessionEnded)
        XCTAssertEqual(s.verdict(app: app, user: user, session: UUID(), sessionEpoch: 1), .allowed, "a sign-in after it works")
        // Another tenant's user with the same id is someone else.
        XCTAssertEqual(s.verdict(app: UUID(), user: user, session: UUID(), sessionEpoch: 0), .allowed)
        XCTAssertTrue(s.apply(fact(3, epoch: 2, .suspended, reason: "fraud")))
        XCTAssertEqual(s.verdict(app: app, user: user, session: UUID(), sessionEpoch: 5), .suspended(reason: "fraud"))
        XCTAssertTrue(s.apply(fact(4, epoch: 2, .active)))
        XCTAssertEqual(s.verdict(app: app, user: user, session: UUID(), sessionEpoch: 2), .allowed, "reinstated")
        XCTAssertEqual(s.verdict(app: app, user: user, session: UUID(), sessionEpoch: 1), .sessionEnded, "the suspended epoch stays ended")
    }

    func testOlderOrRepeatedFactsChangeNothing() {
        var s = SessionRevocations()
        s.apply(fact(5, epoch: 3, .suspended, reason: "r"))
        let before = s
        XCTAssertFalse(s.apply(fact(4, epoch: 1, .active)), "an older reinstatement arriving late")
        XCTAssertFalse(s.apply(fact(5, epoch: 3, .suspended, reason: "r")), "a replay")
        XCTAssertEqual(s, before)
        // A newer fact with a lower epoch cannot lower it.
        XCTAssertTrue(s.apply(fact(6, epoch: 1, .active)))
        XCTAssertEqual(s.state(app: app, user: user)?.sessionEpoch, 3)
    }

    func testErasureIsFinal() {
        var late = SessionRevocations()
        late.apply(fact(9, epoch: 4, .active))
        XCTAssertTrue(late.apply(fact(3, epoch: Int(Int32.max), .erased)), "an erasure wins over any version, in any order")
        XCTAssertEqual(late.verdict(app: app, user: user, session: nil, sessionEpoch: 99), .erased)
        var s = SessionRevocations()
        s.apply(fact(3, epoch: Int(Int32.max), .erased))
        XCTAssertFalse(s.apply(fact(9, epoch: 0, .active)), "nothing brings an erased user back")
        XCTAssertEqual(s.verdict(app: app, user: user, session: UUID(), sessionEpoch: 99), .erased)
    }

    func testRefusalsAreTheEnvelopeCodes() {
        XCTAssertNil(AppError.refusal(.allowed))
        XCTAssertEqual(AppError.refusal(.sessionEnded)?.status, .unauthorized)
        XCTAssertEqual(AppError.refusal(.erased)?.status, .unauthorized)
        let suspended = AppError.refusal(.suspended(reason: "fraud"))
        XCTAssertEqual(suspended?.status, .forbidden)
        XCTAssertEqual(suspended?.code, "account_suspended")
        XCTAssertEqual(suspended?.extra["reason"], .string("fraud"))
    }

    // MARK: migrations include the platform's tables at their own position

    func testAMigrationFileIncludesThePlatformSQL() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "CREATE TABLE a (id int);".write(to: dir.appendingPathComponent("0001_a.sql"), atomically: true, encoding: .utf8)
        try "-- include platform: user_facts\n".write(to: dir.appendingPathComponent("0002_facts.sql"), atomically: true, encoding: .utf8)
        let loaded = try Migration.load(directory: dir)
        XCTAssertEqual(loaded.map(\.name), ["0001_a", "0002_facts"])
        XCTAssertEqual(loaded[1].sql, PlatformMigrations.userFacts)
        try "-- include platform: nothing_such\n".write(to: dir.appendingPathComponent("0003_bad.sql"), atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try Migration.load(directory: dir))
    }

    func testARevocationToldToOneReplicaIsRefusedByAllOfThem() async throws {
        let r = Replicas()
        let app = r.app
        let user = UUID()
        let phone = UUID()
        let tablet = UUID()
        let phoneToken = try r.token(user: user, session: phone, epoch: 0)
        let tabletToken = try r.token(user: user, session: tablet, epoch: 0)
        let (rtA, appA) = r.replica()
        let (rtB, appB) = r.replica()
        try await appA.test(.router) { a in
            await rtA.readiness.waitUntilMigrated()
            try await appB.test(.router) { b in
                await rtB.readiness.waitUntilMigrated()
                for c in [a, b] {
                    let (s, _) = try await r.probe(c, phoneToken)
                    XCTAssertEqual(s, .ok)
                }

                // Bad input changes nothing: wrong type, version 0, another user in the body,
                // another tenant in the path, a caller that is not auth.
                var f = SessionFact(appID: app, userID: user, version: 2, sessionEpoch: 0, state: .active, revokedSessionID: phone)
                do {
                    let v = try await r.put(
                        a,
                        #"{"app_id":"\#(app)","user_id":"\#(user)","version":"two","session_epoch":0,"state":"active"}"#,
                        user: user
                    ).0
                    XCTAssertEqual(v, .badRequest)
                }
                do {
                    let v = try await r.put(a, #"{"app_id":"\#(app)","user_id":"\#(user)","version":2,"session_epoch":0,"state":"gone"}"#, user: user)
                        .0
                    XCTAssertEqual(v, .badRequest)
                }
                var zero = f
                zero.version = 0
                do {
                    let v = try await r.put(a, try r.body(zero), user: user).0
                    XCTAssertEqual(v, .unprocessableContent)
                }
                do {
                    let v = try await r.put(a, try r.body(f), user: UUID()).0
                    XCTAssertEqual(v, .unprocessableContent)
                }
                do {
                    let v = try await r.put(a, try r.body(f), user: user, app: UUID()).0
                    XCTAssertEqual(v, .unprocessableContent)
                }
                do {
                    let v = try await r.put(a, try r.body(f), user: user, as: "subscription", credential: "local-internal-subscription").0
                    XCTAssertEqual(v, .forbidden)
                }
                do {
                    let v = try await r.put(a, try r.body(f), user: user, credential: "wrong").0
                    XCTAssertEqual(v, .unauthorized)
                }
                var longReason = f
                longReason.reason = String(repeating: "r", count: 501)
                do {
                    let v = try await r.put(a, try r.body(longReason), user: user).0
                    XCTAssertEqual(v, .unprocessableContent)
                }
                do {
                    let v = try await r.put(a, #"{"app_id":"\#(app)","user_id":"\#(user)","session_epoch":0,"state":"active"}"#, user: user).0
                    XCTAssertEqual(v, .badRequest, "missing version")
                }
                do {
                    let v = try await r.put(a, "{" + String(repeating: " ", count: 2 << 20) + "}", user: user).0
                    XCTAssertEqual(v, .contentTooLarge)
                }
                for bad in ["abc", "0", "-3"] {
                    let erase = try await a.execute(
                        uri: "/internal/users/\(user)?app_id=\(app)&version=\(bad)",
                        method: .delete,
                        headers: [.authorization: "Bearer local-internal-auth", .xServiceName: "auth"]
                    ) { $0 }
                    XCTAssertEqual(erase.status, .badRequest, "version=\(bad)")
                }
                for c in [a, b] {
                    let (s, _) = try await r.probe(c, phoneToken)
                    XCTAssertEqual(s, .ok, "nothing was applied")
                }

                // Logout of the phone, told to A only: A refuses at once, B within its poll; the
                // tablet's session goes on.
                let first = try await r.put(a, try r.body(f), user: user)
                XCTAssertEqual(first.0, .ok)
                XCTAssertEqual(first.1["applied"], .bool(true))
                do {
                    let v = try await r.probe(a, phoneToken).1
                    XCTAssertEqual(v, "session_revoked")
                }
                try await r.eventually("B refuses the phone's token") { try await r.probe(b, phoneToken).0 == .unauthorized }
                do {
                    let v = try await r.probe(b, tabletToken).0
                    XCTAssertEqual(v, .ok)
                }
                // A replay is an idempotent 200.
                do {
                    let v = try await r.put(b, try r.body(f), user: user).1["applied"]
                    XCTAssertEqual(v, .bool(false))
                }

                // Suspension (version 5), then a late reinstatement (version 4): stays suspended.
                f = SessionFact(appID: app, userID: user, version: 5, sessionEpoch: 1, state: .suspended, reason: "fraud")
                do {
                    let v = try await r.put(b, try r.body(f), user: user).1["applied"]
                    XCTAssertEqual(v, .bool(true))
                }
                let late = SessionFact(appID: app, userID: user, version: 4, sessionEpoch: 0, state: .active)
                do {
                    let v = try await r.put(a, try r.body(late), user: user).1["applied"]
                    XCTAssertEqual(v, .bool(false))
                }
                try await r.eventually("A refuses the suspended user") { try await r.probe(a, tabletToken).1 == "account_suspended" }
                try await Task.sleep(for: .milliseconds(400))
                do {
                    let v = try await r.probe(a, tabletToken).1
                    XCTAssertEqual(v, "account_suspended", "the late, older fact did not undo it")
                }
                do {
                    let v = try await r.probe(b, tabletToken).1
                    XCTAssertEqual(v, "account_suspended")
                }

                // Erasure through the deletion route every service serves: final everywhere.
                let erase = try await b.execute(
                    uri: "/internal/users/\(user)?app_id=\(app)&version=6",
                    method: .delete,
                    headers: [.authorization: "Bearer local-internal-auth", .xServiceName: "auth"]
                ) { $0 }
                XCTAssertEqual(erase.status, .ok)
                let reinstated = SessionFact(appID: app, userID: user, version: 7, sessionEpoch: 2, state: .active)
                do {
                    let v = try await r.put(a, try r.body(reinstated), user: user).1["applied"]
                    XCTAssertEqual(v, .bool(false))
                }
                try await r.eventually("A refuses the erased user") {
                    try await r.probe(a, try r.token(user: user, session: UUID(), epoch: 2)).1 == "invalid_token"
                }
            }
        }
        // A replica started afterwards refuses the same tokens from its first request.
        let (rtC, appC) = r.replica()
        try await appC.test(.router) { c in
            await rtC.readiness.waitUntilMigrated()
            do {
                let v = try await r.probe(c, phoneToken).1
                XCTAssertEqual(v, "invalid_token")
            }
            XCTAssertEqual(rtC.sessions.snapshot.verdict(app: app, user: user, session: nil, sessionEpoch: nil), .erased)
        }
    }

}

/// Replicas of an ads-like service with one authenticated route, and the calls the test makes.
struct Replicas: Sendable {
    let app = UUID()
    let key = Curve25519.Signing.PrivateKey()

    struct AllowAll: AppVerifier { func verify(appID: UUID, apiKey: String) async throws -> Bool { true } }

    /// An ads-like replica with one authenticated route, verifying tokens of `key`.
    func replica() -> (ServiceRuntime, ServiceApplication) {
        let runtime = kitRuntime(.ads, overrides: ["SESSION_POLL_MS": "100"])
        let signer = AccessTokenSigner(privateKey: key)
        let app = buildServiceApplication(
            runtime: runtime,
            appVerifier: AllowAll(),
            tokenVerifier: AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [signer.jwk]))),
            userData: []
        ) { routes in
            routes.user.get("probe") { _, context in try context.json(["user_id": try context.requireUser().userID]) }
        }
        return (runtime, app)
    }

    func token(user: UUID, session: UUID, epoch: Int) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        return try AccessTokenSigner(privateKey: key).sign(
            AccessTokenClaims(
                userID: user,
                appID: app,
                email: nil,
                status: .free,
                isGuest: true,
                issuer: "auth",
                issuedAt: now,
                expiresAt: now + 3600,
                jti: UUID().uuidString,
                sessionID: session,
                sessionEpoch: epoch
            )
        )
    }

    func probe(_ client: any TestClientProtocol, _ token: String) async throws -> (HTTPResponse.Status, String?) {
        let r = try await client.execute(
            uri: "/ads/v1/probe",
            method: .get,
            headers: [.xAppID: app.uuidString, .xAPIKey: "k", .authorization: "Bearer \(token)"]
        ) { $0 }
        let code = (try? JSONDecoder().decode([String: JSONValue].self, from: Data(buffer: r.body)))?["error"]
        if case .string(let c)? = code { return (r.status, c) }
        return (r.status, nil)
    }

    func put(
        _ client: any TestClientProtocol,
        _ body: String,
        user: UUID,
        app: UUID? = nil,
        as service: String = "auth",
        credential: String = "local-internal-auth"
    ) async throws -> (HTTPResponse.Status, [String: JSONValue]) {
        let r = try await client.execute(
            uri: "/internal/users/\(user)/sessions?app_id=\(app ?? self.app)",
            method: .put,
            headers: [.authorization: "Bearer \(credential)", .xServiceName: service, .contentType: "application/json"],
            body: ByteBuffer(string: body)
        ) { $0 }
        return (r.status, (try? JSONDecoder().decode([String: JSONValue].self, from: Data(buffer: r.body))) ?? [:])
    }

    func body(_ f: SessionFact) throws -> String { String(decoding: try JSON.encoder.encode(f), as: UTF8.self) }

    func eventually(_ what: String, within seconds: Double = 5, _ check: () async throws -> Bool) async throws {
        let deadline = Date() + seconds
        while Date() < deadline {
            if try await check() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTFail("not within \(seconds) s: \(what)")
    }
}

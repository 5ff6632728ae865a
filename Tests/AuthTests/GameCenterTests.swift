import AuthDomain
import Crypto
import Foundation
import Hummingbird
import HummingbirdTLS
import HummingbirdTesting
import NIOSSL
import ServiceKit
import ServiceLifecycle
import SwiftASN1
import TestSupport
import WireTypes
import X509
import XCTest
import _CryptoExtras

@testable import AuthService

/// A private PKI standing in for Apple's: a root, Game Center's RSA signing certificate, and a
/// TLS certificate for static.gc.apple.com served over HTTPS on loopback.
struct FakeGameCenter: Sendable {
    let caPEMPath: String
    let signingKey: _RSA.Signing.PrivateKey
    let port: Int
    let tls: TLSConfiguration
    let certDER: [UInt8]
    var keyURL: String { "https://static.gc.apple.com:\(port)/public-key/gc-prod-10.cer" }

    init(expired: Bool = false) throws {
        let now = Date()
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("Test Apple Root CA") }
        let ca = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(caKey.publicKey),
            notValidBefore: now - 86400,
            notValidAfter: now + 86400 * 365,
            issuer: caName,
            subject: caName,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(caKey)
        )
        signingKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let signing = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(signingKey.publicKey),
            notValidBefore: expired ? now - 86400 * 10 : now - 3600,
            notValidAfter: expired ? now - 86400 : now + 86400 * 30,
            issuer: caName,
            subject: try DistinguishedName { CommonName("gc-prod-10") },
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
            },
            issuerPrivateKey: .init(caKey)
        )
        var der = DER.Serializer()
        try der.serialize(signing)
        certDER = der.serializedBytes
        let tlsKey = P256.Signing.PrivateKey()
        let tlsCert = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(tlsKey.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 86400,
            issuer: caName,
            subject: try DistinguishedName { CommonName("static.gc.apple.com") },
            extensions: try Certificate.Extensions {
                SubjectAlternativeNames([.dnsName("static.gc.apple.com")])
                try ExtendedKeyUsage([.serverAuth])
            },
            issuerPrivateKey: .init(caKey)
        )
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gc-root-\(UUID()).pem").path
        try ca.serializeAsPEM().pemString.write(toFile: path, atomically: true, encoding: .utf8)
        caPEMPath = path
        tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(tlsCert.serializeAsPEM().pemString.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(tlsKey.pemRepresentation.utf8), format: .pem))
        )
        port = try TestEnvironment.freePort()
    }

    var env: [String: String] {
        [
            "GAMECENTER_TRUST_ROOTS": caPEMPath, "GAMECENTER_CA_BUNDLE": caPEMPath,
            "GAMECENTER_RESOLVE": "static.gc.apple.com:\(port):127.0.0.1",
        ]
    }

    func application() throws -> some ApplicationProtocol {
        let router = Router()
        let der = certDER
        router.get("public-key/gc-prod-10.cer") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/pkix-cert"], body: .init(byteBuffer: ByteBuffer(bytes: der)))
        }
        return Application(
            router: router,
            server: try .tls(.http1(), tlsConfiguration: tls),
            configuration: .init(address: .hostname("127.0.0.1", port: port))
        )
    }

    func proof(
        player: String,
        bundleID: String = "com.example.quiz",
        timestamp: UInt64 = UInt64(Date().timeIntervalSince1970 * 1000),
        key: _RSA.Signing.PrivateKey? = nil
    ) throws -> (signature: String, salt: String, timestamp: UInt64) {
        let salt = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        var payload = Data(player.utf8)
        payload.append(Data(bundleID.utf8))
        withUnsafeBytes(of: timestamp.bigEndian) { payload.append(contentsOf: $0) }
        payload.append(salt)
        let sig = try (key ?? signingKey).signature(for: SHA256.hash(data: payload), padding: .insecurePKCS1v1_5)
        return (sig.rawRepresentation.base64EncodedString(), salt.base64EncodedString(), timestamp)
    }
}

final class GameCenterTests: XCTestCase {
    static func linkBody(
        _ gc: FakeGameCenter,
        player: String,
        url: String? = nil,
        proof: (signature: String, salt: String, timestamp: UInt64),
        achievements: [String] = ["first_win"],
        score: Int = 1200
    ) -> String {
        let a = achievements.map { "\"\($0)\"" }.joined(separator: ",")
        return
            #"{"player_id":"\#(player)","alias":"ProGamer2025","public_key_url":"\#(url ?? gc.keyURL)","signature":"\#(proof.signature)","salt":"\#(proof.salt)","timestamp":\#(proof.timestamp),"achievements":[\#(a)],"leaderboard_score":\#(score)}"#
    }

    static func withGameCenter(expired: Bool = false, _ body: @Sendable (AuthHarness, FakeGameCenter) async throws -> Void) async throws {
        let gc = try FakeGameCenter(expired: expired)
        try await withThrowingTaskGroup(of: Void.self) { group in
            let server = ServiceGroup(configuration: .init(services: [try gc.application()], logger: TestEnvironment.logger))
            group.addTask { try await server.run() }
            try await AuthHarness.run(overrides: gc.env) { h in try await body(h, gc) }
            try await stopLocalServer(server, in: &group)
        }
    }

    func testLinkSyncMergeAndUnlink() async throws {
        try await Self.withGameCenter { h, gc in
            let email = uniqueEmail("oth")
            let r = try await h.registerEmail(email)
            let player = "T:\(UUID().uuidString.prefix(12))"
            let link = try await h.post(
                "auth/game-center/link",
                Self.linkBody(gc, player: player, proof: try gc.proof(player: player)),
                token: r.tokens.accessToken
            )
            XCTAssertEqual(link.status, .ok, String(buffer: link.body))
            struct Linked: Decodable {
                struct S: Decodable {
                    var achievements: Int
                    var leaderboard_score: Int
                }
                struct C: Decodable {
                    var type: String
                    var local: Int
                    var game_center: Int
                    var resolution: String
                }
                struct R: Decodable {
                    var achievements: [String]
                    var leaderboard_score: Int?
                }
                var linked: Bool
                var player_id: String
                var synced: S
                var conflicts: [C]
                var report_to_game_center: R
            }
            let linked = try link.json(Linked.self)
            XCTAssertTrue(linked.linked)
            XCTAssertEqual(linked.synced.achievements, 1)
            XCTAssertEqual(linked.synced.leaderboard_score, 1200)

            // Game Center has more: union of achievements, best score, GC wins.
            let sync = try await h.post(
                "auth/game-center/sync",
                #"{"achievements":["first_win","capitals_master"],"leaderboard_score":1500}"#,
                token: r.tokens.accessToken
            )
            let s = try sync.json(Linked.self)
            XCTAssertEqual(s.synced.achievements, 2)
            XCTAssertEqual(s.synced.leaderboard_score, 1500)
            XCTAssertEqual(s.conflicts.first?.resolution, "game_center_wins")
            XCTAssertEqual(s.conflicts.first?.local, 1200)
            // Game Center has less (another device): nothing is lost, the app reports the rest.
            let back = try await h.post("auth/game-center/sync", #"{"achievements":[],"leaderboard_score":900}"#, token: r.tokens.accessToken)
            let b = try back.json(Linked.self)
            XCTAssertEqual(b.synced.leaderboard_score, 1500)
            XCTAssertEqual(b.report_to_game_center.achievements, ["capitals_master", "first_win"])
            XCTAssertEqual(b.report_to_game_center.leaderboard_score, 1500)

            // The same player for another user: 409 with the owner's email masked.
            let other = try await h.registerEmail(uniqueEmail())
            try await h.post(
                "auth/game-center/link",
                Self.linkBody(gc, player: player, proof: try gc.proof(player: player)),
                token: other.tokens.accessToken
            ) { resp in
                XCTAssertEqual(resp.status, .conflict)
                let e = try resp.envelope()
                XCTAssertEqual(e.error, "player_id_already_linked")
                XCTAssertEqual(e.extra["linked_user_email"], .string(EmailAddress.mask(email)))
                XCTAssertEqual(e.extra["can_unlink"], true)
            }
            try await h.post("auth/game-center/unlink", "{}", token: r.tokens.accessToken) { XCTAssertEqual($0.status, .ok) }
            try await h.post("auth/game-center/unlink", "{}", token: r.tokens.accessToken) { XCTAssertEqual($0.status, .notFound) }
            // Now the other account can take it.
            try await h.post(
                "auth/game-center/link",
                Self.linkBody(gc, player: player, proof: try gc.proof(player: player)),
                token: other.tokens.accessToken
            ) { XCTAssertEqual($0.status, .ok) }
        }
    }

    func testForgedProofsAreRefused() async throws {
        try await Self.withGameCenter { h, gc in
            let r = try await h.registerEmail(uniqueEmail())
            let player = "T:forged"
            let stranger = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let old = UInt64((Date().timeIntervalSince1970 - 600) * 1000)
            let cases: [(String, String)] = [
                ("wrong key", Self.linkBody(gc, player: player, proof: try gc.proof(player: player, key: stranger))),
                ("other player", Self.linkBody(gc, player: player, proof: try gc.proof(player: "T:someone-else"))),
                ("other bundle", Self.linkBody(gc, player: player, proof: try gc.proof(player: player, bundleID: "com.other.app"))),
                ("older than 5 minutes", Self.linkBody(gc, player: player, proof: try gc.proof(player: player, timestamp: old))),
                (
                    "not https",
                    Self.linkBody(
                        gc,
                        player: player,
                        url: gc.keyURL.replacingOccurrences(of: "https:", with: "http:"),
                        proof: try gc.proof(player: player)
                    )
                ),
                ("not apple.com", Self.linkBody(gc, player: player, url: "https://evil.example.com/key.cer", proof: try gc.proof(player: player))),
                (
                    "lookalike host",
                    Self.linkBody(gc, player: player, url: "https://static.gc.apple.com.evil.com/key.cer", proof: try gc.proof(player: player))
                ),
            ]
            for (name, body) in cases {
                let resp = try await h.post("auth/game-center/link", body, token: r.tokens.accessToken)
                XCTAssertEqual(resp.status, .unauthorized, name)
                XCTAssertEqual(try resp.envelope().error, "invalid_signature", name)
            }
            try await h.post("auth/game-center/link", #"{"player_id":"x"}"#, token: r.tokens.accessToken) { XCTAssertEqual($0.status, .badRequest) }
            try await h.post("auth/game-center/link", Self.linkBody(gc, player: player, proof: ("%%%", "AA==", 1)), token: r.tokens.accessToken) {
                XCTAssertEqual($0.status, .unprocessableContent)
            }
            // Guests are told to create an account first (seed 3c.1).
            let g = try await h.post("auth/register", #"{"provider":"guest","credentials":{"device_id":"gc-\#(UUID())"}}"#)
            let guestToken = try g.json(AuthResponse.self).tokens.accessToken
            try await h.post("auth/game-center/link", Self.linkBody(gc, player: player, proof: try gc.proof(player: player)), token: guestToken) {
                XCTAssertEqual($0.status, .forbidden)
            }
            try await h.post("auth/game-center/sync", #"{"achievements":[],"leaderboard_score":1}"#, token: r.tokens.accessToken) {
                XCTAssertEqual($0.status, .notFound)
            }
        }
    }

    func testExpiredCertificateIsRefused() async throws {
        try await Self.withGameCenter(expired: true) { h, gc in
            let r = try await h.registerEmail(uniqueEmail())
            let resp = try await h.post(
                "auth/game-center/link",
                Self.linkBody(gc, player: "T:exp", proof: try gc.proof(player: "T:exp")),
                token: r.tokens.accessToken
            )
            XCTAssertEqual(resp.status, .unauthorized)
        }
    }

    func testMergeRules() {
        let m = GameCenterMerge.merge(storedAchievements: ["a", "b"], storedScore: 1000, gameCenterAchievements: ["b", "c"], gameCenterScore: 1500)
        XCTAssertEqual(m.achievements, ["a", "b", "c"])
        XCTAssertEqual(m.leaderboardScore, 1500)
        XCTAssertEqual(m.achievementsToReport, ["a"])
        XCTAssertNil(m.scoreToReport)
        XCTAssertEqual(m.conflicts, [.init(type: "leaderboard_score", local: 1000, gameCenter: 1500, resolution: "game_center_wins")])
        let same = GameCenterMerge.merge(storedAchievements: ["a"], storedScore: 5, gameCenterAchievements: ["a"], gameCenterScore: 5)
        XCTAssertEqual(same.conflicts, [])
    }
}

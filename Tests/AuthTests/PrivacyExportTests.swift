import AdsService
import AuthDomain
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineService
import ServiceKit
import ServiceLifecycle
import SubscriptionService
import TestSupport
import WireTypes
import XCTest

@testable import AuthService

/// Seed 6a: the export gathers the user's data from all four services, is stored, and is
/// downloadable through a signed link valid 7 days.
final class PrivacyExportTests: XCTestCase {
    struct AllowAll: AppVerifier { func verify(appID: UUID, apiKey: String) async throws -> Bool { true } }
    struct Status: Decodable {
        var status: String
        var downloadURL: String?
        enum CodingKeys: String, CodingKey {
            case status
            case downloadURL = "download_url"
        }
    }

    /// The three other services, live on free ports.
    static func peers() throws -> ([ServiceName: String], [any Service]) {
        var urls: [ServiceName: String] = [:]
        var apps: [any Service] = []
        let noTokens = AccessTokenVerifier(source: StaticJWKSSource(.init(keys: [])))
        for service in [ServiceName.subscription, .offline, .ads] {
            let port = try TestEnvironment.freePort()
            urls[service] = "http://127.0.0.1:\(port)"
            let overrides = ["\(service.envPrefix)_PORT": String(port)]
            switch service {
            case .subscription:
                apps.append(
                    try SubscriptionService.buildApplication(
                        runtime: TestEnvironment.runtime(.subscription, migrations: try SubscriptionService.migrations(), overrides: overrides),
                        appVerifier: AllowAll(),
                        tokenVerifier: noTokens
                    )
                )
            case .offline:
                apps.append(
                    try OfflineService.buildApplication(
                        runtime: TestEnvironment.runtime(.offline, migrations: try OfflineService.migrations(), overrides: overrides),
                        appVerifier: AllowAll(),
                        tokenVerifier: noTokens
                    )
                )
            default:
                apps.append(
                    try AdsService.buildApplication(
                        runtime: TestEnvironment.runtime(.ads, migrations: try AdsService.migrations(), overrides: overrides),
                        appVerifier: AllowAll(),
                        tokenVerifier: noTokens
                    )
                )
            }
        }
        return (urls, apps)
    }

    static func exporter(_ h: AuthHarness, urls: [ServiceName: String]) throws -> (JobWorker, LinkSigner) {
        let dataKey = try AuthService.dataKey(env: h.runtime.config.environment, signingKey: h.signerKey)
        let signer = LinkSigner(key: HKDF<SHA256>.deriveKey(inputKeyMaterial: dataKey, info: Data("export links v1".utf8), outputByteCount: 32))
        let exporter = PrivacyExporter(
            db: h.runtime.db,
            http: h.runtime.http,
            serviceURLs: urls,
            credential: h.runtime.internalCredential,
            sections: AuthUserData.sections(logger: h.runtime.logger),
            signer: signer,
            mailer: h.mailer,
            emails: EmailComposer(
                settings: TenantSettings(topic: "email_settings", bootstrap: [:], feed: h.runtime.changes) { [:] },
                defaults: AuthSettings(environment: h.runtime.config.environment),
                applications: PostgresApplicationRepository(db: h.runtime.db, logger: h.runtime.logger)
            ),
            publicURL: "http://gateway.test",
            clock: h.clock,
            logger: h.runtime.logger
        )
        let queue = JobQueue(client: h.runtime.db, queue: AccountLifecycle.queue, logger: h.runtime.logger, clock: h.clock)
        return (
            JobWorker(
                queue: queue,
                handlers: [PrivacyExporter.job: { try await exporter.build($0) }],
                backoff: Backoff(base: .milliseconds(10), cap: .milliseconds(10))
            ), signer
        )
    }

    func testExportGathersAllFourServicesAndTheLinkExpires() async throws {
        let (urls, apps) = try Self.peers()
        try await withThrowingTaskGroup(of: Void.self) { group in
            let peers = ServiceGroup(configuration: .init(services: apps, logger: TestEnvironment.logger))
            group.addTask { try await peers.run() }
            try await AuthHarness.run { h in
                let email = uniqueEmail()
                let r = try await h.registerEmail(email)
                let started = try await h.post("auth/privacy/export", "{}", token: r.tokens.accessToken)
                XCTAssertEqual(started.status, .accepted)
                struct Started: Decodable {
                    var export_id: UUID
                    var status: String
                    var estimated_time: String
                }
                let s = try started.json(Started.self)
                XCTAssertEqual(s.status, "pending")
                let pending = try await h.send(.get, "auth/privacy/export/\(s.export_id)", token: r.tokens.accessToken)
                XCTAssertEqual(try pending.json(Status.self).status, "pending")

                let (worker, _) = try Self.exporter(h, urls: urls)
                // Run until this export's job is through (the queue may hold other tests' jobs).
                for _ in 0..<50 {
                    try await worker.runOnce()
                    let done = try await h.scalar(
                        "SELECT count(*)::int FROM auth.jobs WHERE unique_key = 'export:\(s.export_id)' AND status = 'done'"
                    )
                    if done == 1 { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                let ready = try await h.send(.get, "auth/privacy/export/\(s.export_id)", token: r.tokens.accessToken)
                let status = try ready.json(Status.self)
                XCTAssertEqual(status.status, "ready")
                let mail = try XCTUnwrap(h.mailer.sent.withLock { $0.last { $0.to == [email] } })
                XCTAssertEqual(mail.subject, "Vos données sont prêtes")
                XCTAssertTrue(mail.text.contains("/auth/v1/privacy/export/\(s.export_id.uuidString.lowercased())/download?expires="))

                let url = try XCTUnwrap(status.downloadURL)
                let download = try await h.client.execute(uri: url, method: .get) { $0 }
                XCTAssertEqual(download.status, .ok)
                XCTAssertTrue(download.headers[.contentDisposition]?.contains("attachment") ?? false)
                struct Doc: Decodable {
                    var user_id: UUID
                    var services: [String: [String: JSONValue]]
                }
                let doc = try download.json(Doc.self)
                XCTAssertEqual(doc.user_id, r.user.id)
                XCTAssertEqual(Set(doc.services.keys), ["auth", "subscription", "offline", "ads"])
                XCTAssertTrue(String(buffer: download.body).contains(email), "the profile is in the export")
                XCTAssertNotNil(doc.services["auth"]?["activity"])

                // A tampered link, then the same link after 7 days.
                let tampered = url.replacingOccurrences(of: "signature=", with: "signature=x")
                let forged = try await h.client.execute(uri: tampered, method: .get) { $0 }
                XCTAssertEqual(forged.status, .forbidden)
                h.clock.advance(by: 7 * 24 * 3600 + 1)
                let expired = try await h.client.execute(uri: url, method: .get) { $0 }
                XCTAssertEqual(expired.status, .forbidden)
                XCTAssertEqual(try expired.envelope().error, "invalid_link")

                // Someone else's export id, and bad ids.
                let other = try await h.registerEmail(uniqueEmail())
                let notMine = try await h.send(.get, "auth/privacy/export/\(s.export_id)", token: other.tokens.accessToken)
                XCTAssertEqual(notMine.status, .notFound)
                let bad = try await h.send(.get, "auth/privacy/export/not-a-uuid", token: other.tokens.accessToken)
                XCTAssertEqual(bad.status, .badRequest)
            }
            try await stopLocalServer(peers, in: &group)
        }
    }

    func testAnUnreachableServiceKeepsTheExportPendingForARetry() async throws {
        try await AuthHarness.run { h in
            let r = try await h.registerEmail(uniqueEmail())
            let started = try await h.post("auth/privacy/export", "{}", token: r.tokens.accessToken)
            struct Started: Decodable { var export_id: UUID }
            let id = try started.json(Started.self).export_id
            let dead = "http://127.0.0.1:\(try TestEnvironment.freePort())"
            let (worker, _) = try Self.exporter(h, urls: [.subscription: dead, .offline: dead, .ads: dead])
            try await worker.runOnce()
            let status = try await h.send(.get, "auth/privacy/export/\(id)", token: r.tokens.accessToken)
            XCTAssertEqual(try status.json(Status.self).status, "pending")
            let retry = try await h.scalar(
                "SELECT count(*)::int FROM auth.jobs WHERE unique_key = 'export:\(id)' AND status = 'pending' AND attempts = 1 AND last_error IS NOT NULL"
            )
            XCTAssertEqual(retry, 1)
        }
    }
}

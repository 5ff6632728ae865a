import AuthDomain
import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit
import WireTypes

/// Builds exports: auth's part read locally, each other service's part fetched from its
/// `GET /internal/users/{id}/export`. A service that cannot answer makes the job retry
/// (an export missing a service's data would not be a complete answer to the user's right).
struct PrivacyExporter: Sendable {
    static let job = "build_export"
    static let validity: TimeInterval = 7 * 24 * 3600

    let db: DatabasePool
    let http: CurlHTTPClient
    let serviceURLs: [ServiceName: String]
    let credential: InternalCredential
    let sections: [UserDataSection]
    let signer: LinkSigner
    let mailer: any Mailer
    let emails: EmailComposer
    let publicURL: String
    let clock: any WallClock
    let logger: Logger
    var exports: ExportStore { ExportStore(logger: logger) }

    struct Payload: Codable, Sendable {
        var exportID: UUID
        enum CodingKeys: String, CodingKey { case exportID = "export_id" }
    }

    func build(_ job: Job) async throws {
        let exportID = try job.decode(Payload.self).exportID
        let found = try await db.withConnection { try await exports.pending(exportID, on: $0) }
        guard let (userID, appID, email) = found else { return }
        var services: [String: JSONValue] = [:]
        services["auth"] = try await db.withConnection { conn in
            var parts: [String: JSONValue] = [:]
            for s in sections { parts[s.name] = try await s.export(userID, appID, conn) }
            return .object(parts)
        }
        for service in [ServiceName.subscription, .offline, .ads] {
            let url = serviceURLs[service]! + InternalRoutes.export.path(user: userID, app: appID)
            let response = try await http.send(HTTPRequest(url: url, headers: credential.headers, timeout: .seconds(20)), retries: 2)
            guard response.isSuccess else { throw ExportError(description: "\(service.rawValue) answered \(response.status)") }
            services[service.rawValue] = .object(try response.decode(UserDataExport.self).sections)
        }
        let now = clock.now()
        let document: JSONValue = .object([
            "export_id": .string(exportID.lowercasedString), "user_id": .string(userID.lowercasedString),
            "app_id": .string(appID.lowercasedString), "generated_at": .string(ISO8601DateFormatter().string(from: now)),
            "services": .object(services),
        ])
        let json = String(decoding: try JSON.encoder.encode(document), as: UTF8.self)
        let expires = now.addingTimeInterval(Self.validity)
        try await db.withConnection { try await exports.markReady(exportID, data: json, now: now, expires: expires, on: $0) }
        if let email {
            let link = "\(publicURL)/auth/v1/privacy/export/\(exportID.lowercasedString)/download?\(signer.query(for: exportID, expires: expires))"
            try await mailer.send(try await emails.message(.exportReady, app: appID, to: email, locale: nil, values: ["link": link]))
        }
    }

    struct ExportError: Error, CustomStringConvertible { var description: String }
}

/// Signs download links: `expires` and an HMAC of (export id, expires) with the data key, so
/// a link works without a session and stops working after 7 days.
public struct LinkSigner: Sendable {
    let key: SymmetricKey

    func signature(_ id: UUID, _ expires: Int) -> String {
        Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: Data("export:\(id.lowercasedString):\(expires)".utf8), using: key)))
    }

    func query(for id: UUID, expires: Date) -> String {
        let e = Int(expires.timeIntervalSince1970)
        return "expires=\(e)&signature=\(signature(id, e))"
    }

    func isValid(id: UUID, expires: Int, signature: String, now: Date) -> Bool {
        expires > Int(now.timeIntervalSince1970) && ConstantTime.equals(signature, self.signature(id, expires))
    }
}

import AuthDomain
import Crypto
import Foundation
import Hummingbird
import JWTKit
import ServiceKit
import Synchronization
import TestSupport

@testable import AuthService

/// A stand-in for appleid.apple.com: its JWKS (keys the test generates), and the token and
/// revoke endpoints, which check the ES256 client secret signed with the app's team key.
final class FakeApple: Sendable {
    let keys: FakeIdentityProvider
    let teamKey = P256.Signing.PrivateKey()
    let teamID = "TEAM123456"
    let keyID = "KEY1234567"
    let clientID = "com.example.quiz"
    let port: Int
    final class Log: Sendable {
        let exchanged = Mutex([String]())
        let revoked = Mutex([String]())
        let refused = Mutex(0)
    }
    let log = Log()

    init() async throws {
        keys = try await FakeIdentityProvider()
        port = try TestEnvironment.freePort()
    }

    var base: String { "http://127.0.0.1:\(port)" }

    /// `APPLE_SIGNIN_APPS` for one app.
    func config(for app: UUID) -> String {
        let pem = teamKey.pemRepresentation.replacingOccurrences(of: "\n", with: "\\n")
        return #"{"\#(app.uuidString)":{"team_id":"\#(teamID)","key_id":"\#(keyID)","client_id":"\#(clientID)","private_key_pem":"\#(pem)"}}"#
    }

    static func formFields(_ body: String) -> [String: String] {
        var out: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            if kv.count == 2 { out[kv[0]] = kv[1] }
        }
        return out
    }

    /// Checks the client secret as Apple does: ES256 by the team's key, iss/sub/aud.
    func secretIsValid(_ secret: String?) -> Bool {
        guard let secret else { return false }
        let parts = secret.split(separator: ".")
        guard parts.count == 3, let sig = Base64URL.decode(parts[2]),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: sig),
            teamKey.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)),
            let header = Base64URL.decode(parts[0]).flatMap({ try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }),
            let claims = Base64URL.decode(parts[1]).flatMap({ try? JSONSerialization.jsonObject(with: $0) as? [String: Any] })
        else { return false }
        return header["alg"] as? String == "ES256" && header["kid"] as? String == keyID
            && claims["iss"] as? String == teamID && claims["sub"] as? String == clientID
            && claims["aud"] as? String == "https://appleid.apple.com"
    }

    func application() -> some ApplicationProtocol {
        let router = Router()
        let jwks = keys.jwks
        router.get("auth/keys") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/json", .cacheControl: "max-age=86400"],
                body: .init(byteBuffer: ByteBuffer(string: jwks))
            )
        }
        router.post("auth/token") { request, _ -> Response in
            let body = String(buffer: try await request.body.collect(upTo: 65536))
            let f = Self.formFields(body)
            guard self.secretIsValid(f["client_secret"]), f["client_id"] == self.clientID, f["grant_type"] == "authorization_code",
                f["code"] == "valid-code"
            else {
                self.log.refused.withLock { $0 += 1 }
                return Response(
                    status: .badRequest,
                    headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"error":"invalid_grant"}"#))
                )
            }
            let rt = "apple-rt-\(UUID().uuidString)"
            self.log.exchanged.withLock { $0.append(rt) }
            return Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: .init(
                    byteBuffer: ByteBuffer(
                        string: #"{"access_token":"at","token_type":"Bearer","expires_in":3600,"refresh_token":"\#(rt)","id_token":"x"}"#
                    )
                )
            )
        }
        router.post("auth/revoke") { request, _ -> Response in
            let f = Self.formFields(String(buffer: try await request.body.collect(upTo: 65536)))
            guard self.secretIsValid(f["client_secret"]), f["token_type_hint"] == "refresh_token", let token = f["token"] else {
                return Response(status: .badRequest)
            }
            self.log.revoked.withLock { $0.append(token) }
            return Response(status: .ok)
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
    }

    struct Claims: JWTPayload {
        var iss: String
        var aud: String
        var sub: String
        var exp: Int
        var iat: Int
        var email: String?
        var email_verified: String?
        var is_private_email: String?
        var nonce: String?
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    func identityToken(
        sub: String,
        aud: String? = nil,
        email: String? = nil,
        rawNonce: String? = nil,
        nonceOverride: String? = nil,
        iss: String = "https://appleid.apple.com",
        expiresIn: Int = 600
    ) async throws -> String {
        let t = Int(Date().timeIntervalSince1970)
        let nonce = nonceOverride ?? rawNonce.map { SHA256.hash(data: Data($0.utf8)).map { String(format: "%02x", $0) }.joined() }
        return try await keys.keys.sign(
            Claims(
                iss: iss,
                aud: aud ?? clientID,
                sub: sub,
                exp: t + expiresIn,
                iat: t - 5,
                email: email,
                email_verified: email == nil ? nil : "true",
                is_private_email: "true",
                nonce: nonce
            ),
            kid: JWKIdentifier(string: keys.kid)
        )
    }
}

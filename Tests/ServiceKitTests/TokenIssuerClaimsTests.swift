import Crypto
import Foundation
import ServiceKit
import WireTypes
import XCTest

/// #32: the services accept only auth's issuer (and, during a change, the ones still accepted),
/// an audience that names the token's app, and either name of the Ed25519 algorithm.
final class TokenIssuerClaimsTests: XCTestCase {
    let key = Curve25519.Signing.PrivateKey()
    let app = UUID()

    func token(issuer: String, aud: String? = nil, alg: String = "EdDSA") throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims = AccessTokenClaims(
            userID: UUID(),
            appID: app,
            email: nil,
            status: .free,
            isGuest: false,
            issuer: issuer,
            issuedAt: now - 5,
            expiresAt: now + 600,
            jti: UUID().uuidString
        )
        if let aud { claims.aud = aud }
        let signer = AccessTokenSigner(privateKey: key, issuer: issuer)
        let header = #"{"alg":"\#(alg)","kid":"\#(signer.kid)","typ":"JWT"}"#
        let input = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(try JSON.encoder.encode(claims))
        return input + "." + Base64URL.encode(try key.signature(for: Data(input.utf8)))
    }

    func verifier() -> AccessTokenVerifier {
        AccessTokenVerifier(
            source: StaticJWKSSource(JWKSDocument(keys: [AccessTokenSigner(privateKey: key).jwk])),
            issuers: ["https://api.example.com/auth/v1", "auth"]
        )
    }

    func testIssuerAudienceAndAlgorithm() async throws {
        let v = verifier()
        let good = try await v.verify(try token(issuer: "https://api.example.com/auth/v1"), appID: app)
        XCTAssertEqual(good.aud, app.lowercasedString, "the audience names the app")
        _ = try await v.verify(try token(issuer: "auth"), appID: app)  // signed before the change, still accepted
        _ = try await v.verify(try token(issuer: "https://api.example.com/auth/v1", alg: "Ed25519"), appID: app)
        for (name, t) in [
            ("another issuer", try token(issuer: "https://evil.example.com/auth/v1")),
            ("another audience", try token(issuer: "auth", aud: UUID().lowercasedString)),
            ("another algorithm", try token(issuer: "auth", alg: "HS256")),
        ] {
            do {
                _ = try await v.verify(t, appID: app)
                XCTFail("\(name) was accepted")
            } catch let e as AppError {
                XCTAssertEqual(e.status, .unauthorized, name)
            }
        }
    }
}

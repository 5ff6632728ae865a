import Foundation
import JWTKit
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// #32: a third party (an API gateway, a game server) verifies our access tokens with a stock
/// JOSE library from the discovery document alone: the issuer, the key set it points to, the
/// audience that names the app.
final class TokenDiscoveryStackTests: XCTestCase {
    let http = DocumentedHTTPClient()
    let gateway = TestEnvironment.gatewayURL
    deinit { http.shutdown() }

    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var aud: AudienceClaim
        var sub: SubjectClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws { try exp.verifyNotExpired() }
    }

    func testAStockJOSELibraryVerifiesOurTokenFromTheDiscoveryDocument() async throws {
        let t = try DemoApp.tenantHeaders()
        let appID = try XCTUnwrap(DemoApp.values()["APP_ID"])
        let r = try await http.send(
            HTTPRequest(
                method: "POST",
                url: "http://127.0.0.1:3001/auth/v1/auth/register",
                headers: t + [("X-Forwarded-For", "10.66.\(Int.random(in: 0...250)).\(Int.random(in: 1...250))")],
                body: Data(#"{"provider":"guest","credentials":{"device_id":"jose-\#(UUID())"}}"#.utf8)
            )
        )
        XCTAssertEqual(r.status, 201)
        struct Tokens: Decodable {
            struct T: Decodable { var access_token: String }
            var tokens: T
        }
        let token = try r.decode(Tokens.self).tokens.access_token

        let discovery = try await http.send(HTTPRequest(url: "\(gateway)/auth/v1/.well-known/openid-configuration"))
        XCTAssertEqual(discovery.status, 200)
        struct Discovery: Decodable {
            var issuer: String
            var jwks_uri: String
            var id_token_signing_alg_values_supported: [String]
        }
        let doc = try discovery.decode(Discovery.self)
        XCTAssertTrue(doc.issuer.hasPrefix("http"), "the issuer is a URL: \(doc.issuer)")
        XCTAssertTrue(doc.id_token_signing_alg_values_supported.contains("Ed25519"))
        let jwks = try await http.send(HTTPRequest(url: doc.jwks_uri))
        XCTAssertEqual(jwks.status, 200, doc.jwks_uri)

        let keys = JWTKeyCollection()
        try await keys.add(jwksJSON: String(decoding: jwks.body, as: UTF8.self))
        let claims = try await keys.verify(token, as: Claims.self)
        XCTAssertEqual(claims.iss.value, doc.issuer)
        XCTAssertNoThrow(try claims.aud.verifyIntendedAudience(includes: appID.lowercased()))
        XCTAssertThrowsError(try claims.aud.verifyIntendedAudience(includes: UUID().uuidString.lowercased()), "another app's audience")
        // A token altered by one byte is refused by the same library.
        var forged = Array(token)
        forged[forged.count - 5] = forged[forged.count - 5] == "A" ? "B" : "A"
        do {
            _ = try await keys.verify(String(forged), as: Claims.self)
            XCTFail("a forged token was accepted")
        } catch {}
    }
}

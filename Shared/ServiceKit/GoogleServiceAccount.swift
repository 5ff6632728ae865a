import Crypto
import Foundation
import _CryptoExtras

/// Google's OAuth2 grant for a service account (RFC 7523, the JWT bearer grant): an RS256 JWT
/// signed with the account's key, exchanged at the token endpoint for an access token. Used by
/// subscription (Android Publisher) and auth (FCM HTTP v1), each with its own scope and cache.
public enum GoogleServiceAccount {
    public struct TokenError: Error, CustomStringConvertible {
        public var status: Int
        public var description: String
    }

    /// One grant: the access token and when it expires.
    public static func grant(
        http: CurlHTTPClient,
        tokenURL: String,
        clientEmail: String,
        scope: String,
        privateKey: _RSA.Signing.PrivateKey,
        now: Date
    ) async throws -> (token: String, expires: Date) {
        let iat = Int(now.timeIntervalSince1970)
        let header = Base64URL.encode(Data(#"{"alg":"RS256","typ":"JWT"}"#.utf8))
        let claims = Base64URL.encode(
            Data(#"{"iss":"\#(clientEmail)","scope":"\#(scope)","aud":"\#(tokenURL)","iat":\#(iat),"exp":\#(iat + 3600)}"#.utf8)
        )
        let input = header + "." + claims
        let signature = try privateKey.signature(for: input.sha256, padding: .insecurePKCS1v1_5)
        let assertion = input + "." + Base64URL.encode(signature.rawRepresentation)
        let body = Data("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)".utf8)
        let response = try await http.send(
            HTTPRequest(
                method: "POST",
                url: tokenURL,
                headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: body,
                timeout: .seconds(10)
            )
        )
        struct T: Decodable {
            var access_token: String
            var expires_in: Int
        }
        guard response.isSuccess, let t = try? JSONDecoder().decode(T.self, from: response.body) else {
            throw TokenError(status: response.status, description: "token endpoint answered \(response.status)")
        }
        return (t.access_token, now.addingTimeInterval(TimeInterval(t.expires_in)))
    }
}

import Foundation

/// A user's account status as every service sees it (seed: `users.status`).
public enum UserStatus: String, Codable, Sendable, CaseIterable {
    case free
    case premium
    case suspended
}

/// The claims of an access token signed by auth (EdDSA, `kid` in the header) and verified by
/// every service against auth's JWKS. `sub` and `user_id` carry the same id: `user_id` is the
/// seed's name, `sub` the JWT standard one.
public struct AccessTokenClaims: Codable, Sendable, Equatable {
    public var sub: String
    public var userID: UUID
    public var appID: UUID
    public var email: String?
    public var status: UserStatus
    public var isGuest: Bool
    public var iss: String
    /// The audience: the app the token is for (its id), so that a gateway or a third party can
    /// check it with a stock JOSE library (#32). Absent on tokens from before.
    public var aud: String?
    public var iat: Int
    public var exp: Int
    public var jti: String
    /// The session (device token family) the token belongs to: ending it refuses the token.
    public var sid: UUID?
    /// The user's session epoch when the token was issued: "every device" ends tokens of an
    /// older epoch.
    public var sv: Int?

    enum CodingKeys: String, CodingKey {
        case sub
        case userID = "user_id"
        case appID = "app_id"
        case email, status
        case isGuest = "is_guest"
        case iss, aud, iat, exp, jti, sid, sv
    }

    public init(
        userID: UUID,
        appID: UUID,
        email: String?,
        status: UserStatus,
        isGuest: Bool,
        issuer: String,
        issuedAt: Int,
        expiresAt: Int,
        jti: String,
        sessionID: UUID? = nil,
        sessionEpoch: Int? = nil
    ) {
        self.sid = sessionID
        self.sv = sessionEpoch
        self.sub = userID.lowercasedString
        self.userID = userID
        self.appID = appID
        self.email = email
        self.status = status
        self.isGuest = isGuest
        self.iss = issuer
        self.aud = appID.lowercasedString
        self.iat = issuedAt
        self.exp = expiresAt
        self.jti = jti
    }
}

/// Who is calling, once the tenant headers and (when present) the access token are verified.
public struct Identity: Sendable, Equatable {
    public var appID: UUID
    public var userID: UUID?
    public var status: UserStatus?
    public var isGuest: Bool
    public var email: String?

    public init(appID: UUID, userID: UUID? = nil, status: UserStatus? = nil, isGuest: Bool = false, email: String? = nil) {
        self.appID = appID
        self.userID = userID
        self.status = status
        self.isGuest = isGuest
        self.email = email
    }
}

extension UUID {
    /// The canonical lower-case form (`uuidString` is upper-case, and made through `sprintf`,
    /// which showed in the profile of every request that names a user).
    public var lowercasedString: String {
        let digits = Array("0123456789abcdef".utf8)
        return withUnsafeBytes(of: uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { out in
                var i = 0
                for (n, byte) in bytes.enumerated() {
                    if n == 4 || n == 6 || n == 8 || n == 10 {
                        out[i] = UInt8(ascii: "-")
                        i += 1
                    }
                    out[i] = digits[Int(byte >> 4)]
                    out[i + 1] = digits[Int(byte & 0x0f)]
                    i += 2
                }
                return i
            }
        }
    }
}

import Foundation
import ServiceCore

/// The console's operator tokens and sessions (#47): an access token is an EdDSA JWS signed by
/// auth's key like a player's, but with its own audience and claims, so neither is ever taken
/// for the other (a player's token has no `role`; an operator's has no `user_id`).
public struct ConsoleClaims: Codable, Sendable, Equatable {
    public static let audience = OperatorKeys.consoleAudience

    public var iss: String
    public var aud: String
    public var sub: String
    public var appID: UUID
    public var role: OperatorRole
    public var email: String
    public var sid: UUID
    public var iat: Int
    public var exp: Int
    public var jti: String

    package enum CodingKeys: String, CodingKey {
        case iss, aud, sub, role, email, sid, iat, exp, jti
        case appID = "app_id"
    }

    public var memberID: UUID? { UUID(uuidString: sub) }
    package init(
        iss: String,
        aud: String,
        sub: String,
        appID: UUID,
        role: OperatorRole,
        email: String,
        sid: UUID,
        iat: Int,
        exp: Int,
        jti: String
    ) {
        self.iss = iss
        self.aud = aud
        self.sub = sub
        self.appID = appID
        self.role = role
        self.email = email
        self.sid = sid
        self.iat = iat
        self.exp = exp
        self.jti = jti
    }
}

public enum ConsoleRules {
    /// Short: a role change or a removal needs no token to run out (services ask auth, cached
    /// `OPERATOR_CACHE_SECONDS`), but a stolen token is worth little for long.
    public static let accessLifetime: TimeInterval = 10 * 60
    /// A console left open is signed out after a working day.
    public static let sessionLifetime: TimeInterval = 12 * 3600
    public static let inviteLifetime: TimeInterval = 72 * 3600
    /// A forgotten password's link: an hour, as the players' reset.
    public static let resetLifetime: TimeInterval = 3600
    public static let refreshCookie = "console_refresh"
    public static let refreshPath = "/auth/v1/console/refresh"
    /// A header a cross-site form cannot send: the refresh and logout ask for it, so a page
    /// elsewhere cannot spend the cookie (SameSite=Strict is the first guard).
    public static let requestHeader = "X-Console-Request"

    /// The refresh cookie as the browser keeps it: only sent to the refresh route, never to
    /// script, never cross-site; `Secure` outside the local stack (plain http there).
    public static func cookie(_ value: String, secure: Bool, maxAge: Int = Int(sessionLifetime)) -> String {
        "\(refreshCookie)=\(value); Path=\(refreshPath); Max-Age=\(maxAge); HttpOnly; SameSite=Strict\(secure ? "; Secure" : "")"
    }

    /// The cookie's value in a `Cookie` header, when there is one.
    public static func refreshToken(fromCookieHeader header: String?) -> String? {
        guard let header else { return nil }
        for part in header.split(separator: ";") {
            let pair = part.trimmingCharacters(in: .whitespaces)
            if pair.hasPrefix(refreshCookie + "=") {
                let value = String(pair.dropFirst(refreshCookie.count + 1))
                return value.isEmpty || value.utf8.count > 128 ? nil : value
            }
        }
        return nil
    }

    /// Whether `claims` may act for `app` at `now` (the session's liveness is auth's to check).
    /// `expiredToo`: for ending the token's own session (a logout), where an expired token
    /// still says which session it was.
    public static func accepts(_ claims: ConsoleClaims, app: UUID, now: Date, leeway: Int = 30, expiredToo: Bool = false) -> Bool {
        let t = Int(now.timeIntervalSince1970)
        return claims.aud == ConsoleClaims.audience && claims.appID == app && (expiredToo || claims.exp + leeway > t) && claims.iat - leeway <= t
            && claims.memberID != nil
    }

    /// Whether `member` may stop being an owner (a role change, a removal): when they are one,
    /// another owner must remain. A team with no owner yet (the platform's token built it) may
    /// lose any member.
    public static func ownerMayLeave(member: UUID, owners: [UUID]) -> Bool {
        !owners.contains(member) || owners.contains { $0 != member }
    }
}

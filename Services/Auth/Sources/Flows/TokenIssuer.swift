import AuthDomain
import Foundation
import PostgresNIO
import ServiceKit
import WireTypes

/// Signs access tokens and creates refresh tokens (seed: access 7 days, refresh 30 days).
public struct TokenIssuer: Sendable {
    let signer: AccessTokenSigner
    let refreshTokens: RefreshTokenStore

    /// An access token of the session (token family) `session`, at the user's current epoch.
    public func accessToken(for user: User, session: UUID, now: Date) throws -> String {
        let iat = Int(now.timeIntervalSince1970)
        return try signer.sign(
            AccessTokenClaims(
                userID: user.id,
                appID: user.appID,
                email: user.email,
                status: user.status,
                isGuest: user.isGuest,
                issuer: signer.issuer,
                issuedAt: iat,
                expiresAt: iat + Int(TokenLifetimes.accessToken),
                jti: UUID().lowercasedString,
                sessionID: session,
                sessionEpoch: user.sessionEpoch
            )
        )
    }

    /// A new session on a device: the device's previous token is revoked, a new family begins.
    public func startSession(for user: User, device: DeviceInfo?, now: Date, on conn: PostgresConnection) async throws -> TokenPair {
        let deviceID = Self.deviceID(device)
        try await refreshTokens.revokeDevice(userID: user.id, deviceID: deviceID, reason: "new_login", on: conn)
        let refresh = OpaqueToken.generate()
        let info = String(decoding: try JSON.encoder.encode(device ?? DeviceInfo()), as: UTF8.self)
        let family = UUID()
        try await refreshTokens.insert(
            token: refresh,
            userID: user.id,
            appID: user.appID,
            familyID: family,
            deviceID: deviceID,
            deviceInfo: info,
            now: now,
            on: conn
        )
        return pair(access: try accessToken(for: user, session: family, now: now), refresh: refresh)
    }

    func pair(access: String, refresh: String) -> TokenPair {
        TokenPair(accessToken: access, refreshToken: refresh, expiresIn: Int(TokenLifetimes.accessToken), tokenType: "Bearer")
    }

    static func deviceID(_ device: DeviceInfo?) -> String {
        guard let id = device?.deviceID?.trimmingWhitespace, !id.isEmpty else { return "default" }
        return String(id.prefix(200))
    }
}

import AuthDomain
import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import NIOPosix
import PostgresNIO
import ServiceKit
import WireTypes

struct AuthController {
    let ctx: AuthContext
    var signIn: SignIn { SignIn(ctx: ctx) }

    func addRoutes(tenant: RouterGroup<ServiceRequestContext>, user: RouterGroup<ServiceRequestContext>) {
        tenant.post("auth/register") { request, context in try await register(request, context) }
        tenant.post("auth/login") { request, context in try await login(request, context) }
        tenant.post("auth/refresh") { request, context in try await refresh(request, context) }
        user.post("auth/logout") { request, context in try await logout(request, context) }
        user.get("auth/me") { _, context in try await me(context) }
    }

    // MARK: register (UC-AUTH-1.1)

    func register(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let appID = try context.requireApp()
        try await ctx.enforceSignInLimit(context, scope: "register")
        let body = try await request.decodeJSON(as: AuthRequest.self, context: context)
        let now = ctx.clock.now()
        switch body.provider {
        case .email:
            return try await registerEmail(body, appID: appID, now: now, request, context)
        case .guest:
            return try await signInGuest(body, appID: appID, now: now, request, context)
        case .google, .apple:
            return try await providerSignIn(body, appID: appID, registering: true, now: now, request, context)
        }
    }

    /// Google or Apple: verify the provider's proof, then register or log in with it.
    func providerSignIn(
        _ body: AuthRequest,
        appID: UUID,
        registering: Bool,
        now: Date,
        _ request: Request,
        _ context: ServiceRequestContext
    ) async throws -> Response {
        if body.provider == .apple {
            let (identity, sealed) = try await verifyApple(body.credentials, appID: appID, now: now, request, context)
            return try await signInWithProvider(
                .apple,
                identity: identity,
                body: body,
                appID: appID,
                registering: registering,
                providerRefreshToken: sealed,
                now: now,
                request,
                context
            )
        }
        let identity = try await verifyGoogle(body.credentials, appID: appID, now: now, request, context)
        return try await signInWithProvider(
            .google,
            identity: identity,
            body: body,
            appID: appID,
            registering: registering,
            now: now,
            request,
            context
        )
    }

    private func registerEmail(
        _ body: AuthRequest,
        appID: UUID,
        now: Date,
        _ request: Request,
        _ context: ServiceRequestContext
    ) async throws -> Response {
        let rawEmail = try body.credentials.require(body.credentials.email, "email")
        let password = try body.credentials.require(body.credentials.password, "password")
        guard let email = EmailAddress.normalize(rawEmail) else {
            throw AppError.validation("credentials.email", "Invalid email format")
        }
        try ctx.passwords.require(password, userInputs: [email], field: "credentials.password")
        // Cheap check first so an existing account answers without a bcrypt round.
        if let existing = try await ctx.db.withConnection({ try await ctx.users.find(.email(email), appID: appID, on: $0) }) {
            throw SignIn.emailTaken(existing, attempted: .email)
        }
        let hash = try await ctx.hashPassword(password)
        let verifyToken = OpaqueToken.generate()
        do {
            let (user, tokens) = try await signIn.registerEmail(
                appID: appID,
                email: email,
                passwordHash: hash,
                verifyToken: verifyToken,
                device: body.deviceInfo,
                now: now,
                origin: ctx.origin(request, context)
            )
            await sendVerification(to: email, token: verifyToken, app: appID, locale: EmailLocale.preferred(request.headers[.acceptLanguage]))
            return try context.json(AuthResponse(user: user.view(), tokens: tokens), status: .created)
        } catch  where DatabaseErrors.isUniqueViolation(error) {
            // A concurrent registration of the same email won.
            let existing = try await ctx.db.withConnection { try await ctx.users.find(.email(email), appID: appID, on: $0) }
            throw existing.map { SignIn.emailTaken($0, attempted: .email) } ?? AppError(AuthErrorCode.emailAlreadyExists, "Email already registered")
        }
    }

    func sendVerification(to email: String, token: String, app: UUID, locale: EmailLocale?) async {
        do {
            try await ctx.mailer.send(
                try await ctx.emails.message(.verification, app: app, to: email, locale: locale, path: "/verify-email?token=\(token)")
            )
        } catch {
            // The account exists and the user can ask for a resend; do not fail the sign-up.
            ctx.logger.error("verification email not sent", metadata: ["error": "\(error)"])
        }
    }

    // MARK: guest (seed 3c, seed 004)

    private func signInGuest(
        _ body: AuthRequest,
        appID: UUID,
        now: Date,
        _ request: Request,
        _ context: ServiceRequestContext
    ) async throws -> Response {
        let deviceID = try body.credentials.require(body.credentials.deviceID ?? body.deviceInfo?.deviceID, "device_id")
        guard deviceID.count <= 200 else { throw AppError.validation("credentials.device_id", "device_id is too long") }
        if let s = body.credentials.guestSecret, s.utf8.count > 200 {
            throw AppError.validation("credentials.guest_secret", "guest_secret is too long")
        }
        var device = body.deviceInfo ?? DeviceInfo()
        device.deviceID = deviceID
        let expires = now.addingTimeInterval(TokenLifetimes.guestInactivity)
        let result: (User, TokenPair, Bool, String?)
        do {
            result = try await signIn.guest(
                appID: appID,
                deviceID: deviceID,
                guestSecret: body.credentials.guestSecret,
                device: device,
                expires: expires,
                now: now,
                origin: ctx.origin(request, context)
            )
        } catch  where DatabaseErrors.isUniqueViolation(error) {
            // The same device registered concurrently: that guest exists now (its secret went to the winner).
            return try await signInGuest(body, appID: appID, now: now, request, context)
        } catch let e as AppError where e.status == .unauthorized {
            await ctx.audit.record(
                ctx.entry(
                    "login",
                    "failure",
                    app: appID,
                    user: nil,
                    request,
                    context,
                    details: ["provider": "guest", "reason": .string(e.code)]
                ),
                db: ctx.db
            )
            throw e
        }
        return try context.json(AuthResponse(user: result.0.view(), tokens: result.1, guestSecret: result.3), status: result.2 ? .created : .ok)
    }

    // MARK: Google / Apple

    func verifyGoogle(
        _ credentials: Credentials,
        appID: UUID,
        now: Date,
        _ request: Request,
        _ context: ServiceRequestContext
    ) async throws -> ProviderIdentity {
        let token = try credentials.require(credentials.googleIDToken, "google_id_token")
        let clientIDs = try await ctx.applications.find(id: appID)?.googleClientIDs ?? []
        return try await checkingProof(.google, label: "Google", appID: appID, request, context) {
            guard !clientIDs.isEmpty else { throw IdentityTokenError(description: "no Google client id configured for the app") }
            return try await ctx.google.verify(idToken: token, clientIDs: clientIDs, now: now)
        }
    }

    /// A provider's proof, checked: its keys unreachable is a 503 the app may retry; anything
    /// else refused is audited and answered 401 `invalid_token` "<Provider> authentication failed".
    func checkingProof<T: Sendable>(
        _ provider: AuthProvider,
        label: String,
        appID: UUID,
        _ request: Request,
        _ context: ServiceRequestContext,
        _ check: () async throws -> T
    ) async throws -> T {
        do {
            return try await check()
        } catch let error as HTTPClientError {
            ctx.logger.error("\(label) keys unreachable", metadata: ["error": "\(error)"])
            throw AppError(AuthErrorCode.providerUnavailable, "\(label) sign-in is temporarily unavailable")
        } catch {
            ctx.logger.info("\(label) token refused", metadata: ["reason": "\(error)"])
            await ctx.audit.record(
                ctx.entry(
                    "sign_in",
                    "failure",
                    app: appID,
                    user: nil,
                    request,
                    context,
                    details: ["provider": .string(provider.rawValue), "reason": "invalid_token"]
                ),
                db: ctx.db
            )
            throw AppError(.unauthorized, "invalid_token", "\(label) authentication failed")
        }
    }

    /// Verifies Apple's identity token (and nonce), takes the name from `user_info` (Apple
    /// sends it once), and exchanges the authorization code for Apple's refresh token, kept
    /// sealed so that account deletion can revoke it.
    func verifyApple(
        _ credentials: Credentials,
        appID: UUID,
        now: Date,
        _ request: Request,
        _ context: ServiceRequestContext
    )
        async throws -> (ProviderIdentity, ByteBuffer?)
    {
        let token = try credentials.require(credentials.appleIdentityToken, "apple_identity_token")
        let audiences = try await ctx.applications.find(id: appID)?.appleBundleIDs ?? []
        var identity = try await checkingProof(.apple, label: "Apple", appID: appID, request, context) {
            guard !audiences.isEmpty else { throw AppleIdentityError(description: "no Apple bundle id configured for the app") }
            return try await ctx.apple.verify(identityToken: token, audiences: audiences, rawNonce: credentials.nonce, now: now)
        }
        let name = [credentials.userInfo?.firstName, credentials.userInfo?.lastName].compactMap { $0 }.joined(separator: " ")
        identity.name = name.isEmpty ? nil : String(name.prefix(200))
        var sealed: ByteBuffer?
        if let code = credentials.appleAuthorizationCode, let config = try await ctx.appleConfigs.value(for: appID) {
            do {
                sealed = try ctx.box.seal(try await ctx.apple.exchange(code: code, config: config, now: now))
            } catch {
                ctx.logger.info("Apple code exchange failed", metadata: ["reason": "\(error)"])
                throw AppError(.unauthorized, "invalid_token", "Apple authentication failed")
            }
        } else if credentials.appleAuthorizationCode != nil {
            ctx.logger.warning("Apple authorization code received but no Apple key configured for the app", metadata: ["app_id": "\(appID)"])
        }
        return (identity, sealed)
    }

    /// Register or login with a provider identity. Registering an identity that already has
    /// an account logs in (seed 12a); logging in with one that has none is a 404 (13a).
    func signInWithProvider(
        _ provider: AuthProvider,
        identity: ProviderIdentity,
        body: AuthRequest,
        appID: UUID,
        registering: Bool,
        providerRefreshToken: ByteBuffer? = nil,
        now: Date,
        _ request: Request,
        _ context: ServiceRequestContext
    ) async throws -> Response {
        let lookup: UserStore.Lookup = provider == .google ? .google(identity.subject) : .apple(identity.subject)
        do {
            let (user, tokens, created) = try await signIn.provider(
                provider,
                identity: identity,
                lookup: lookup,
                appID: appID,
                registering: registering,
                providerRefreshToken: providerRefreshToken,
                device: body.deviceInfo,
                now: now,
                origin: ctx.origin(request, context)
            )
            let privacy = created ? nil : try await ctx.db.withConnection { try await ctx.users.privacy(of: user.id, on: $0) }
            return try context.json(AuthResponse(user: user.view(privacy: privacy), tokens: tokens), status: created ? .created : .ok)
        } catch  where DatabaseErrors.isUniqueViolation(error) {
            // The same identity registered concurrently: now it exists, so this is a login.
            return try await signInWithProvider(
                provider,
                identity: identity,
                body: body,
                appID: appID,
                registering: false,
                now: now,
                request,
                context
            )
        }
    }

    /// Suspended accounts are refused (seed 14a), locked ones too (14b).
    func requireActive(_ user: User, now: Date) throws { try ctx.requireActive(user, now: now) }

    func accountLocked(until: Date, now: Date) -> AppError { ctx.accountLocked(until: until, now: now) }

    // MARK: login (UC-AUTH-1.2)

    func login(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let appID = try context.requireApp()
        try await ctx.enforceSignInLimit(context, scope: "login")
        let body = try await request.decodeJSON(as: AuthRequest.self, context: context)
        let now = ctx.clock.now()
        switch body.provider {
        case .email: return try await loginEmail(body, appID: appID, now: now, request, context)
        case .guest: return try await signInGuest(body, appID: appID, now: now, request, context)
        case .google, .apple:
            return try await providerSignIn(body, appID: appID, registering: false, now: now, request, context)
        }
    }

    private func loginEmail(
        _ body: AuthRequest,
        appID: UUID,
        now: Date,
        _ request: Request,
        _ context: ServiceRequestContext
    ) async throws -> Response {
        let rawEmail = try body.credentials.require(body.credentials.email, "email")
        let password = try body.credentials.require(body.credentials.password, "password")
        guard let email = EmailAddress.normalize(rawEmail),
            let user = try await ctx.db.withConnection({ try await ctx.users.find(.email(email), appID: appID, on: $0) }),
            let hash = user.passwordHash
        else {
            await ctx.audit.record(
                ctx.entry(
                    "login",
                    "failure",
                    app: appID,
                    user: nil,
                    request,
                    context,
                    details: ["provider": "email", "reason": "user_not_found"]
                ),
                db: ctx.db
            )
            throw AppError(AuthErrorCode.userNotFound, "No account found with this email", extra: ["can_register": true])
        }
        do { try requireActive(user, now: now) } catch {
            await ctx.audit.record(
                ctx.entry(
                    "login",
                    "failure",
                    app: appID,
                    user: user.id,
                    request,
                    context,
                    details: ["provider": "email", "reason": .string((error as? AppError)?.code ?? "refused")]
                ),
                db: ctx.db
            )
            throw error
        }
        guard try await ctx.checkPassword(password, hash: hash) else {
            let (attempts, lockedUntil) = try await signIn.wrongPassword(user, appID: appID, now: now, origin: ctx.origin(request, context))
            if let lockedUntil { throw accountLocked(until: lockedUntil, now: now) }
            throw AppError(
                AuthErrorCode.invalidCredentials,
                "Incorrect email or password",
                extra: ["attempts_remaining": .int(LockoutPolicy.attemptsRemaining(after: attempts))]
            )
        }
        let (signedIn, tokens) = try await signIn.passwordAccepted(
            user,
            appID: appID,
            device: body.deviceInfo,
            now: now,
            origin: ctx.origin(request, context)
        )
        let privacy = try await ctx.db.withConnection { try await ctx.users.privacy(of: user.id, on: $0) }
        return try context.json(AuthResponse(user: signedIn.view(privacy: privacy), tokens: tokens))
    }

    // MARK: refresh (UC-AUTH-1.8)

    struct RefreshRequest: Codable {
        var refreshToken: String
        enum CodingKeys: String, CodingKey { case refreshToken = "refresh_token" }
    }

    func refresh(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let appID = try context.requireApp()
        try await ctx.limiter.enforce(
            scope: "refresh",
            key: context.clientAddress,
            limit: ctx.settings.refreshLimit,
            window: ctx.settings.refreshWindow
        )
        let body = try await request.decodeJSON(as: RefreshRequest.self, context: context)
        guard !body.refreshToken.isEmpty, body.refreshToken.utf8.count <= 512 else {
            throw AppError.validation("refresh_token", "Invalid refresh token")
        }
        let now = ctx.clock.now()
        let outcome = try await TokenRefresh(ctx: ctx).run(token: body.refreshToken, appID: appID, now: now) { user, ended in
            ctx.entry("refresh", "reuse_detected", app: appID, user: user, request, context, details: ["revoked": .int(ended)])
        }
        switch outcome {
        case .pair(let pair): return try context.json(["tokens": pair])
        case .refused: throw AppError(.unauthorized, "invalid_token", "Invalid or expired refresh token")
        case .reused: throw AppError(AuthErrorCode.tokenReused, "Refresh token was already used; please sign in again")
        case .suspended(let owner):
            try requireActive(owner, now: now)
            throw AppError.unavailable
        }
    }

    // MARK: logout, me

    struct LogoutRequest: Codable {
        var refreshToken: String?
        var all: Bool?
        enum CodingKeys: String, CodingKey {
            case refreshToken = "refresh_token"
            case all
        }
    }

    struct LogoutResponse: Codable {
        var loggedOut: Bool
        var revokedSessions: Int
        enum CodingKeys: String, CodingKey {
            case loggedOut = "logged_out"
            case revokedSessions = "revoked_sessions"
        }
    }

    func logout(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        let body = try await request.decodeJSON(as: LogoutRequest.self, context: context)
        let revoked = try await signIn.logout(
            appID: appID,
            userID: userID,
            all: body.all == true,
            refreshToken: body.refreshToken,
            origin: ctx.origin(request, context)
        )
        ctx.sessions.apply([revoked.1])
        return try context.json(LogoutResponse(loggedOut: true, revokedSessions: revoked.0))
    }

    func me(_ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        let (user, privacy) = try await ctx.db.withConnection { conn -> (User?, PrivacySettings?) in
            guard let user = try await ctx.users.find(.id(userID), appID: appID, on: conn) else { return (nil, nil) }
            return (user, try await ctx.users.privacy(of: userID, on: conn))
        }
        guard let user else { throw AppError(.unauthorized, "invalid_token", "This account no longer exists") }
        if user.status == .suspended { try requireActive(user, now: ctx.clock.now()) }
        return try context.json(["user": user.view(privacy: privacy, linked: user.signInMethods)])
    }
}

import Foundation
import Hummingbird
import NIOCore
import PostgresNIO
import ServiceKit
import WireTypes

/// UC-AUTH-1.7: attach another way to sign in to the signed-in user. A guest who links
/// keeps the same user id (and so every piece of data) and becomes a full account.
struct LinkController {
    let ctx: AuthContext
    let sessions: AuthController

    func addRoutes(to user: RouterGroup<ServiceRequestContext>) {
        user.post("auth/link") { request, context in try await link(request, context) }
        user.delete("auth/link/:provider") { request, context in try await unlink(request, context) }
    }

    struct LinkResponse: Codable { var user: UserView; var tokens: TokenPair }

    static func identityTaken(_ provider: String) -> AppError {
        AppError(AuthErrorCode.identityAlreadyLinked, "This \(provider) identity already belongs to another account")
    }

    func link(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        let body = try await request.decodeJSON(as: AuthRequest.self, context: context)
        let now = ctx.clock.now()
        // Provider checks (network, bcrypt) happen before the transaction.
        enum Linking: Sendable { case google(ProviderIdentity), apple(ProviderIdentity, ByteBuffer?), email(String, String) }
        let linking: Linking
        switch body.provider {
        case .google:
            linking = .google(try await sessions.verifyGoogle(body.credentials, appID: appID, now: now, request, context))
        case .email:
            let raw = try body.credentials.require(body.credentials.email, "email")
            let password = try body.credentials.require(body.credentials.password, "password")
            guard let email = EmailAddress.normalize(raw) else { throw AppError.validation("credentials.email", "Invalid email format") }
            try ctx.passwords.require(password, userInputs: [email], field: "credentials.password")
            linking = .email(email, try await ctx.hashPassword(password))
        case .apple:
            let (identity, sealed) = try await sessions.verifyApple(body.credentials, appID: appID, now: now, request, context)
            linking = .apple(identity, sealed)
        case .guest:
            throw AppError.validation("provider", "A guest identity cannot be linked")
        }
        let verifyToken = OpaqueToken.generate()
        do {
            let (user, tokens, verifyTo) = try await ctx.db.withTransaction(logger: ctx.logger) { conn -> (User, TokenPair, String?) in
                guard let user = try await ctx.users.find(.id(userID), appID: appID, on: conn, forUpdate: true) else {
                    throw AppError(.unauthorized, "invalid_token", "This account no longer exists")
                }
                try sessions.requireActive(user, now: now)
                var verifyTo: String?
                switch linking {
                case .google(let identity):
                    if user.googleID == identity.subject { break }
                    if user.googleID != nil { throw AppError(AuthErrorCode.providerAlreadyLinked, "A Google account is already linked") }
                    if try await ctx.users.find(.google(identity.subject), appID: appID, on: conn) != nil { throw Self.identityTaken("Google") }
                    // Adopt Google's verified email when the account has none and nobody else uses it.
                    var adoptEmail: String? = nil
                    if user.email == nil, let email = identity.email, try await ctx.users.find(.email(email), appID: appID, on: conn) == nil {
                        adoptEmail = email
                    }
                    try await ctx.users.attach(
                        .google, .init(identity), adoptEmail: adoptEmail, sealedRefreshToken: nil,
                        to: userID, now: now, on: conn)
                case .apple(let identity, let sealed):
                    if user.appleID == identity.subject { break }
                    if user.appleID != nil { throw AppError(AuthErrorCode.providerAlreadyLinked, "An Apple ID is already linked") }
                    if try await ctx.users.find(.apple(identity.subject), appID: appID, on: conn) != nil { throw Self.identityTaken("Apple") }
                    var adoptEmail: String? = nil
                    if user.email == nil, let email = identity.email, try await ctx.users.find(.email(email), appID: appID, on: conn) == nil {
                        adoptEmail = email
                    }
                    try await ctx.users.attach(
                        .apple, .init(identity), adoptEmail: adoptEmail, sealedRefreshToken: sealed,
                        to: userID, now: now, on: conn)
                case .email(let email, let hash):
                    if user.passwordHash != nil { throw AppError(AuthErrorCode.providerAlreadyLinked, "A password is already set on this account") }
                    if let current = user.email, current != email {
                        throw AppError.validation("credentials.email", "The account's email is \(EmailAddress.mask(current)); link with that address")
                    }
                    if user.email == nil, try await ctx.users.find(.email(email), appID: appID, on: conn) != nil { throw Self.identityTaken("email") }
                    try await ctx.users.attachPassword(email: email, hash: hash, to: userID, now: now, on: conn)
                    if !user.emailVerified {
                        try await ctx.emailTokens.insert(
                            token: verifyToken, userID: userID, purpose: .verifyEmail,
                            expiresAt: now.addingTimeInterval(TokenLifetimes.emailVerification), on: conn)
                        verifyTo = email
                    }
                }
                // A guest who links becomes a full account: same id, nothing lost.
                if user.isGuest {
                    try await ctx.users.upgradeGuest(userID, provider: body.provider, now: now, on: conn)
                }
                guard let updated = try await ctx.users.find(.id(userID), appID: appID, on: conn) else { throw AppError.unavailable }
                let tokens = try await ctx.issuer.startSession(for: updated, device: body.deviceInfo, now: now, on: conn)
                try await ctx.audit.record(
                    ctx.entry(
                        "link", "success", app: appID, user: userID, request, context,
                        details: ["provider": .string(body.provider.rawValue), "was_guest": .bool(user.isGuest)]), on: conn)
                return (updated, tokens, verifyTo)
            }
            if let email = verifyTo {
                await sessions.sendVerification(to: email, token: verifyToken, app: appID, locale: EmailLocale.preferred(request.headers[.acceptLanguage]))
            }
            return try context.json(LinkResponse(user: user.view(linked: user.signInMethods), tokens: tokens))
        } catch  where DatabaseErrors.isUniqueViolation(error) {
            throw Self.identityTaken(body.provider.rawValue)
        }
    }

    func unlink(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        guard let provider = context.parameters.get("provider").flatMap(AuthProvider.init(rawValue:)), provider != .guest else {
            throw AppError.badRequest("provider must be one of google, apple, email", field: "provider")
        }
        let now = ctx.clock.now()
        let (user, appleToken): (User, ByteBuffer?) = try await ctx.db.withTransaction(logger: ctx.logger) { conn in
            guard let user = try await ctx.users.find(.id(userID), appID: appID, on: conn, forUpdate: true) else {
                throw AppError(.unauthorized, "invalid_token", "This account no longer exists")
            }
            guard user.signInMethods.contains(provider.rawValue) else {
                throw AppError(AuthErrorCode.providerNotLinked, "No \(provider.rawValue) sign-in on this account")
            }
            guard user.signInMethods.count > 1 else {
                throw AppError(AuthErrorCode.lastSignInMethod, "This is the only way to sign in to this account; link another one first")
            }
            let appleToken = try await ctx.users.detach(provider, from: userID, now: now, on: conn)
            try await ctx.audit.record(
                ctx.entry(
                    "unlink", "success", app: appID, user: userID, request, context,
                    details: ["provider": .string(provider.rawValue)]), on: conn)
            return (try await ctx.users.find(.id(userID), appID: appID, on: conn) ?? user, appleToken)
        }
        // Unlinking Apple ends the app's grant at Apple too (best effort: the link is gone here either way).
        if provider == .apple, let sealed = appleToken, let config = try await ctx.appleConfigs.value(for: appID) {
            do { try await ctx.apple.revoke(refreshToken: try ctx.box.open(sealed), config: config, now: now) } catch {
                ctx.logger.warning("Apple token revocation failed on unlink", metadata: ["error": "\(error)"])
            }
        }
        return try context.json(["user": user.view(linked: user.signInMethods)])
    }
}

extension UserStore.LinkedIdentity {
    init(_ identity: ProviderIdentity) {
        self.init(subject: identity.subject, email: identity.email, name: identity.name, isPrivateEmail: identity.isPrivateEmail)
    }
}

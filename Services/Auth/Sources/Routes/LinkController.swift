import AuthDomain
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

    struct LinkResponse: Codable {
        var user: UserView
        var tokens: TokenPair
    }

    var linkingFlow: IdentityLinking { IdentityLinking(ctx: ctx) }

    func link(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        let body = try await request.decodeJSON(as: AuthRequest.self, context: context)
        let now = ctx.clock.now()
        // Provider checks (network, bcrypt) happen before the transaction.
        let linking: IdentityLinking.Linking
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
            let (user, tokens, verifyTo) = try await linkingFlow.link(
                linking,
                provider: body.provider,
                appID: appID,
                userID: userID,
                device: body.deviceInfo,
                verifyToken: verifyToken,
                now: now
            ) { wasGuest in
                ctx.entry(
                    "link",
                    "success",
                    app: appID,
                    user: userID,
                    request,
                    context,
                    details: ["provider": .string(body.provider.rawValue), "was_guest": .bool(wasGuest)]
                )
            }
            if let email = verifyTo {
                await sessions.sendVerification(
                    to: email,
                    token: verifyToken,
                    app: appID,
                    locale: EmailLocale.preferred(request.headers[.acceptLanguage])
                )
            }
            return try context.json(LinkResponse(user: user.view(linked: user.signInMethods), tokens: tokens))
        } catch  where DatabaseErrors.isUniqueViolation(error) {
            throw IdentityLinking.identityTaken(body.provider.rawValue)
        }
    }

    func unlink(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        guard let provider = context.parameters.get("provider").flatMap(AuthProvider.init(rawValue:)), provider != .guest else {
            throw AppError.badRequest("provider must be one of google, apple, email", field: "provider")
        }
        let now = ctx.clock.now()
        let user = try await linkingFlow.unlink(provider, appID: appID, userID: userID, now: now) {
            ctx.entry("unlink", "success", app: appID, user: userID, request, context, details: ["provider": .string(provider.rawValue)])
        }
        return try context.json(["user": user.view(linked: user.signInMethods)])
    }
}

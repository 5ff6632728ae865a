import AuthDomain
import Foundation
import Hummingbird
import PostgresNIO
import ServiceKit
import WireTypes

/// Email verification, password reset and email one-time codes.
struct EmailFlowsController {
    let ctx: AuthContext
    let otps: OTPStore
    var proofs: EmailProofs { EmailProofs(ctx: ctx, otps: otps) }
    let sessions: AuthController

    func addRoutes(tenant: RouterGroup<ServiceRequestContext>, user: RouterGroup<ServiceRequestContext>) {
        tenant.post("auth/verify-email") { request, context in try await verifyEmail(request, context) }
        user.post("auth/verify-email/resend") { request, context in try await resend(request, context) }
        tenant.post("auth/password/forgot") { request, context in try await forgot(request, context) }
        tenant.post("auth/password/reset") { request, context in try await reset(request, context) }
        tenant.post("auth/otp/send") { request, context in try await sendOTP(request, context) }
        tenant.post("auth/otp/verify") { request, context in try await verifyOTP(request, context) }
    }

    struct TokenBody: Codable { var token: String }
    struct EmailBody: Codable { var email: String }
    struct ResetBody: Codable {
        var token: String
        var newPassword: String
        enum CodingKeys: String, CodingKey {
            case token
            case newPassword = "new_password"
        }
    }
    struct OTPVerifyBody: Codable {
        var email: String
        var code: String
        var deviceInfo: DeviceInfo?
        enum CodingKeys: String, CodingKey {
            case email, code
            case deviceInfo = "device_info"
        }
    }

    // MARK: email verification (3b.8)

    func verifyEmail(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let appID = try context.requireApp()
        let body = try await request.decodeJSON(as: TokenBody.self, context: context)
        let now = ctx.clock.now()
        try await proofs.verifyEmail(token: body.token, appID: appID, now: now, origin: ctx.origin(request, context))
        return try context.json(["email_verified": true])
    }

    func resend(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let (appID, userID) = try context.requireUser()
        try await ctx.limiter.enforce(scope: "verify-resend", key: userID.uuidString, limit: 3, window: 3600)
        let now = ctx.clock.now()
        let token = OpaqueToken.generate()
        let email = try await proofs.newVerificationLink(token: token, appID: appID, userID: userID, now: now)
        await sessions.sendVerification(to: email, token: token, app: appID, locale: EmailLocale.preferred(request.headers[.acceptLanguage]))
        return try context.json(["sent": true])
    }

    // MARK: password reset

    /// Answers the same whether the address has an account or not; the email leaves in the
    /// background so the response time does not tell either.
    func forgot(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let appID = try context.requireApp()
        try await ctx.enforceSignInLimit(context, scope: "reset")
        let body = try await request.decodeJSON(as: EmailBody.self, context: context)
        let now = ctx.clock.now()
        if let email = EmailAddress.normalize(body.email) {
            let token = OpaqueToken.generate()
            let sent = try await proofs.resetLink(token: token, email: email, appID: appID, now: now, origin: ctx.origin(request, context))
            if sent {
                let mailer = ctx.mailer
                let message = try await ctx.emails.message(
                    .passwordReset,
                    app: appID,
                    to: email,
                    locale: EmailLocale.preferred(request.headers[.acceptLanguage]),
                    path: "/reset-password?token=\(token)"
                )
                let logger = ctx.logger
                Task {
                    do { try await mailer.send(message) } catch { logger.error("reset email not sent", metadata: ["error": "\(error)"]) }
                }
            }
        }
        return try context.json(["message": "If an account exists for this address, a reset link has been sent"])
    }

    func reset(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let appID = try context.requireApp()
        try await ctx.enforceSignInLimit(context, scope: "reset")
        let body = try await request.decodeJSON(as: ResetBody.self, context: context)
        let now = ctx.clock.now()
        // Validate before using the token, so a weak password does not burn the link.
        try ctx.passwords.require(body.newPassword, userInputs: [], field: "new_password")
        let hash = try await ctx.hashPassword(body.newPassword)
        let (revoked, fact) = try await proofs.resetPassword(
            token: body.token,
            hash: hash,
            appID: appID,
            now: now,
            origin: ctx.origin(request, context)
        )
        ctx.sessions.apply([fact])
        return try context.json(["password_reset": .bool(true), "revoked_sessions": JSONValue.int(revoked)])
    }

    // MARK: OTP (seed 004)

    func sendOTP(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let appID = try context.requireApp()
        try await ctx.enforceSignInLimit(context, scope: "otp")
        let body = try await request.decodeJSON(as: EmailBody.self, context: context)
        guard let email = EmailAddress.normalize(body.email) else { throw AppError.validation("email", "Invalid email format") }
        // At most one code per minute per address.
        let perAddress = try await ctx.limiter.hit(scope: "otp-send", key: "\(appID):\(email)", limit: 1, window: 60)
        if !perAddress.allowed { throw AppError.rateLimited(retryAfter: perAddress.retryAfter) }
        let code = OTPStore.generateCode()
        let now = ctx.clock.now()
        try await proofs.issueCode(code, email: email, appID: appID, now: now, origin: ctx.origin(request, context))
        try await ctx.mailer.send(
            try await ctx.emails.message(
                .otp,
                app: appID,
                to: email,
                locale: EmailLocale.preferred(request.headers[.acceptLanguage]),
                values: ["code": code]
            )
        )
        return try context.json(["sent": JSONValue.bool(true), "expires_in": .int(Int(OTPStore.lifetime))])
    }

    func verifyOTP(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let appID = try context.requireApp()
        try await ctx.enforceSignInLimit(context, scope: "otp")
        let body = try await request.decodeJSON(as: OTPVerifyBody.self, context: context)
        guard let email = EmailAddress.normalize(body.email) else { throw AppError.validation("email", "Invalid email format") }
        guard body.code.count == 6, body.code.allSatisfy(\.isASCII), body.code.allSatisfy(\.isNumber) else {
            throw AppError.validation("code", "The code has 6 digits")
        }
        let now = ctx.clock.now()
        let outcome = try await proofs.verifyCode(
            body.code,
            email: email,
            appID: appID,
            device: body.deviceInfo,
            now: now,
            origin: ctx.origin(request, context)
        )
        switch outcome {
        case .refused(let e):
            await ctx.audit.record(
                ctx.entry(
                    "otp_verify",
                    "failure",
                    app: appID,
                    user: nil,
                    request,
                    context,
                    details: ["reason": .string(e.code)]
                ),
                db: ctx.db
            )
            throw e
        case .signedIn(let user, let tokens, let created):
            return try context.json(AuthResponse(user: user.view(), tokens: tokens), status: created ? .created : .ok)
        }
    }
}

import AuthDomain
import Foundation
import HTTPTypes
import Hummingbird
import ServiceKit
import WireTypes

/// #47 the console's sign-in (`/auth/v1/console/…`, with `X-App-ID`, no app key: a person signs
/// in, not an app) and its team (`/auth/v1/admin/members`, `…/invites`: owners change it).
struct ConsoleController: Sendable {
    let access: ConsoleAccess
    /// `Secure` on the refresh cookie everywhere but the plain-http local stack.
    let secureCookie: Bool
    /// The console's per-address budget (`CONSOLE_SIGNIN_LIMIT_PER_15_MINUTES`), spent by
    /// sign-ins and invite acceptances: each costs a bcrypt, and a guesser moving from one
    /// member's address to the next is slowed, where each member's lockout only guards one.
    let signInLimit: @Sendable (ServiceRequestContext) async throws -> Void

    struct SignInBody: Decodable {
        var email: String
        var password: String
        var totpCode: String?
        enum CodingKeys: String, CodingKey {
            case email, password
            case totpCode = "totp_code"
        }
    }
    struct TokenBody: Decodable { var token: String }
    struct AcceptBody: Decodable {
        var token: String
        var password: String
        var totpSecret: String?
        var totpCode: String?
        enum CodingKeys: String, CodingKey {
            case token, password
            case totpSecret = "totp_secret"
            case totpCode = "totp_code"
        }
    }
    struct InviteBody: Decodable {
        var email: String
        var role: OperatorRole
    }
    struct ForgotBody: Decodable { var email: String }
    struct TOTPBody: Decodable {
        var totpSecret: String
        var totpCode: String
        enum CodingKeys: String, CodingKey {
            case totpSecret = "totp_secret"
            case totpCode = "totp_code"
        }
    }
    struct ResetBody: Decodable {
        var token: String
        var password: String
    }
    struct RoleBody: Decodable { var role: OperatorRole }
    struct SettingsBody: Decodable {
        var requiresTOTP: Bool
        enum CodingKeys: String, CodingKey { case requiresTOTP = "requires_totp" }
    }

    struct MemberView: Encodable {
        var id: UUID
        var email: String
        var role: OperatorRole
        var totp: Bool
        var createdAt: Date
        enum CodingKeys: String, CodingKey {
            case id, email, role, totp
            case createdAt = "created_at"
        }
        init(_ m: OperatorMemberStore.Member) {
            id = m.id
            email = m.email
            role = m.role
            totp = m.totpSecret != nil
            createdAt = m.createdAt
        }
    }
    struct InviteView: Encodable {
        var email: String
        var role: OperatorRole
        var expiresAt: Date
        enum CodingKeys: String, CodingKey {
            case email, role
            case expiresAt = "expires_at"
        }
    }
    struct SessionView: Encodable {
        var accessToken: String
        var tokenType = "Bearer"
        var expiresIn = Int(ConsoleRules.accessLifetime)
        var member: MemberView
        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token"
            case tokenType = "token_type"
            case expiresIn = "expires_in"
            case member
        }
    }
    struct TeamView: Encodable {
        var members: [MemberView]
        var invites: [InviteView]
        var requiresTOTP: Bool
        enum CodingKeys: String, CodingKey {
            case members, invites
            case requiresTOTP = "requires_totp"
        }
    }

    func addRoutes(open: RouterGroup<ServiceRequestContext>, admin: RouterGroup<ServiceRequestContext>) {
        open.post("console/sign-in") { request, context in
            let app = try Self.app(request)
            try await signInLimit(context)
            let body = try await request.decodeJSON(as: SignInBody.self, context: context)
            let signedIn = try await access.signIn(
                app: app,
                email: body.email,
                password: body.password,
                totpCode: body.totpCode,
                ip: context.clientAddress
            )
            return try session(signedIn, context)
        }
        open.post("console/refresh") { request, context in
            let (app, refresh) = try Self.cookie(request)
            return try session(try await access.refresh(app: app, refreshToken: refresh), context)
        }
        open.post("console/logout") { request, _ in
            if let bearer = request.headers.bearerCredential, ConsoleRules.refreshToken(fromCookieHeader: request.headers[.cookie]) == nil {
                let app = try Self.app(request)
                try Self.requireConsoleHeader(request)
                try await access.logout(app: app, accessToken: bearer)
            } else {
                let (app, refresh) = try Self.cookie(request)
                try await access.logout(app: app, refreshToken: refresh)
            }
            var headers = HTTPFields()
            headers[.setCookie] = ConsoleRules.cookie("", secure: secureCookie, maxAge: 0)
            return Response(status: .noContent, headers: headers)
        }
        // The member's own account, with their console access token (any role).
        open.post("console/me/totp/new") { request, context in
            let app = try Self.app(request)
            return try context.json(try await access.newTOTPSecret(app: app, token: try Self.bearer(request)))
        }
        open.put("console/me/totp") { request, context in
            let app = try Self.app(request)
            let token = try Self.bearer(request)
            let body = try await request.decodeJSON(as: TOTPBody.self, context: context)
            try await access.enrolTOTP(app: app, token: token, secret: body.totpSecret, code: body.totpCode)
            return try context.json(["totp": true])
        }
        open.post("console/password/forgot") { request, context in
            let app = try Self.app(request)
            try await signInLimit(context)
            let body = try await request.decodeJSON(as: ForgotBody.self, context: context)
            try await access.forgotPassword(app: app, email: body.email)
            return try context.json(["sent_if_member": true], status: .accepted)
        }
        open.post("console/password/reset") { request, context in
            try await signInLimit(context)
            let body = try await request.decodeJSON(as: ResetBody.self, context: context)
            try await access.resetPassword(token: body.token, password: body.password)
            return Response(status: .noContent)
        }
        open.post("console/invites/preview") { request, context in
            let body = try await request.decodeJSON(as: TokenBody.self, context: context)
            return try context.json(try await access.showInvite(token: body.token))
        }
        open.post("console/invites/accept") { request, context in
            try await signInLimit(context)
            let body = try await request.decodeJSON(as: AcceptBody.self, context: context)
            let member = try await access.accept(token: body.token, password: body.password, totpSecret: body.totpSecret, totpCode: body.totpCode)
            return try context.json(MemberView(member), status: .created)
        }

        admin.get("admin/members") { _, context in
            let team = try await access.team(app: try context.requireApp())
            return try context.json(
                TeamView(
                    members: team.members.map(MemberView.init),
                    invites: team.invites.map { InviteView(email: $0.email, role: $0.role, expiresAt: $0.expiresAt) },
                    requiresTOTP: team.requiresTOTP
                )
            )
        }
        admin.post("admin/invites") { request, context in
            let app = try context.requireApp()
            let body = try await request.decodeJSON(as: InviteBody.self, context: context)
            let sent = try await access.invite(app: app, email: body.email, role: body.role, by: try context.requireOperator())
            return try context.json(InviteView(email: sent.email, role: body.role, expiresAt: sent.expiresAt), status: .created)
        }
        admin.patch("admin/members/:id") { request, context in
            let app = try context.requireApp()
            let member = try Self.memberID(context)
            let body = try await request.decodeJSON(as: RoleBody.self, context: context)
            return try context.json(
                MemberView(try await access.setRole(app: app, member: member, role: body.role, by: try context.requireOperator()))
            )
        }
        admin.delete("admin/members/:id") { _, context in
            let app = try context.requireApp()
            try await access.remove(app: app, member: try Self.memberID(context), by: try context.requireOperator())
            return Response(status: .noContent)
        }
        admin.put("admin/console-settings") { request, context in
            let app = try context.requireApp()
            let body = try await request.decodeJSON(as: SettingsBody.self, context: context)
            try await access.requireTOTP(app: app, body.requiresTOTP, by: try context.requireOperator())
            return try context.json(["requires_totp": body.requiresTOTP])
        }
    }

    private func session(_ s: ConsoleAccess.SignedIn, _ context: ServiceRequestContext) throws -> Response {
        var response = try context.json(SessionView(accessToken: s.accessToken, member: MemberView(s.member)))
        response.headers[.setCookie] = ConsoleRules.cookie(s.refreshToken, secure: secureCookie)
        response.headers[.cacheControl] = "no-store"
        return response
    }

    static func memberID(_ context: ServiceRequestContext) throws -> UUID {
        guard let id = context.parameters.get("id", as: UUID.self) else { throw AppError.badRequest("Member id must be a UUID", field: "id") }
        return id
    }

    static func app(_ request: Request) throws -> UUID {
        guard let raw = request.headers.value(.xAppID), let app = UUID(hexString: raw) else {
            throw AppError(.unauthorized, "missing_api_key", "X-App-ID names the app whose console this is")
        }
        return app
    }

    static func bearer(_ request: Request) throws -> String {
        guard let token = request.headers.bearerCredential else {
            throw AppError.invalidToken("Authorization: Bearer <console access token> is required")
        }
        return token
    }

    static func requireConsoleHeader(_ request: Request) throws {
        guard request.headers[HTTPField.Name(ConsoleRules.requestHeader)!] == "1" else {
            throw AppError(AuthErrorCode.consoleHeaderRequired, "Send \(ConsoleRules.requestHeader): 1 with the console's refresh and logout")
        }
    }

    /// The refresh and logout: the app, the cookie, and the header a cross-site form cannot send.
    static func cookie(_ request: Request) throws -> (UUID, String) {
        let app = try app(request)
        try requireConsoleHeader(request)
        guard let token = ConsoleRules.refreshToken(fromCookieHeader: request.headers[.cookie]) else {
            throw AppError.invalidToken("No console session: sign in")
        }
        return (app, token)
    }
}

/// Auth's own check of an operator credential, for its admin routes and for the other
/// services (`/internal/operators/verify`): an operator key, or a console member's token.
struct AuthOperators: OperatorVerifier {
    let keys: OperatorKeyStore
    let console: ConsoleAccess

    func verify(appID: UUID, key: String) async throws -> Operator? {
        if OperatorKeys.looksLikeKey(key) { return try await keys.verify(appID: appID, key: key) }
        if OperatorKeys.looksLikeMemberToken(key) { return try await console.verify(app: appID, token: key) }
        return nil
    }
}

import AuthDomain
import Foundation
import Logging
import NIOCore
import ServiceKit
import WireTypes

/// The console's team and its sign-in (#47): invites by mail, acceptance with a password and a
/// second factor, sign-in with the players' lockout, short access tokens and a rotating refresh
/// cookie, roles, removal. Each use case owns its transaction.
struct ConsoleAccess: Sendable {
    let db: DatabasePool
    let logger: Logger
    let clock: any WallClock
    let store: OperatorMemberStore
    let audit: AuditLog
    let signer: AccessTokenSigner
    let tokens: AccessTokenVerifier
    let box: SecretBox
    let mailer: any Mailer
    let mailFrom: String
    /// Where the console is served (`CONSOLE_BASE_URL`): the invite link points there.
    let consoleURL: String
    let passwords: PasswordPolicy
    let hashPassword: @Sendable (String) async throws -> String
    let checkPassword: @Sendable (String, String) async throws -> Bool

    struct SignedIn: Sendable {
        var accessToken: String
        var refreshToken: String
        var member: OperatorMemberStore.Member
    }

    /// A bcrypt-12 hash of nothing anyone knows: an unknown address costs a check as a known one.
    static let dummyHash = "$2b$12$WVkmn5wMf9aG0kv7SYhAR.9DSXQ1PgwFiQZHGqkA9SDYhNFrvnd/K"
    static let invalidCredentials = AppError(AuthErrorCode.invalidCredentials, "Email or password is incorrect")
    static let invalidInvite = AppError(AuthErrorCode.invalidOrExpiredToken, "This invite is unknown, used or expired; ask for a new one")

    // MARK: invites

    /// A single-use link mailed to `email`, valid 72 h. Returns the address as stored and when
    /// the link expires.
    func invite(app: UUID, email raw: String, role: OperatorRole, by who: Operator) async throws -> (email: String, expiresAt: Date) {
        guard let email = EmailAddress.normalize(raw) else { throw AppError.validation("email", "Not an email address") }
        let token = OpaqueToken.generate()
        let expires = clock.now().addingTimeInterval(ConsoleRules.inviteLifetime)
        let appName: String = try await db.withTransaction(logger: logger) { conn in
            guard let name = try await store.appName(app, on: conn) else { throw AppError.notFound("Application") }
            if try await store.member(app: app, email: email, on: conn) != nil {
                throw AppError(AuthErrorCode.memberExists, "\(email) is already a member of this app's team")
            }
            try await store.createInvite(
                digest: OpaqueToken.hash(token),
                app: app,
                email: email,
                role: role,
                invitedBy: who.auditName,
                expiresAt: expires,
                on: conn
            )
            try await audit.record(
                AuditLog.Entry(
                    userID: nil,
                    appID: app,
                    action: "operator.member.invite",
                    result: "success",
                    details: ["email": .string(email), "role": .string(role.rawValue), "operator": .string(who.auditName)]
                ),
                on: conn
            )
            return name
        }
        let link = "\(consoleURL)/console/#/invite/\(token)"
        do {
            try await mailer.send(
                SMTPMessage(
                    from: mailFrom,
                    to: [email],
                    subject: "You are invited to the \(appName) console",
                    text: """
                        \(who.displayName) invited you to \(appName)'s console as \(role.rawValue).

                        Accept within 72 hours (the link works once):
                        \(link)
                        """
                )
            )
        } catch {
            throw AppError(AuthErrorCode.mailUnavailable, "The invite was created but its mail could not be sent; invite again")
        }
        return (email, expires)
    }

    /// What an invite is for, as the invitee's page shows it (its answer's shape).
    struct InviteView: Sendable, Encodable {
        /// The console signs in to this app once the invite is accepted.
        var appID: UUID
        var appName: String
        var email: String
        var role: OperatorRole
        var expiresAt: Date
        var totpRequired: Bool
        /// A second factor to enrol with, if the member wants one (required when the app does).
        var totpSecret: String
        var totpURI: String
        enum CodingKeys: String, CodingKey {
            case email, role
            case appID = "app_id"
            case appName = "app_name"
            case expiresAt = "expires_at"
            case totpRequired = "totp_required"
            case totpSecret = "totp_secret"
            case totpURI = "totp_uri"
        }
    }

    func showInvite(token: String) async throws -> InviteView {
        let now = clock.now()
        return try await db.withConnection { conn in
            guard token.utf8.count <= 128, let invite = try await store.invite(digest: OpaqueToken.hash(token), now: now, on: conn),
                let name = try await store.appName(invite.appID, on: conn)
            else { throw Self.invalidInvite }
            let secret = TOTP.newSecret()
            return InviteView(
                appID: invite.appID,
                appName: name,
                email: invite.email,
                role: invite.role,
                expiresAt: invite.expiresAt,
                totpRequired: try await store.requiresTOTP(app: invite.appID, on: conn) ?? false,
                totpSecret: TOTP.base32(secret),
                totpURI: TOTP.provisioningURI(secret: secret, account: invite.email, issuer: "\(name) console")
            )
        }
    }

    /// The invite spent and the member created with their password (and second factor, proven
    /// by a code of it). A second accept of the same link finds nothing.
    func accept(token: String, password: String, totpSecret: String?, totpCode: String?) async throws -> OperatorMemberStore.Member {
        let now = clock.now()
        let digest = OpaqueToken.hash(token)
        let preview = try await db.withConnection { conn in try await store.invite(digest: digest, now: now, on: conn) }
        guard token.utf8.count <= 128, let preview else { throw Self.invalidInvite }
        try passwords.require(password, userInputs: [preview.email], field: "password")
        var sealed: ByteBuffer?
        var step: Int64?
        if let totpSecret {
            guard let secret = TOTP.base32Decode(totpSecret), secret.count >= 16 else {
                throw AppError.validation("totp_secret", "totp_secret must be the base32 secret the invite showed")
            }
            guard let code = totpCode, let spent = TOTP.accept(code, secret: secret, at: now, lastUsed: nil) else {
                throw AppError(AuthErrorCode.invalidTotp, "The authenticator code does not match this secret; scan it and try the current code")
            }
            sealed = try box.seal(secret.base64EncodedString())
            step = spent
        }
        let hash = try await hashPassword(password)
        return try await db.withTransaction(logger: logger) { conn in
            guard let invite = try await store.consumeInvite(digest: digest, now: now, on: conn) else { throw Self.invalidInvite }
            if sealed == nil, try await store.requiresTOTP(app: invite.appID, on: conn) == true {
                throw AppError(AuthErrorCode.totpRequired, "This app's console requires an authenticator: send totp_secret and totp_code")
            }
            guard
                let member = try await store.add(
                    app: invite.appID,
                    email: invite.email,
                    passwordHash: hash,
                    role: invite.role,
                    totpSecret: sealed,
                    totpStep: step,
                    on: conn
                )
            else { throw AppError(AuthErrorCode.memberExists, "\(invite.email) is already a member of this app's team") }
            try await audit.record(
                AuditLog.Entry(
                    userID: nil,
                    appID: invite.appID,
                    action: "operator.member.join",
                    result: "success",
                    details: ["member_id": .string(member.id.lowercasedString), "role": .string(member.role.rawValue)]
                ),
                on: conn
            )
            return member
        }
    }

    // MARK: sign-in

    func signIn(app: UUID, email raw: String, password: String, totpCode: String?, ip: String?) async throws -> SignedIn {
        let now = clock.now()
        guard let email = EmailAddress.normalize(raw), password.utf8.count <= PasswordPolicy.maximumBytes else { throw Self.invalidCredentials }
        let found = try await db.withConnection { conn in try await store.member(app: app, email: email, on: conn) }
        guard let member = found else {
            // As long as a wrong password: whether an address is on the team is not told.
            _ = try? await checkPassword(password, Self.dummyHash)
            throw Self.invalidCredentials
        }
        if let until = member.lockedUntil, until > now { throw Self.locked(until: until, now: now) }
        let passwordOK = try await checkPassword(password, member.passwordHash)
        var step: Int64?
        var refusal: AppError?
        if !passwordOK {
            refusal = Self.invalidCredentials
        } else if let sealed = member.totpSecret {
            guard let code = totpCode, !code.isEmpty else {
                throw AppError(AuthErrorCode.totpRequired, "Enter the code your authenticator shows")
            }
            let secret = Data(base64Encoded: try box.open(sealed)) ?? Data()
            step = TOTP.accept(code, secret: secret, at: now, lastUsed: member.totpLastStep)
            if step == nil { refusal = AppError(AuthErrorCode.invalidTotp, "The authenticator code is wrong or was already used") }
        }
        let refresh = OpaqueToken.generate()
        // A refusal is answered after its failure is committed (thrown inside, it would be rolled back).
        let outcome: Result<SignedIn, AppError> = try await db.withTransaction(logger: logger) { conn in
            if let refusal {
                let (attempts, lockedUntil) = try await store.recordFailure(member.id, now: now, on: conn)
                try await audit.record(
                    AuditLog.Entry(
                        userID: nil,
                        appID: app,
                        action: "operator.sign_in",
                        result: "failure",
                        ip: ip,
                        details: ["member_id": .string(member.id.lowercasedString), "attempts": .int(attempts)]
                    ),
                    on: conn
                )
                return .failure(lockedUntil.map { Self.locked(until: $0, now: now) } ?? refusal)
            }
            if member.totpSecret == nil, try await store.requiresTOTP(app: app, on: conn) == true {
                throw AppError(AuthErrorCode.totpNotEnrolled, "This app's console requires an authenticator and yours is not set up; ask an owner")
            }
            try await store.recordSuccess(member.id, totpStep: step, on: conn)
            let session = try await store.startSession(
                member: member.id,
                app: app,
                refreshDigest: OpaqueToken.hash(refresh),
                expiresAt: now.addingTimeInterval(ConsoleRules.sessionLifetime),
                on: conn
            )
            try await audit.record(
                AuditLog.Entry(
                    userID: nil,
                    appID: app,
                    action: "operator.sign_in",
                    result: "success",
                    ip: ip,
                    details: ["member_id": .string(member.id.lowercasedString), "session_id": .string(session.lowercasedString)]
                ),
                on: conn
            )
            return .success(SignedIn(accessToken: try accessToken(member, session: session, now: now), refreshToken: refresh, member: member))
        }
        return try outcome.get()
    }

    // MARK: an authenticator after joining

    struct NewSecret: Sendable, Encodable {
        var totpSecret: String
        var totpURI: String
        enum CodingKeys: String, CodingKey {
            case totpSecret = "totp_secret"
            case totpURI = "totp_uri"
        }
    }

    /// The signed-in member behind a console access token, or 401.
    private func member(app: UUID, token: String) async throws -> (id: UUID, email: String) {
        guard case .member(let id, let email, _)? = try await verify(app: app, token: token) else {
            throw AppError.invalidToken("No console session: sign in")
        }
        return (id, email)
    }

    /// A fresh secret for the member's authenticator, not stored: the member proves it with a code.
    func newTOTPSecret(app: UUID, token: String) async throws -> NewSecret {
        let me = try await member(app: app, token: token)
        let name = try await db.withConnection { conn in try await store.appName(app, on: conn) } ?? "App"
        let secret = TOTP.newSecret()
        return NewSecret(totpSecret: TOTP.base32(secret), totpURI: TOTP.provisioningURI(secret: secret, account: me.email, issuer: "\(name) console"))
    }

    /// A member who joined without an authenticator adds one, proven by a current code; an
    /// owner can then require one of everybody. One that already has one is 409.
    func enrolTOTP(app: UUID, token: String, secret text: String, code: String) async throws {
        let me = try await member(app: app, token: token)
        guard let secret = TOTP.base32Decode(text), secret.count >= 16 else {
            throw AppError.validation("totp_secret", "totp_secret must be the base32 secret the console showed")
        }
        let now = clock.now()
        guard let step = TOTP.accept(code, secret: secret, at: now, lastUsed: nil) else {
            throw AppError(AuthErrorCode.invalidTotp, "The authenticator code does not match this secret; scan it and try the current code")
        }
        let sealed = try box.seal(secret.base64EncodedString())
        try await db.withTransaction(logger: logger) { conn in
            guard try await store.enrolTOTP(member: me.id, app: app, sealed: sealed, step: step, on: conn) else {
                throw AppError(AuthErrorCode.totpAlreadyEnrolled, "Your account already has an authenticator")
            }
            try await audit.record(
                AuditLog.Entry(
                    userID: nil,
                    appID: app,
                    action: "operator.totp_enrolled",
                    result: "success",
                    details: ["member_id": .string(me.id.lowercasedString)]
                ),
                on: conn
            )
        }
    }

    // MARK: a forgotten password

    /// A single-use link mailed to the member, valid `ConsoleRules.resetLifetime`. The answer is
    /// the same whether the address is on the team or not (who is on it is not told).
    func forgotPassword(app: UUID, email raw: String) async throws {
        guard let email = EmailAddress.normalize(raw) else { throw AppError.validation("email", "Not an email address") }
        let token = OpaqueToken.generate()
        let expires = clock.now().addingTimeInterval(ConsoleRules.resetLifetime)
        let found: (OperatorMemberStore.Member, String)? = try await db.withTransaction(logger: logger) { conn in
            guard let member = try await store.member(app: app, email: email, on: conn), let name = try await store.appName(app, on: conn) else {
                return nil
            }
            try await store.createReset(digest: OpaqueToken.hash(token), member: member.id, app: app, expiresAt: expires, on: conn)
            try await audit.record(
                AuditLog.Entry(
                    userID: nil,
                    appID: app,
                    action: "operator.password_reset_requested",
                    result: "success",
                    details: ["member_id": .string(member.id.lowercasedString)]
                ),
                on: conn
            )
            return (member, name)
        }
        guard let (member, appName) = found else { return }
        do {
            try await mailer.send(
                SMTPMessage(
                    from: mailFrom,
                    to: [member.email],
                    subject: "Reset your \(appName) console password",
                    text: """
                        Someone (hopefully you) asked to reset your password for \(appName)'s console.

                        Choose a new one within an hour (the link works once):
                        \(consoleURL)/console/#/reset/\(token)

                        If it was not you, ignore this mail: your password stays as it is.
                        """
                )
            )
        } catch {
            logger.error("console password reset mail not sent", metadata: ["error": "\(error)"])
        }
    }

    /// The new password set from a reset link: every session of the member ends, the lockout is
    /// cleared. A used, expired or unknown link changes nothing.
    func resetPassword(token: String, password: String) async throws {
        guard token.utf8.count <= 128 else { throw Self.invalidReset }
        let now = clock.now()
        let digest = OpaqueToken.hash(token)
        guard let email = try await db.withConnection({ conn in try await store.resetEmail(digest: digest, now: now, on: conn) }) else {
            throw Self.invalidReset
        }
        try passwords.require(password, userInputs: [email], field: "password")
        let hash = try await hashPassword(password)
        try await db.withTransaction(logger: logger) { conn in
            guard let (member, app) = try await store.resetPassword(digest: digest, passwordHash: hash, now: now, on: conn) else {
                throw Self.invalidReset
            }
            try await audit.record(
                AuditLog.Entry(
                    userID: nil,
                    appID: app,
                    action: "operator.password_reset",
                    result: "success",
                    details: ["member_id": .string(member.lowercasedString)]
                ),
                on: conn
            )
        }
    }

    static let invalidReset = AppError(AuthErrorCode.invalidOrExpiredToken, "This reset link is unknown, used or expired; ask for a new one")

    /// A new access token and a new refresh cookie for a live session; the old cookie is spent.
    func refresh(app: UUID, refreshToken: String) async throws -> SignedIn {
        let now = clock.now()
        let next = OpaqueToken.generate()
        return try await db.withTransaction(logger: logger) { conn in
            guard
                let (session, member) = try await store.rotate(
                    app: app,
                    from: OpaqueToken.hash(refreshToken),
                    to: OpaqueToken.hash(next),
                    now: now,
                    on: conn
                )
            else { throw AppError.invalidToken("The console session has ended; sign in again") }
            return SignedIn(accessToken: try accessToken(member, session: session, now: now), refreshToken: next, member: member)
        }
    }

    /// Ends the session: its access tokens are refused within `OPERATOR_CACHE_SECONDS` everywhere.
    func logout(app: UUID, refreshToken: String) async throws {
        let now = clock.now()
        _ = try await db.withTransaction(logger: logger) { conn in
            try await store.endSession(app: app, refreshDigest: OpaqueToken.hash(refreshToken), now: now, on: conn)
        }
    }

    /// Logout from the page, which holds the access token (the refresh cookie goes to the
    /// refresh route only): the token's session ends. A forged or expired token ends nothing.
    /// An expired token still ends its session: a tab left asleep past the ten minutes must be
    /// able to sign out, or its refresh cookie would sign it back in.
    func logout(app: UUID, accessToken: String) async throws {
        guard let claims = await claims(accessToken), ConsoleRules.accepts(claims, app: app, now: clock.now(), expiredToo: true)
        else { throw AppError.invalidToken("No console session: sign in") }
        let now = clock.now()
        _ = try await db.withTransaction(logger: logger) { conn in
            try await store.endSession(app: app, session: claims.sid, now: now, on: conn)
        }
    }

    private func accessToken(_ member: OperatorMemberStore.Member, session: UUID, now: Date) throws -> String {
        let iat = Int(now.timeIntervalSince1970)
        return try signer.signClaims(
            ConsoleClaims(
                iss: signer.issuer,
                aud: ConsoleClaims.audience,
                sub: member.id.lowercasedString,
                appID: member.appID,
                role: member.role,
                email: member.email,
                sid: session,
                iat: iat,
                exp: iat + Int(ConsoleRules.accessLifetime),
                jti: UUID().lowercasedString
            )
        )
    }

    /// A console token's claims, its signature checked (auth's keys); nil for anything else.
    private func claims(_ token: String) async -> ConsoleClaims? {
        guard let payload = try? await tokens.verifiedPayload(token) else { return nil }
        return try? JSON.decoder.decode(ConsoleClaims.self, from: payload)
    }

    /// The member a console access token stands for now (their role now, not when signed in);
    /// nil for a forged, expired, other app's or ended one.
    func verify(app: UUID, token: String) async throws -> Operator? {
        guard let claims = await claims(token), ConsoleRules.accepts(claims, app: app, now: clock.now()), let memberID = claims.memberID
        else { return nil }
        let now = clock.now()
        let member = try await db.withConnection { conn in
            try await store.live(session: claims.sid, member: memberID, app: app, now: now, on: conn)
        }
        return member.map { .member(id: $0.id, email: $0.email, role: $0.role) }
    }

    // MARK: the team

    struct Team: Sendable {
        var members: [OperatorMemberStore.Member]
        var invites: [OperatorMemberStore.Invite]
        var requiresTOTP: Bool
    }

    func team(app: UUID) async throws -> Team {
        let now = clock.now()
        return try await db.withTransaction(logger: logger) { conn in
            Team(
                members: try await store.list(app: app, on: conn),
                invites: try await store.pendingInvites(app: app, now: now, on: conn),
                requiresTOTP: try await store.requiresTOTP(app: app, on: conn) ?? false
            )
        }
    }

    func setRole(app: UUID, member: UUID, role: OperatorRole, by who: Operator) async throws -> OperatorMemberStore.Member {
        try await db.withTransaction(logger: logger) { conn in
            if role != .owner, !ConsoleRules.ownerMayLeave(member: member, owners: try await store.owners(app: app, on: conn)) {
                throw AppError(AuthErrorCode.lastOwner, "This member is the app's last owner; make another member owner first")
            }
            guard let changed = try await store.setRole(app: app, member: member, role: role, on: conn) else {
                throw AppError.notFound("Member")
            }
            try await audit.record(
                AuditLog.Entry(
                    userID: nil,
                    appID: app,
                    action: "operator.member.role",
                    result: "success",
                    details: ["member_id": .string(member.lowercasedString), "role": .string(role.rawValue), "operator": .string(who.auditName)]
                ),
                on: conn
            )
            return changed
        }
    }

    func remove(app: UUID, member: UUID, by who: Operator) async throws {
        let now = clock.now()
        try await db.withTransaction(logger: logger) { conn in
            if !ConsoleRules.ownerMayLeave(member: member, owners: try await store.owners(app: app, on: conn)) {
                throw AppError(AuthErrorCode.lastOwner, "This member is the app's last owner; make another member owner first")
            }
            guard try await store.remove(app: app, member: member, now: now, on: conn) != nil else {
                throw AppError.notFound("Member")
            }
            try await audit.record(
                AuditLog.Entry(
                    userID: nil,
                    appID: app,
                    action: "operator.member.remove",
                    result: "success",
                    details: ["member_id": .string(member.lowercasedString), "operator": .string(who.auditName)]
                ),
                on: conn
            )
        }
    }

    /// Requiring a second factor holds only once every member has one (nobody is locked out).
    func requireTOTP(app: UUID, _ required: Bool, by who: Operator) async throws {
        try await db.withTransaction(logger: logger) { conn in
            if required, let missing = try await store.list(app: app, on: conn).first(where: { $0.totpSecret == nil }) {
                throw AppError(AuthErrorCode.totpNotEnrolled, "\(missing.email) has no authenticator yet; every member needs one first")
            }
            try await store.setRequiresTOTP(app: app, required, on: conn)
            try await audit.record(
                AuditLog.Entry(
                    userID: nil,
                    appID: app,
                    action: "operator.console.require_totp",
                    result: "success",
                    details: ["required": .bool(required), "operator": .string(who.auditName)]
                ),
                on: conn
            )
        }
    }

    static func locked(until: Date, now: Date) -> AppError { LockoutPolicy.refusal(lockedUntil: until, now: now) }
}

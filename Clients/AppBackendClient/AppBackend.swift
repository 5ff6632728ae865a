@_exported import AdsAPI
@_exported import AuthAPI
import Foundation
import HTTPTypes
@_exported import OfflineAPI
@_exported import OpenAPIRuntime
@_exported import SubscriptionAPI

#if canImport(FoundationNetworking) || canImport(Darwin)
import OpenAPIURLSession
#endif

/// The four services' clients behind one gateway, with the app's credentials on every call.
///
///     let backend = AppBackend(serverURL: URL(string: "https://api.example.com")!, appID: "…", apiKey: "…")
///     let session = try await backend.auth.postAuthRegister(body: .json(.init(provider: .guest, credentials: .init(deviceId: "…"))))
///     try await backend.signedIn(try session.created.body.json.tokens)
///     let balance = try await backend.subscription.getCreditsBalance().ok.body.json.balance
///
/// On iOS the default transport is URLSession; on a server pass `AsyncHTTPClientTransport()`
/// (swift-openapi-async-http-client).
public struct AppBackend: Sendable {
    public let auth: AuthAPI.Client
    public let subscription: SubscriptionAPI.Client
    public let offline: OfflineAPI.Client
    public let ads: AdsAPI.Client
    /// The signed-in user's access token (none before sign-in).
    public let credentials: Credentials

    /// `middlewares` run after the credentials are set (logging, metrics, retries).
    public init(
        serverURL: URL,
        appID: String,
        apiKey: String,
        transport: any ClientTransport,
        deviceID: String? = nil,
        middlewares: [any ClientMiddleware] = []
    ) {
        let credentials = Credentials()
        let all: [any ClientMiddleware] =
            [AppCredentialsMiddleware(appID: appID, apiKey: apiKey, deviceID: deviceID, credentials: credentials)] + middlewares
        auth = AuthAPI.Client(serverURL: serverURL, transport: transport, middlewares: all)
        subscription = SubscriptionAPI.Client(serverURL: serverURL, transport: transport, middlewares: all)
        offline = OfflineAPI.Client(serverURL: serverURL, transport: transport, middlewares: all)
        ads = AdsAPI.Client(serverURL: serverURL, transport: transport, middlewares: all)
        self.credentials = credentials
    }

    #if canImport(FoundationNetworking) || canImport(Darwin)
    /// With URLSession (iOS, macOS).
    public init(serverURL: URL, appID: String, apiKey: String, deviceID: String? = nil) {
        self.init(serverURL: serverURL, appID: appID, apiKey: apiKey, transport: URLSessionTransport(), deviceID: deviceID)
    }
    #endif

    /// Keeps a sign-in's tokens: the access token goes on every call that follows.
    public func signedIn(_ tokens: AuthAPI.Components.Schemas.Tokens) async {
        await credentials.set(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken)
    }

    /// Rotates the refresh token (when an access token expires) and keeps the new pair.
    public func refresh() async throws {
        guard let refreshToken = await credentials.refreshToken else { throw SignInRequired() }
        let session = try await auth.postAuthRefresh(body: .json(.init(refreshToken: refreshToken))).ok.body.json
        await signedIn(session.tokens)
    }

    public struct SignInRequired: Error {}
}

/// The tokens of the signed-in user, shared by the four clients.
public actor Credentials {
    public private(set) var accessToken: String?
    public private(set) var refreshToken: String?

    public init() {}

    public func set(accessToken: String?, refreshToken: String?) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
    }
}

/// `X-App-ID` and `X-API-Key` on every call, `X-Device-ID` when set, and the user's bearer token
/// once signed in (an operation's own `Authorization`, e.g. an operator's, is kept).
struct AppCredentialsMiddleware: ClientMiddleware {
    let appID: String
    let apiKey: String
    let deviceID: String?
    let credentials: Credentials

    func intercept(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[HTTPField.Name("X-App-ID")!] = appID
        request.headerFields[HTTPField.Name("X-API-Key")!] = apiKey
        if let deviceID, request.headerFields[HTTPField.Name("X-Device-ID")!] == nil {
            request.headerFields[HTTPField.Name("X-Device-ID")!] = deviceID
        }
        if request.headerFields[.authorization] == nil, let token = await credentials.accessToken {
            request.headerFields[.authorization] = "Bearer \(token)"
        }
        return try await next(request, body, baseURL)
    }
}

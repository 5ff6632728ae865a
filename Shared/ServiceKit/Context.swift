import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization
import WireTypes

/// The request context of every service: the usual Hummingbird storage, plus the verified
/// identity (tenant, and user when an access token was presented) and the calling service on
/// internal routes.
public struct ServiceRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public var identity: Identity?
    public var callingService: ServiceName?
    /// The operator acting, on admin routes (set by `AdminAuthMiddleware`).
    public var `operator`: Operator?
    public var requestID: String
    public let remoteAddress: SocketAddress?
    /// What `clientAddress` is worked out from: the proxies believed and the request's fields
    /// (set by `RequestIDMiddleware`).
    var forwarding: (proxies: TrustedProxies, fields: HTTPFields)?

    /// The client's address: from a trusted proxy's `X-Forwarded-For`, else the socket peer.
    /// Worked out when asked (sign-in limits, audit rows): formatting the peer's address on
    /// every request cost 1.4 % of a cached read.
    public var clientAddress: String {
        let peer = remoteAddress?.ipAddress
        guard let forwarding else { return peer ?? "unknown" }
        return forwarding.proxies.clientAddress(
            peer: peer,
            forwardedFor: forwarding.fields.value(.xForwardedFor),
            realIP: forwarding.fields.value(.xRealIP)
        )
    }

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        identity = nil
        callingService = nil
        `operator` = nil
        requestID = ""
        remoteAddress = source.channel.remoteAddress
        forwarding = nil
    }

    /// Bodies above 1 MiB are refused with 413 before they are read in full (the gateway
    /// holds the same limit).
    public var maxUploadSize: Int { 1 << 20 }

    /// The tenant; only routes behind `TenantMiddleware` call this.
    public func requireApp() throws -> UUID {
        guard let id = identity?.appID else { throw AppError.unauthorized }
        return id
    }

    /// The operator acting; only routes behind `AdminAuthMiddleware` call this.
    public func requireOperator() throws -> Operator {
        guard let who = `operator` else { throw AppError.unauthorized }
        return who
    }

    /// The signed-in user; only routes behind `AccessTokenMiddleware` call this.
    public func requireUser() throws -> (appID: UUID, userID: UUID) {
        guard let identity, let user = identity.userID else { throw AppError.unauthorized }
        return (identity.appID, user)
    }
}

/// Carries the request id of the request being served onto outbound calls.
public enum RequestTrace {
    @TaskLocal public static var requestID: String?
}

/// Reads `X-Request-ID` (or makes one), puts it on the logger and the response, and carries
/// it onto outbound calls; records the client address the gateway passed on.
public struct RequestIDMiddleware: RouterMiddleware {
    public typealias Context = ServiceRequestContext
    let proxies: TrustedProxies
    /// One access line per request at this level (`ACCESS_LOG_LEVEL`).
    let accessLevel: Logger.Level
    let ids = RequestIDs()
    public init(trustedProxies: TrustedProxies = .loopback, accessLevel: Logger.Level = .info) {
        proxies = trustedProxies
        self.accessLevel = accessLevel
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let incoming = request.headers.value(.xRequestID).flatMap { !$0.isEmpty && $0.utf8.count <= 128 ? $0 : nil }
        let id = incoming ?? ids.next()
        context.requestID = id
        context.logger[metadataKey: "request_id"] = .string(id)
        // Forwarding headers count only from a trusted proxy; a client calling a service
        // directly is known by its socket address.
        context.forwarding = (proxies, request.headers)
        let start = ContinuousClock.now
        var response = try await RequestTrace.$requestID.withValue(id) {
            try await next(request, context)
        }
        // Appended when absent (as it always is): setting first builds an index of the names.
        if response.headers.value(.xRequestID) == nil {
            response.headers.append(HTTPField(name: .xRequestID, value: id))
        } else {
            response.headers[.xRequestID] = id
        }
        // The access line's fields are built only when the line is written.
        guard context.logger.logLevel <= accessLevel else { return response }
        let elapsed = ContinuousClock.now - start
        var metadata: Logger.Metadata = [
            "method": "\(request.method.rawValue)", "route": "\(context.endpointPath ?? "unmatched")", "status": "\(response.status.code)",
            "duration_ms": "\(Double(elapsed.components.attoseconds / 1_000_000_000_000 + elapsed.components.seconds * 1_000_000) / 1000)",
        ]
        if let app = context.identity?.appID { metadata["app_id"] = "\(app.lowercasedString)" }
        if let user = context.identity?.userID { metadata["user_id"] = "\(user.lowercasedString)" }
        if let caller = context.callingService { metadata["caller"] = "\(caller.rawValue)" }
        context.logger.log(level: accessLevel, "request", metadata: metadata)
        return response
    }
}

/// The ids `RequestIDMiddleware` gives requests that arrive without one: 64 random bits drawn
/// once per process, then a counter, 32 hex digits in all. Unique across replicas as a random
/// id is, without a `getrandom` system call per request (1.3 % of a cached read, #35).
final class RequestIDs: Sendable {
    private let prefix: String
    private let counter = Atomic<UInt64>(0)

    init() {
        var random = SystemRandomNumberGenerator()
        prefix = Self.hex(random.next())
    }

    func next() -> String {
        prefix + Self.hex(counter.add(1, ordering: .relaxed).newValue)
    }

    static func hex(_ value: UInt64) -> String {
        withUnsafeBytes(of: value.bigEndian) { $0.hexEncoded }
    }
}

extension HTTPField.Name {
    public static let xRequestID = Self("X-Request-ID")!
    public static let xAppID = Self("X-App-ID")!
    public static let xAPIKey = Self("X-API-Key")!
    public static let xForwardedFor = Self("X-Forwarded-For")!
    public static let xRealIP = Self("X-Real-IP")!
    public static let xServiceName = Self("X-Service-Name")!
    public static let idempotencyKey = Self("Idempotency-Key")!
    public static let xDeviceID = Self("X-Device-ID")!
    /// The client's country (ISO 3166-1 alpha-2), set by the app from its locale or by an edge
    /// proxy from the address.
    public static let xCountryCode = Self("X-Country-Code")!
}

/// Shared JSON coders: snake_case comes from explicit `CodingKeys`, dates are ISO-8601 UTC.
public enum JSON {
    /// A date as the encoder writes it (ISO-8601 UTC, seconds).
    public static func iso8601(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        return f.string(from: date)
    }
    /// Sorted keys, slashes as they are, ISO-8601 dates, lower-case UUIDs (`JSONWriter`, #45).
    public static let encoder = JSONWriter()
    public static let decoder: JSONDecoder = {
        let d = JSONDecoder()
        // ISO-8601, with or without fractional seconds. Parsed here rather than with `.iso8601`
        // because that strategy's error carries no coding path, so a bad date could not be named.
        d.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = try? Date(text, strategy: .iso8601) { return date }
            if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return date }
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Expected an ISO-8601 date-time")
        }
        return d
    }()
}

extension Request {
    /// Decodes a JSON body: checks the content type, the size limit and the shape, and turns
    /// every failure into a 4xx that names the field.
    public func decodeJSON<T: Decodable>(as type: T.Type = T.self, context: ServiceRequestContext) async throws -> T {
        if let ct = headers[.contentType], !ct.lowercased().hasPrefix("application/json") {
            throw AppError(.unsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json")
        }
        let buffer: ByteBuffer
        do {
            buffer = try await body.collect(upTo: context.maxUploadSize)
        } catch {
            throw AppError(.contentTooLarge, "payload_too_large", "Request body exceeds \(context.maxUploadSize) bytes")
        }
        if buffer.readableBytes == 0 { throw AppError.badRequest("Request body is required") }
        do {
            return try JSON.decoder.decode(T.self, from: Data(buffer.readableBytesView))
        } catch let error as DecodingError {
            throw AppError.decoding(error)
        }
    }
}

extension AppError {
    /// A `DecodingError` as a 400 that names the field and says what was wrong.
    public static func decoding(_ error: DecodingError) -> AppError {
        /// `variants[0].weight`, as the validation errors name fields.
        func path(_ keys: [any CodingKey]) -> String {
            keys.reduce(into: "") { out, key in
                if let i = key.intValue { out += "[\(i)]" } else { out += (out.isEmpty ? "" : ".") + key.stringValue }
            }
        }
        switch error {
        case .keyNotFound(let key, let ctx):
            let field = path(ctx.codingPath + [key])
            return .badRequest("Missing field '\(field)'", field: field)
        case .typeMismatch(let type, let ctx):
            let field = path(ctx.codingPath)
            return .badRequest("Field '\(field)' must be of type \(Self.jsonTypeName(type))", field: field)
        case .valueNotFound(let type, let ctx):
            let field = path(ctx.codingPath)
            return .badRequest("Field '\(field)' must be a non-null \(Self.jsonTypeName(type))", field: field)
        case .dataCorrupted(let ctx):
            if ctx.codingPath.isEmpty { return .badRequest("Malformed JSON body") }
            let field = path(ctx.codingPath)
            return .badRequest("Field '\(field)' has an invalid value", field: field)
        @unknown default:
            return .badRequest("Malformed JSON body")
        }
    }

    static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type, is UUID.Type, is Date.Type: "string"
        case is Bool.Type: "boolean"
        case is Int.Type, is Int64.Type, is Int32.Type, is Double.Type: "number"
        default: String(describing: type).hasPrefix("Array") ? "array" : "object"
        }
    }
}

extension ServiceRequestContext {
    /// A JSON body encoded before (an answer many requests share, kept as bytes).
    public func json(encoded body: ByteBuffer, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: body))
    }

    /// Encodes a value as a JSON response with the given status.
    public func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) throws -> Response {
        let data = try JSON.encoder.encode(value)
        var h = headers
        h[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: h, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

import Foundation
import HTTPTypes
import WireTypes

// ServiceCore (#50): what a service's Domain may use of the shared code: the error a decision
// throws and the catalogue it names, as values. No pool, no HTTP client, no router: a Domain
// target depends on this and WireTypes only, so a misplaced import fails the build.

/// An error that renders the envelope `{"error": code, "message": ..., ...extra}` with its status.
public struct AppError: Error, Sendable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    public var code: String
    public var message: String
    public var extra: [String: JSONValue]
    public var headers: HTTPFields

    public init(
        _ status: HTTPResponse.Status,
        _ code: String,
        _ message: String,
        extra: [String: JSONValue] = [:],
        headers: HTTPFields = [:]
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra
        self.headers = headers
    }

    public var description: String { "AppError(\(status.code) \(code): \(message))" }

    // The common ones, so services name them the same way.
    public static func badRequest(_ message: String, field: String? = nil) -> AppError {
        AppError(.badRequest, "invalid_request", message, extra: field.map { ["field": .string($0)] } ?? [:])
    }
    public static func validation(_ field: String, _ message: String) -> AppError {
        AppError(.unprocessableContent, "validation_error", message, extra: ["field": .string(field)])
    }
    public static func notFound(_ what: String) -> AppError {
        AppError(.notFound, "not_found", "\(what) not found")
    }
    public static let unauthorized = AppError(.unauthorized, "unauthorized", "Authentication required")
    public static func invalidToken(_ message: String = "Invalid or expired access token") -> AppError {
        AppError(.unauthorized, "invalid_token", message)
    }
    public static func rateLimited(retryAfter: Int) -> AppError {
        var h = HTTPFields()
        h[.retryAfter] = String(retryAfter)
        return AppError(
            .tooManyRequests,
            "rate_limit_exceeded",
            "Too many requests, retry later",
            extra: ["retry_after": .int(retryAfter)],
            headers: h
        )
    }
    public static let unavailable = AppError(.serviceUnavailable, "service_unavailable", "Service temporarily unavailable")
}

public typealias HTTPStatus = HTTPResponse.Status

/// A service's error catalogue (#36): an enum of the codes it answers, each with its status, so
/// that a code is declared once, its status is the same at every site, and the OpenAPI document's
/// `Error` enum is generated from the list rather than from whatever the handlers happen to say.
public protocol ErrorCatalogue: RawRepresentable, CaseIterable, Sendable where RawValue == String {
    var status: HTTPStatus { get }
}

extension AppError {
    public init(_ code: some ErrorCatalogue, _ message: String, extra: [String: JSONValue] = [:], headers: HTTPFields = [:]) {
        self.init(code.status, code.rawValue, message, extra: extra, headers: headers)
    }

    /// A code answered with another status than its usual one at one site (e.g. a store
    /// notification whose signature does not verify is `invalid_notification` with 401).
    public init(_ status: HTTPStatus, _ code: some ErrorCatalogue, _ message: String, extra: [String: JSONValue] = [:], headers: HTTPFields = [:]) {
        self.init(status, code.rawValue, message, extra: extra, headers: headers)
    }
}

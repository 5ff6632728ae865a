import Foundation
import Hummingbird
import HTTPTypes
import Instrumentation
import Logging
import OTel
import ServiceContextModule
import ServiceLifecycle
import Tracing

/// Distributed traces (#49): spans made with swift-distributed-tracing, exported by swift-otel
/// over OTLP/HTTP with protobuf bodies to `OTEL_EXPORTER_OTLP_ENDPOINT` (the collector's 4318).
/// HTTP rather than gRPC: the services already speak HTTP/1.1 to everything, every collector
/// and vendor accepts it, and it keeps gRPC and its HTTP/2 stack out of four binaries.
///
/// Off when no endpoint is set (or `OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`): no
/// tracer is bootstrapped, no middleware added, and the code that makes spans only makes them
/// inside a traced request (`ServiceContext.current` set), so an untraced request pays one
/// task-local read per statement.
public enum Telemetry {
    /// Whether this environment asks for traces.
    public static func isRequested(_ env: EnvironmentVariables) -> Bool {
        guard env.optional("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != nil || env.optional("OTEL_EXPORTER_OTLP_ENDPOINT") != nil else { return false }
        if env.bool("OTEL_SDK_DISABLED", default: false) { return false }
        return env.optional("OTEL_TRACES_EXPORTER")?.lowercased() != "none"
    }

    /// The process's tracer, bootstrapped once (by `serve`, before the application is built),
    /// and the background service that batches and exports its spans. Standard `OTEL_*`
    /// variables override what is set here (sampler, ratio, endpoint, headers, batch sizes).
    public static func bootstrap(service: ServiceName, logger: Logger) throws -> any Service {
        var config = OTel.Configuration.default
        config.serviceName = "\(service.rawValue)-service"
        config.logs.enabled = false
        config.metrics.enabled = false
        config.traces.enabled = true
        config.traces.exporter = .otlp
        config.traces.otlpExporter.protocol = .httpProtobuf
        // Every trace locally; production sets OTEL_TRACES_SAMPLER_ARG (docs/CONFIGURATION.md).
        config.traces.sampler = .parentBasedTraceIDRatio(ratio: 1.0)!
        config.propagators = [.traceContext]
        config.diagnosticLogger = .custom(logger)
        // The exporter's own troubles, not each setting it read from the environment.
        config.diagnosticLogLevel = .warning
        let backend = try OTel.makeTracingBackend(configuration: config)
        InstrumentationSystem.bootstrap(backend.factory)
        return backend.service
    }

    /// Adds `trace_id` and `span_id` to each log line written inside a span.
    public static let logMetadata: Logger.MetadataProvider = OTel.makeLoggingMetadataProvider()

    /// Whether the span under way records (its trace is sampled): a child of a span that does
    /// not is not made at all (with `parentbased_*` samplers it would not record either), so an
    /// unsampled request pays for its own span only.
    public static var isRecording: Bool { ServiceContext.current?[RecordingKey.self] ?? false }

    /// The context a span's children run in: the span's, and whether it records.
    public static func context(of span: any Span) -> ServiceContext {
        var context = span.context
        context[RecordingKey.self] = span.isRecording
        return context
    }

    /// The W3C `traceparent` of the span under way, to store with a row this transaction writes
    /// (an outbox message, a job) so that its later delivery or run links back to it.
    public static func currentTraceparent() -> String? {
        guard let context = ServiceContext.current else { return nil }
        var fields: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &fields, using: DictionaryCarrier())
        return fields["traceparent"]
    }

    /// The span context a stored `traceparent` names, for a link; nil when it is malformed.
    public static func context(traceparent: String?) -> ServiceContext? {
        guard let traceparent, TraceParent(traceparent) != nil else { return nil }
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(["traceparent": traceparent], into: &context, using: DictionaryCarrier())
        return context
    }
}

enum RecordingKey: ServiceContextKey {
    typealias Value = Bool
}

/// A W3C `traceparent` value, checked as the Trace Context specification reads it
/// (version-traceid-parentid-flags, lowercase hex, ids not all zero; version ff invalid).
public struct TraceParent: Equatable, Sendable {
    public let traceID: String
    public let parentID: String
    public let sampled: Bool

    public init?(_ value: String) {
        let parts = value.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[1].count == 32, parts[2].count == 16, parts[3].count == 2 else { return nil }
        // A future version may add fields after the flags; version 00 has exactly four.
        let isHex = { (part: Substring) in part.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) } }
        guard parts.prefix(4).allSatisfy(isHex) else { return nil }
        guard parts[0] != "ff", parts[0] != "00" || parts.count == 4 else { return nil }
        guard parts[1] != String(repeating: "0", count: 32), parts[2] != String(repeating: "0", count: 16) else { return nil }
        traceID = String(parts[1])
        parentID = String(parts[2])
        sampled = (UInt8(parts[3], radix: 16) ?? 0) & 1 == 1
    }
}

struct DictionaryCarrier: Injector, Extractor {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}

struct HTTPFieldsCarrier: Injector, Extractor {
    func inject(_ value: String, forKey key: String, into carrier: inout HTTPFields) {
        if let name = HTTPField.Name(key) { carrier[name] = value }
    }
    /// A `tracestate` longer than the specification's 512 characters is dropped (the trace
    /// continues from `traceparent` alone), as a propagator may do: nothing unbounded from a
    /// client is carried onto every span and outbound call.
    /// A `traceparent` is passed on only when `TraceParent` reads it as valid: one reading of
    /// the specification, tested as a table, decides whether a client's trace is followed.
    func extract(key: String, from carrier: HTTPFields) -> String? {
        guard let name = HTTPField.Name(key), let value = carrier[name] else { return nil }
        if key == "traceparent", TraceParent(value) == nil { return nil }
        if key == "tracestate", value.utf8.count > 512 { return nil }
        return value
    }
}

/// One server span per request (#49), named by the route's template (`POST /ads/v1/rewards/{id}`),
/// never the raw path or its query (which may carry ids and tokens). The caller's `traceparent`
/// is continued when well formed; otherwise the span starts a new trace. Outermost, so that the
/// access line and every log line of the request carry the trace id.
public struct TracingMiddleware: RouterMiddleware {
    public typealias Context = ServiceRequestContext
    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var parent = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(request.headers, into: &parent, using: HTTPFieldsCarrier())
        let span = startSpan("\(request.method.rawValue)", context: parent, ofKind: .server)
        do {
            // Ended when the answer is ready: the services' bodies are written at once (the
            // live streams are taken before the router and have no span).
            let response = try await ServiceContext.$current.withValue(Telemetry.context(of: span)) { try await next(request, context) }
            finish(span, request: request, context: context, status: Int(response.status.code), requestID: response.headers[.xRequestID])
            span.end()
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            finish(span, request: request, context: context, status: Int(status), requestID: nil)
            span.recordError(error)
            span.end()
            throw error
        }
    }

    private func finish(_ span: any Span, request: Request, context: Context, status: Int, requestID: String?) {
        // An unsampled span keeps nothing: its attributes are not even built.
        guard span.isRecording else { return }
        let route = context.endpointPath
        span.attributes["http.request.method"] = request.method.rawValue
        span.attributes["url.scheme"] = "http"
        span.operationName = route.map { "\(request.method.rawValue) \($0)" } ?? request.method.rawValue
        span.attributes["http.route"] = route
        span.attributes["http.response.status_code"] = status
        span.attributes["request_id"] = requestID ?? context.requestID
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
    }
}

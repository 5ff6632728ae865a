import Foundation
import HTTPTypes
import Hummingbird
import Instrumentation
import Logging
import ServiceContextModule
import ServiceLifecycle
import Synchronization
import Tracing

/// Distributed traces (#49): spans made with swift-distributed-tracing by `OTLPTracer` and sent
/// by `SpanExporter` over OTLP/HTTP with protobuf bodies to `OTEL_EXPORTER_OTLP_ENDPOINT` (the
/// collector's 4318). HTTP rather than gRPC: the services already speak HTTP/1.1 to everything,
/// every collector and vendor accepts it, and it keeps gRPC and its HTTP/2 stack out of four
/// binaries.
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
    /// the background service that batches and exports its spans, and who keeps a trace.
    /// Whether a trace is kept is decided once, where it starts (`TraceSampling`): the tracer
    /// records every span started under a kept one and none under one that is not.
    public static func bootstrap(service: ServiceName, logger: Logger, environment: EnvironmentVariables) throws -> TelemetryBackend {
        let exporter = SpanExporter(
            settings: SpanExporter.settings(service: "\(service.rawValue)-service", environment: environment),
            logger: logger
        )
        let tracer = OTLPTracer(exporter: exporter)
        InstrumentationSystem.bootstrap(tracer)
        return TelemetryBackend(exporter: exporter, sampling: TraceSampling(environment), tracer: tracer)
    }

    /// Adds `trace_id`, `span_id` and `trace_flags` to each log line written inside a span.
    public static let logMetadata = Logger.MetadataProvider {
        guard let identity = ServiceContext.current?[ActiveSpanKey.self]?.identity else { return [:] }
        return [
            "trace_id": .string(identity.traceIDHex), "span_id": .string(identity.spanIDHex),
            "trace_flags": .string(identity.sampled ? "01" : "00"),
        ]
    }

    /// Whether the span under way records (its trace is sampled): a child of a span that does
    /// not is not made at all (with `parentbased_*` samplers it would not record either), so an
    /// unsampled request pays for its own span only.
    public static var isRecording: Bool { ServiceContext.current?[ActiveSpanKey.self]?.recorder != nil }

    /// A span in `context` (the current one by default): made by the recording span's tracer
    /// when there is one, else by the bootstrapped tracer.
    public static func startSpan(_ name: String, context: ServiceContext? = nil, ofKind kind: SpanKind) -> any Span {
        let context = context ?? ServiceContext.current ?? .topLevel
        if let tracer = context[ActiveSpanKey.self]?.recorder { return tracer.startSpan(name, context: context, ofKind: kind) }
        return Tracing.startSpan(name, context: context, ofKind: kind)
    }

    /// A span for a statement (`sql`) or a transaction (nil) inside a recording span, named by
    /// its operation and table, never its text or values; nil outside one.
    static func statementSpan(_ sql: String?, file: String, line: Int) -> OTLPSpan? {
        guard let context = ServiceContext.current, let tracer = context[ActiveSpanKey.self]?.recorder else { return nil }
        let statement = tracer.statements.describe(sql: sql, file: file, line: line)
        let span = tracer.startSpan(statement.name, context: context, ofKind: .client)
        span.attributes = statement.attributes
        return span
    }

    /// The context a span's children run in: the span's, which says whether it records.
    public static func context(of span: any Span) -> ServiceContext {
        var context = span.context
        if !span.isRecording, var active = context[ActiveSpanKey.self], active.recorder != nil {
            active.recorder = nil
            context[ActiveSpanKey.self] = active
        }
        return context
    }

    /// The W3C `traceparent` of the span under way, to store with a row this transaction writes
    /// (an outbox message, a job) so that its later delivery or run links back to it.
    public static func currentTraceparent() -> String? {
        guard let context = ServiceContext.current else { return nil }
        return propagation(of: context)["traceparent"]
    }

    /// The `traceparent` (and `tracestate`) that `context` passes on. A request whose new trace
    /// is not kept carries no ids (`UnkeptKey`): they are made here, when something leaves it,
    /// flagged not sampled, so that the services after it do not draw again.
    static func propagation(of context: ServiceContext) -> [String: String] {
        var fields: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &fields, using: DictionaryCarrier())
        if fields["traceparent"] == nil, context[UnkeptKey.self] == true { fields["traceparent"] = unkeptTraceparent() }
        return fields
    }

    /// What a stored `traceparent` (an outbox row's, a job's) says; nil when it is malformed.
    public static func stored(traceparent: String?) -> StoredTrace? {
        guard let traceparent, let parsed = TraceParent(traceparent) else { return nil }
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(["traceparent": traceparent], into: &context, using: DictionaryCarrier())
        return StoredTrace(context: context, kept: parsed.sampled)
    }
}

/// The trace of the transaction that wrote a row: its context (to link to, or to pass on) and
/// whether it was kept. A later delivery or job run follows that decision, never a new draw.
public struct StoredTrace: Sendable {
    public let context: ServiceContext
    public let kept: Bool
}

/// What `serve` bootstrapped: the span exporter (a background service), the sampling and the
/// tracer.
public struct TelemetryBackend: Sendable {
    public let exporter: any Service
    public let sampling: TraceSampling
    public let tracer: OTLPTracer
}

/// Whether a trace is kept (#49), decided once where it starts and followed everywhere after:
/// a request without a caller's decision draws against the ratio; a caller's `traceparent`
/// decides for it (`parentbased_*`); an outbox delivery or a job run follows the decision
/// stored with its row (`Telemetry`, `OutboxWorker`, `JobWorker`). An unkept request makes no
/// span at all, which is what keeps tracing at 0.01 cheap.
public struct TraceSampling: Sendable, Equatable {
    /// The share of new traces kept, 0...1.
    public let ratio: Double
    /// Whether a caller's decision (its `traceparent`'s sampled flag) is followed.
    public let followsCaller: Bool

    public init(ratio: Double, followsCaller: Bool) {
        self.ratio = ratio
        self.followsCaller = followsCaller
    }

    /// `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` as the OpenTelemetry SDK
    /// configuration reads them. Unset or unknown: `parentbased_traceidratio` at 1.0 (every trace
    /// locally; production sets the ratio, docs/CONFIGURATION.md). A ratio that is missing,
    /// unreadable or outside 0...1 is 1.0, as the specification says.
    public init(sampler: String?, argument: String?) {
        let ratio = argument.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }.flatMap { (0.0...1.0).contains($0) ? $0 : nil } ?? 1.0
        switch sampler?.trimmingCharacters(in: .whitespaces).lowercased() {
        case "always_on": self.init(ratio: 1, followsCaller: false)
        case "always_off": self.init(ratio: 0, followsCaller: false)
        case "traceidratio": self.init(ratio: ratio, followsCaller: false)
        case "parentbased_always_on": self.init(ratio: 1, followsCaller: true)
        case "parentbased_always_off": self.init(ratio: 0, followsCaller: true)
        default: self.init(ratio: ratio, followsCaller: true)
        }
    }

    public init(_ env: EnvironmentVariables) {
        self.init(sampler: env.optional("OTEL_TRACES_SAMPLER"), argument: env.optional("OTEL_TRACES_SAMPLER_ARG"))
    }

    /// A request's decision; `draw` is uniform over `UInt64`.
    public func keeps(caller: TraceParent?, draw: UInt64) -> Bool {
        if followsCaller, let caller { return caller.sampled }
        if ratio >= 1 { return true }
        return ratio > 0 && Double(draw) < ratio * 18_446_744_073_709_551_616.0
    }
}

extension Telemetry {
    /// The `traceparent` of a new trace that is not kept (flags 00).
    static func unkeptTraceparent() -> String {
        var random = SystemRandomNumberGenerator()
        return SpanIdentity(traceHigh: random.next() | 1, traceLow: random.next(), spanID: random.next() | 1, sampled: false).traceparent
    }
}

/// Set on a request whose new trace is not kept: it has no span and no ids until something
/// leaves it (`Telemetry.propagation(of:)`).
enum UnkeptKey: ServiceContextKey {
    typealias Value = Bool
    /// The context of every such request, made once: writing the key per request cost more than
    /// the rest of an unkept request's tracing (a copy of the storage and a boxed value).
    static let context: ServiceContext = {
        var context = ServiceContext.topLevel
        context[UnkeptKey.self] = true
        return context
    }()
}

/// The draw against the ratio, once per request: a small generator (wyrand) seeded from the
/// system's, since a `getrandom` call per request was a measurable part of an unkept request.
final class SamplingDraw: Sendable {
    private let state: Mutex<UInt64>
    init() {
        var system = SystemRandomNumberGenerator()
        state = Mutex(system.next())
    }
    func next() -> UInt64 {
        state.withLock { s in
            s &+= 0xa076_1d64_78bd_642f
            let product = s.multipliedFullWidth(by: s ^ 0xe703_7ed1_a0b4_28db)
            return product.high ^ product.low
        }
    }
}

/// A W3C `traceparent` value, checked as the Trace Context specification reads it
/// (version-traceid-parentid-flags, lowercase hex, ids not all zero; version ff invalid).
public struct TraceParent: Equatable, Sendable {
    static let field = HTTPField.Name("traceparent")!
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
    let sampling: TraceSampling
    let tracer: OTLPTracer
    let draw = SamplingDraw()
    public init(_ telemetry: TelemetryBackend) {
        sampling = telemetry.sampling
        tracer = telemetry.tracer
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The caller's context is read only when it sent one (most requests come without).
        let callerTrace = request.headers[TraceParent.field].flatMap(TraceParent.init)
        var caller = ServiceContext.topLevel
        if callerTrace != nil { InstrumentationSystem.instrument.extract(request.headers, into: &caller, using: HTTPFieldsCarrier()) }
        guard sampling.keeps(caller: callerTrace, draw: draw.next()) else {
            // Not kept: no span. The caller's trace passes on as it came (not sampled); a trace
            // that starts here gets its ids only if something leaves the request.
            let unkept = callerTrace == nil || !sampling.followsCaller ? UnkeptKey.context : caller
            return try await ServiceContext.$current.withValue(unkept) { try await next(request, context) }
        }
        // Kept: a child of the caller's span when the caller keeps it too; otherwise a new trace
        // (the caller's unkept one is not followed: `traceidratio`, `always_on`).
        let parent = callerTrace?.sampled == true ? caller : .topLevel
        let span = tracer.startSpan("\(request.method.rawValue)", context: parent, ofKind: .server)
        do {
            // Ended when the answer is ready: the services' bodies are written at once (the
            // live streams are taken before the router and have no span).
            let response = try await ServiceContext.$current.withValue(span.context) { try await next(request, context) }
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

    private func finish(_ span: OTLPSpan, request: Request, context: Context, status: Int, requestID: String?) {
        // An unsampled span keeps nothing: its attributes are not even built.
        guard span.isRecording else { return }
        let route = context.endpointPath
        span.operationName = route.map { "\(request.method.rawValue) \($0)" } ?? request.method.rawValue
        // Built whole and set once: one attribute at a time through the span went through its
        // lock, the dictionary's growth and an existential each (callgrind, #49). Nothing else
        // has set any: the span is reachable only from `handle`, its context carries its identity.
        var attributes: [String: SpanAttribute] = [
            "http.request.method": .string(request.method.rawValue),
            "url.scheme": .string("http"),
            "http.response.status_code": .int64(Int64(status)),
            "request_id": .string(requestID ?? context.requestID),
        ]
        if let route { attributes["http.route"] = .string(route) }
        span.attributes = SpanAttributes(attributes)
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
    }
}

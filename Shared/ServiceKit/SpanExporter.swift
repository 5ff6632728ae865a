import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Tracing

/// Sends ended spans to an OpenTelemetry collector (#49): OTLP over HTTP with a protobuf body
/// (`POST {OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces`), batched as the SDK's batch span processor
/// does and read from its standard variables: a batch leaves every `OTEL_BSP_SCHEDULE_DELAY` ms
/// (5000), or as soon as `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` spans (512) wait; at most
/// `OTEL_BSP_MAX_QUEUE_SIZE` (2048) wait, and a span beyond them is dropped and counted (tracing
/// never holds a request back). A collector that answers 429, 502, 503 or 504, or cannot be
/// reached, is tried twice more (1 s, then 2 s later); any other refusal drops the batch.
public final class SpanExporter: Service, Sendable {
    struct Settings: Sendable {
        var url: String
        var headers: [(String, String)]
        var timeout: Duration
        var scheduleDelay: Duration
        var maxQueue: Int
        var maxBatch: Int
        var resource: [(String, String)]
    }

    private struct Queue {
        var spans: [FinishedSpan] = []
        var dropped = 0
    }

    let settings: Settings
    private let queue = Mutex(Queue())
    private let wakeup = Wakeup()
    private let stopping = Atomic<Bool>(false)
    private let client: CurlHTTPClient
    private let logger: Logger
    /// The ResourceSpans' resource and scope, encoded once.
    private let resourceBytes: [UInt8]

    init(settings: Settings, logger: Logger) {
        self.settings = settings
        self.logger = logger
        client = CurlHTTPClient(logger: logger)
        var resource = ProtobufWriter()
        resource.message(1) { r in
            for (key, value) in settings.resource { r.message(1) { kv in kv.keyValue(key, .string(value)) } }
        }
        resourceBytes = resource.bytes
    }

    /// The settings from the standard OpenTelemetry variables.
    static func settings(service: String, environment env: EnvironmentVariables) -> Settings {
        let url =
            env.optional("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            ?? env.optional("OTEL_EXPORTER_OTLP_ENDPOINT").map { $0.hasSuffix("/") ? "\($0)v1/traces" : "\($0)/v1/traces" } ?? ""
        let headers = env.optional("OTEL_EXPORTER_OTLP_TRACES_HEADERS") ?? env.optional("OTEL_EXPORTER_OTLP_HEADERS")
        let timeout = env.optional("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT").flatMap(Int.init) ?? env.int("OTEL_EXPORTER_OTLP_TIMEOUT", default: 10_000)
        var resource = pairs(env.optional("OTEL_RESOURCE_ATTRIBUTES"))
        resource.removeAll { $0.0 == "service.name" }
        resource.insert(("service.name", env.optional("OTEL_SERVICE_NAME") ?? service), at: 0)
        resource += [("telemetry.sdk.language", "swift"), ("telemetry.sdk.name", "app-backend")]
        let maxQueue = max(1, env.int("OTEL_BSP_MAX_QUEUE_SIZE", default: 2048))
        return Settings(
            url: url,
            headers: pairs(headers),
            timeout: .milliseconds(max(1, timeout)),
            scheduleDelay: .milliseconds(max(1, env.int("OTEL_BSP_SCHEDULE_DELAY", default: 5000))),
            maxQueue: maxQueue,
            maxBatch: min(maxQueue, max(1, env.int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", default: 512))),
            resource: resource
        )
    }

    /// `key=value,key=value` with percent-encoded values, as OTEL_*_HEADERS and
    /// OTEL_RESOURCE_ATTRIBUTES are written; a pair without `=` is ignored.
    static func pairs(_ text: String?) -> [(String, String)] {
        (text ?? "").split(separator: ",").compactMap { pair in
            guard let eq = pair.firstIndex(of: "=") else { return nil }
            let key = pair[..<eq].trimmingCharacters(in: .whitespaces)
            let value = String(pair[pair.index(after: eq)...]).trimmingCharacters(in: .whitespaces)
            return key.isEmpty ? nil : (key, value.removingPercentEncoding ?? value)
        }
    }

    /// Called by a span as it ends: never waits for the export.
    func append(_ span: FinishedSpan) {
        let batchReady = queue.withLock { q -> Bool in
            guard q.spans.count < settings.maxQueue else {
                q.dropped += 1
                return false
            }
            q.spans.append(span)
            return q.spans.count == settings.maxBatch
        }
        if batchReady { wakeup.signal() }
    }

    func flushSoon() { wakeup.signal() }

    /// Stops the exporter's HTTP client (its transfer thread) without `run()`: for an exporter
    /// that was never run as a service.
    func close() { client.shutdown() }

    /// The spans waiting for export, in the order they ended.
    var waitingSpans: [FinishedSpan] { queue.withLock { $0.spans } }

    /// Spans waiting for export, and those dropped since the last export.
    var waiting: (spans: Int, dropped: Int) { queue.withLock { ($0.spans.count, $0.dropped) } }

    public func run() async throws {
        await withGracefulShutdownHandler {
            while !stopping.load(ordering: .relaxed) && !Task.isCancelled {
                await wakeup.wait(upTo: settings.scheduleDelay)
                await exportWaiting()
            }
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
            self.wakeup.signal()
        }
        // What the last requests left.
        await exportWaiting()
        client.shutdown()
    }

    /// Sends what waits, a batch at a time.
    func exportWaiting() async {
        while true {
            let (batch, dropped) = queue.withLock { q -> ([FinishedSpan], Int) in
                let batch = Array(q.spans.prefix(settings.maxBatch))
                q.spans.removeFirst(batch.count)
                defer { q.dropped = 0 }
                return (batch, q.dropped)
            }
            if dropped > 0 { logger.warning("spans dropped: the export queue was full", metadata: ["dropped": "\(dropped)"]) }
            guard !batch.isEmpty else { return }
            await send(OTLPTraceEncoding.request(resource: resourceBytes, spans: batch), spans: batch.count)
            if batch.count < settings.maxBatch { return }
        }
    }

    private func send(_ body: [UInt8], spans: Int) async {
        let request = HTTPRequest(
            method: "POST",
            url: settings.url,
            headers: [("Content-Type", "application/x-protobuf")] + settings.headers,
            body: Data(body),
            timeout: settings.timeout
        )
        for attempt in 1...3 {
            var retryable = true
            var problem = ""
            do {
                let response = try await client.send(request)
                if response.isSuccess { return }
                retryable = [429, 502, 503, 504].contains(response.status)
                problem = "status \(response.status)"
            } catch {
                problem = "\(error)"
            }
            if !retryable || attempt == 3 || stopping.load(ordering: .relaxed) {
                logger.warning("span export failed", metadata: ["problem": "\(problem)", "spans": "\(spans)", "attempts": "\(attempt)"])
                return
            }
            try? await Task.sleep(for: .seconds(attempt))
        }
    }
}

/// OTLP's `ExportTraceServiceRequest` (opentelemetry-proto, trace/v1 and common/v1), written
/// field by field: one ResourceSpans with one ScopeSpans holding the batch.
enum OTLPTraceEncoding {
    static func request(resource: [UInt8], spans: [FinishedSpan]) -> [UInt8] {
        var w = ProtobufWriter()
        w.bytes.reserveCapacity(spans.count * 256 + resource.count + 64)
        w.message(1) { rs in  // ExportTraceServiceRequest.resource_spans
            rs.bytes += resource  // ResourceSpans.resource (field 1, encoded whole)
            rs.message(2) { ss in  // ResourceSpans.scope_spans
                ss.message(1) { scope in scope.string(1, "app-backend") }  // ScopeSpans.scope.name
                for span in spans { ss.message(2) { s in encode(span, into: &s) } }  // ScopeSpans.spans
            }
        }
        return w.bytes
    }

    static func encode(_ span: FinishedSpan, into s: inout ProtobufWriter) {
        s.traceID(1, span.identity)
        s.spanID(2, span.identity.spanID)
        if let state = span.identity.traceState { s.string(3, state) }
        if let parent = span.parentSpanID { s.spanID(4, parent) }
        s.string(5, span.name)
        s.varintField(6, kind(span.kind))
        s.fixed64(7, span.start)
        s.fixed64(8, span.end)
        s.attributes(9, span.attributes)
        for event in span.events {
            s.message(11) { e in
                e.fixed64(1, event.nanosecondsSinceEpoch)
                e.string(2, event.name)
                e.attributes(3, event.attributes)
            }
        }
        for link in span.links {
            s.message(13) { l in
                l.traceID(1, link.identity)
                l.spanID(2, link.identity.spanID)
                if let state = link.identity.traceState { l.string(3, state) }
                l.attributes(4, link.attributes)
            }
        }
        if let status = span.status {
            s.message(15) { st in
                if let message = status.message { st.string(2, message) }
                st.varintField(3, status.code == .ok ? 1 : 2)
            }
        }
    }

    /// Span.SpanKind: internal 1, server 2, client 3, producer 4, consumer 5.
    static func kind(_ kind: SpanKind) -> UInt64 {
        switch kind {
        case .server: 2
        case .client: 3
        case .producer: 4
        case .consumer: 5
        default: 1
        }
    }
}

/// The protobuf wire format, as much of it as OTLP's spans use.
struct ProtobufWriter {
    var bytes: [UInt8] = []

    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func tag(_ field: Int, _ wireType: Int) { varint(UInt64(field << 3 | wireType)) }

    mutating func varintField(_ field: Int, _ value: UInt64) {
        tag(field, 0)
        varint(value)
    }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, 1)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func double(_ field: Int, _ value: Double) {
        tag(field, 1)
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ field: Int, _ value: String) {
        var value = value
        tag(field, 2)
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// A 16-byte trace id, big-endian as its hex is read.
    mutating func traceID(_ field: Int, _ identity: SpanIdentity) {
        tag(field, 2)
        bytes.append(16)
        withUnsafeBytes(of: identity.traceHigh.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: identity.traceLow.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func spanID(_ field: Int, _ id: UInt64) {
        tag(field, 2)
        bytes.append(8)
        withUnsafeBytes(of: id.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// A length-delimited field written in place: one byte is kept for the length, which is
    /// widened once the body is written if it is 128 bytes or more.
    mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        tag(field, 2)
        let at = bytes.count
        bytes.append(0)
        body(&self)
        let length = bytes.count - at - 1
        if length < 0x80 {
            bytes[at] = UInt8(length)
        } else {
            var prefix = ProtobufWriter()
            prefix.varint(UInt64(length))
            bytes.replaceSubrange(at..<(at + 1), with: prefix.bytes)
        }
    }

    /// Each attribute as a KeyValue in `field`.
    mutating func attributes(_ field: Int, _ attributes: SpanAttributes) {
        // swift-format-ignore: ReplaceForEachWithForLoop
        // SpanAttributes is not a Sequence: `forEach` is how it is read.
        attributes.forEach { key, value in message(field) { kv in kv.keyValue(key, value) } }
    }

    /// common.v1.KeyValue: key 1, value 2 (AnyValue: string 1, bool 2, int 3, double 4, array 5).
    mutating func keyValue(_ key: String, _ value: SpanAttribute) {
        string(1, key)
        message(2) { v in v.anyValue(value) }
    }

    mutating func anyValue(_ value: SpanAttribute) {
        switch value {
        case .int32(let v): varintField(3, UInt64(bitPattern: Int64(v)))
        case .int64(let v): varintField(3, UInt64(bitPattern: v))
        case .double(let v): double(4, v)
        case .bool(let v): varintField(2, v ? 1 : 0)
        case .string(let v): string(1, v)
        case .stringConvertible(let v): string(1, v.description)
        case .int32Array(let v): array(v.map { .int32($0) })
        case .int64Array(let v): array(v.map { .int64($0) })
        case .doubleArray(let v): array(v.map { .double($0) })
        case .boolArray(let v): array(v.map { .bool($0) })
        case .stringArray(let v): array(v.map { .string($0) })
        case .stringConvertibleArray(let v): array(v.map { .string($0.description) })
        default: string(1, "")
        }
    }

    private mutating func array(_ values: [SpanAttribute]) {
        message(5) { a in for value in values { a.message(1) { v in v.anyValue(value) } } }
    }
}

import Instrumentation
import ServiceContextModule
import Synchronization
import Tracing

/// The process's tracer (#49) behind swift-distributed-tracing's `Tracer`: what every span in
/// the services is made with (Hummingbird's requests, statements, outbound calls, jobs, outbox
/// deliveries), exported by `SpanExporter` over OTLP/HTTP.
///
/// Why not swift-otel's tracer (the field library, used until stop 58): `make bench` at ratio 1.0
/// put a quarter of the service's CPU in it (perf, DESIGN "Traces"): each span's start and end was
/// an event on an `AsyncStream` (a task switch), each id a `getrandom` system call, each span a
/// lookup of its generic tracer's metadata, and its protobuf went through SwiftProtobuf's generic
/// encoder. Its 1.6 configuration exposes none of these. This one is a final class: a span is one
/// allocation with a lock, ids come from a userspace generator seeded by the system's, an ended
/// span is appended to a buffer, and the batch is encoded straight into bytes.
public final class OTLPTracer: Tracer, Sendable {
    public typealias Span = OTLPSpan
    let exporter: SpanExporter
    private let ids = SamplingDraw()
    /// What each statement's span is called and carries, by its SQL text and call site.
    let statements = StatementSpans()

    init(exporter: SpanExporter) { self.exporter = exporter }

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String,
        context: @autoclosure () -> ServiceContext,
        ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant,
        function: String,
        file fileID: String,
        line: UInt
    ) -> OTLPSpan {
        var context = context()
        let parent = context[ActiveSpanKey.self]?.identity
        let identity =
            parent.map {
                SpanIdentity(traceHigh: $0.traceHigh, traceLow: $0.traceLow, spanID: nextID(), sampled: $0.sampled, traceState: $0.traceState)
            }
            ?? SpanIdentity(traceHigh: nextID(), traceLow: nextID(), spanID: nextID(), sampled: true, traceState: nil)
        // Parent-based: under a caller's unsampled trace the span records nothing, and its
        // context passes the decision on. One write to the context: each costs a copy of its
        // storage and a boxed value (callgrind: 2.6 k instructions a write).
        context[ActiveSpanKey.self] = ActiveSpan(identity: identity, recorder: identity.sampled ? self : nil)
        guard identity.sampled else { return OTLPSpan(context: context, recording: nil) }
        let recording = OTLPSpan.Recording(
            identity: identity,
            parentSpanID: parent?.spanID,
            kind: kind,
            start: instant().nanosecondsSinceEpoch,
            name: operationName,
            exporter: exporter
        )
        return OTLPSpan(context: context, recording: recording)
    }

    public func forceFlush() { exporter.flushSoon() }

    /// W3C Trace Context: `traceparent` as `TraceParent` reads it, `tracestate` up to 512 bytes.
    public func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {
        guard let value = extractor.extract(key: "traceparent", from: carrier), let parent = TraceParent(value),
            let high = UInt64(parent.traceID.prefix(16), radix: 16), let low = UInt64(parent.traceID.suffix(16), radix: 16),
            let span = UInt64(parent.parentID, radix: 16)
        else { return }
        let state = extractor.extract(key: "tracestate", from: carrier).flatMap { $0.isEmpty || $0.utf8.count > 512 ? nil : $0 }
        context[ActiveSpanKey.self] = ActiveSpan(
            identity: SpanIdentity(traceHigh: high, traceLow: low, spanID: span, sampled: parent.sampled, traceState: state),
            recorder: nil
        )
    }

    public func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        guard let identity = context[ActiveSpanKey.self]?.identity else { return }
        injector.inject(identity.traceparent, forKey: "traceparent", into: &carrier)
        if let state = identity.traceState { injector.inject(state, forKey: "tracestate", into: &carrier) }
    }

    private func nextID() -> UInt64 {
        let id = ids.next()
        return id == 0 ? 1 : id
    }
}

/// Who a span is: its trace, its own id, whether its trace is kept, and the caller's
/// `tracestate`. Carried in the `ServiceContext` of everything that runs inside the span.
public struct SpanIdentity: Sendable, Hashable {
    public var traceHigh: UInt64
    public var traceLow: UInt64
    public var spanID: UInt64
    public var sampled: Bool
    public var traceState: String?

    public var traceIDHex: String { RequestIDs.hex(traceHigh) + RequestIDs.hex(traceLow) }
    public var spanIDHex: String { RequestIDs.hex(spanID) }
    public var traceparent: String { "00-\(RequestIDs.hex(traceHigh))\(RequestIDs.hex(traceLow))-\(RequestIDs.hex(spanID))-\(sampled ? "01" : "00")" }
}

/// The span under way in a `ServiceContext`: who it is and, when it records, its tracer, so that
/// its children are made by the same tracer directly (`Telemetry.startSpan`), not found again in
/// `InstrumentationSystem` by a dynamic cast.
struct ActiveSpan: Sendable {
    var identity: SpanIdentity
    var recorder: OTLPTracer?
}

enum ActiveSpanKey: ServiceContextKey {
    typealias Value = ActiveSpan
}

/// A span of `OTLPTracer`. One that does not record (its trace is not kept) only carries its
/// context. One that records keeps what is set on it under a lock and, when it ends, hands the
/// finished span to the exporter; what is set after that is ignored.
public final class OTLPSpan: Tracing.Span, Sendable {
    public let context: ServiceContext
    private let recording: Recording?

    init(context: ServiceContext, recording: Recording?) {
        self.context = context
        self.recording = recording
    }

    final class Recording: Sendable {
        let identity: SpanIdentity
        let parentSpanID: UInt64?
        let kind: SpanKind
        let start: UInt64
        let exporter: SpanExporter
        let state: Mutex<State>

        struct State {
            var name: String
            var attributes = SpanAttributes()
            var events: [SpanEvent] = []
            var links: [FinishedSpan.Link] = []
            var status: SpanStatus?
            var ended = false
        }

        init(identity: SpanIdentity, parentSpanID: UInt64?, kind: SpanKind, start: UInt64, name: String, exporter: SpanExporter) {
            self.identity = identity
            self.parentSpanID = parentSpanID
            self.kind = kind
            self.start = start
            self.exporter = exporter
            state = Mutex(State(name: name))
        }
    }

    public var isRecording: Bool { recording != nil }

    public var operationName: String {
        get { recording?.state.withLock { $0.name } ?? "" }
        set { recording?.state.withLock { if !$0.ended { $0.name = newValue } } }
    }

    public var attributes: SpanAttributes {
        get { recording?.state.withLock { $0.attributes } ?? [:] }
        set { recording?.state.withLock { if !$0.ended { $0.attributes = newValue } } }
        // `span.attributes["key"] = value` through get and set would copy the whole dictionary for
        // each attribute (the getter's copy shares its storage): the value is moved out, changed in
        // place and moved back. A span is changed by the task that runs it.
        _modify {
            var value =
                recording?.state.withLock { s in
                    let taken = s.attributes
                    s.attributes = SpanAttributes()
                    return taken
                } ?? SpanAttributes()
            defer { recording?.state.withLock { if !$0.ended { $0.attributes = value } } }
            yield &value
        }
    }

    public func setStatus(_ status: SpanStatus) {
        recording?.state.withLock { s in
            // OpenTelemetry: Ok is final, and Error is not replaced by Unset.
            guard !s.ended, s.status?.code != .ok else { return }
            s.status = status
        }
    }

    public func addEvent(_ event: SpanEvent) {
        recording?.state.withLock { if !$0.ended, $0.events.count < 128 { $0.events.append(event) } }
    }

    /// An `exception` event with the error's type only: an error's description may hold a bind
    /// value, a token or an e-mail, and no span carries those.
    public func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant) {
        guard recording != nil else { return }
        var attributes = attributes
        attributes["exception.type"] = String(reflecting: type(of: error))
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: attributes))
    }

    public func addLink(_ link: SpanLink) {
        guard let identity = link.context[ActiveSpanKey.self]?.identity else { return }
        recording?.state.withLock { if !$0.ended, $0.links.count < 128 { $0.links.append(.init(identity: identity, attributes: link.attributes)) } }
    }

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        guard let recording else { return }
        let end = instant().nanosecondsSinceEpoch
        let state = recording.state.withLock { s -> State? in
            guard !s.ended else { return nil }
            s.ended = true
            return s
        }
        guard let state else { return }
        recording.exporter.append(
            FinishedSpan(
                identity: recording.identity,
                parentSpanID: recording.parentSpanID,
                name: state.name,
                kind: recording.kind,
                start: recording.start,
                end: end,
                attributes: state.attributes,
                events: state.events,
                links: state.links,
                status: state.status
            )
        )
    }

    typealias State = Recording.State
}

/// What an ended span left to export.
struct FinishedSpan: Sendable {
    struct Link: Sendable {
        let identity: SpanIdentity
        let attributes: SpanAttributes
    }
    let identity: SpanIdentity
    let parentSpanID: UInt64?
    let name: String
    let kind: SpanKind
    let start: UInt64
    let end: UInt64
    let attributes: SpanAttributes
    let events: [SpanEvent]
    let links: [Link]
    let status: SpanStatus?
}

/// A statement's span name and attributes, worked out once per SQL text and call site: reading
/// the text (`SQLSummary`, character by character) and building the attributes cost more than
/// the rest of the span. The services' statements are a fixed set of texts (values are bound
/// parameters), so the table stays small; it is emptied if it ever reaches 4,096 entries.
final class StatementSpans: Sendable {
    struct Key: Hashable {
        let sql: String?
        let file: String
        let line: Int
    }
    struct Description: Sendable {
        let name: String
        let attributes: SpanAttributes
    }
    private let known = Mutex<[Key: Description]>([:])

    /// `sql` nil: a transaction's span.
    func describe(sql: String?, file: String, line: Int) -> Description {
        let key = Key(sql: sql, file: file, line: line)
        if let found = known.withLock({ $0[key] }) { return found }
        var attributes = SQLSummary.attributes(file: file, line: line)
        var name = "transaction"
        if let sql {
            let summary = SQLSummary(sql)
            attributes["db.operation.name"] = summary.operation
            attributes["db.collection.name"] = summary.table
            name = summary.name
        }
        let description = Description(name: name, attributes: attributes)
        known.withLock { table in
            if table.count >= 4096 { table.removeAll() }
            table[key] = description
        }
        return description
    }
}

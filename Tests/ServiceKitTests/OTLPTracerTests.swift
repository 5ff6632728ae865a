import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import ServiceContextModule
import TestSupport
import Tracing
import XCTest

@testable import ServiceKit

/// #49: the tracer and its exporter, checked by the reference reader of OTLP: the local
/// collector (`deploy/local/otlp_receiver.py`) decodes each export with opentelemetry-proto's
/// own protobuf classes and writes the spans it read.
final class OTLPTracerTests: XCTestCase {
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    struct Failure: Error {}

    func testSpansReachTheCollectorWithTheirParentsLinksAndAttributes() async throws {
        let port = try TestEnvironment.freePort()
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("spans-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: out) }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../deploy/local/otlp_receiver.py")
        let receiver = try ChildProcess(TestEnvironment.python, [script.standardized.path, "\(port)", out.path])
        defer { receiver.stop() }
        try await waitForListener(port: port)

        let settings = SpanExporter.settings(
            service: "test-service",
            environment: EnvironmentVariables([
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(port)/",
                "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test,service.name=not-this",
            ])
        )
        let exporter = SpanExporter(settings: settings, logger: Logger(label: "test"))
        defer { exporter.close() }
        let tracer = OTLPTracer(exporter: exporter)

        var callerContext = ServiceContext.topLevel
        tracer.extract(["traceparent": caller, "tracestate": "vendor=abc"], into: &callerContext, using: DictionaryCarrier())
        let server = tracer.startSpan("GET", context: callerContext, ofKind: .server)
        XCTAssertTrue(server.isRecording)
        server.attributes["http.route"] = "/things/{id}"
        server.attributes["http.response.status_code"] = 200
        server.attributes["ratio"] = 0.25
        server.attributes["cached"] = true
        server.attributes["tags"] = ["a", "b"]
        // Longer than 127 bytes: its length takes two bytes on the wire.
        server.attributes["long"] = String(repeating: "é", count: 200)
        // Through the context, as the services make their children.
        let child = ServiceContext.$current.withValue(server.context) { () -> any Span in
            XCTAssertTrue(Telemetry.isRecording)
            return Telemetry.startSpan("SELECT users", ofKind: .client)
        }
        // Statements and transactions, as DatabasePool makes them: the second statement's
        // description comes from the tracer's table, and says the same.
        let statements = ServiceContext.$current.withValue(server.context) {
            (0..<2).compactMap { _ in Telemetry.statementSpan("SELECT balance FROM credit_balances WHERE app_id = $1", file: "Store/X.swift", line: 7)
            }
                + [Telemetry.statementSpan(nil, file: "Workflows/Y.swift", line: 9)].compactMap { $0 }
        }
        XCTAssertEqual(statements.count, 3)
        for span in statements { span.end() }
        XCTAssertNil(Telemetry.statementSpan("SELECT 1", file: "Z.swift", line: 1), "outside a recording span, no statement span")
        child.attributes["db.operation.name"] = "SELECT"
        child.recordError(Failure())
        child.setStatus(SpanStatus(code: .error))
        child.end()
        let job = tracer.startSpan("job push", context: .topLevel, ofKind: .consumer)
        job.addLink(SpanLink(context: server.context, attributes: ["why": "later"]))
        job.end()
        server.operationName = "GET /things/{id}"
        server.end()
        server.attributes["after.end"] = "ignored"
        server.end()

        // Under a caller's unsampled trace nothing records; its context passes the decision on.
        var unsampled = ServiceContext.topLevel
        tracer.extract(["traceparent": String(caller.dropLast(2)) + "00"], into: &unsampled, using: DictionaryCarrier())
        let quiet = tracer.startSpan("GET", context: unsampled, ofKind: .server)
        XCTAssertFalse(quiet.isRecording)
        var passed: [String: String] = [:]
        tracer.inject(quiet.context, into: &passed, using: DictionaryCarrier())
        let parsed = try XCTUnwrap(passed["traceparent"].flatMap(TraceParent.init))
        XCTAssertEqual(parsed.traceID, "4bf92f3577b34da6a3ce929d0e0e4736")
        XCTAssertFalse(parsed.sampled)
        XCTAssertNotEqual(parsed.parentID, "00f067aa0ba902b7", "the span's own id is passed on")
        quiet.end()

        await exporter.exportWaiting()
        let spans = try String(contentsOf: out, encoding: .utf8).split(separator: "\n").map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        XCTAssertEqual(spans.count, 6, "\(spans)")
        let byName = Dictionary(spans.map { ($0["name"] as? String ?? "", $0) }) { first, _ in first }
        let selects = spans.filter { $0["name"] as? String == "SELECT credit_balances" }
        XCTAssertEqual(selects.count, 2)
        for select in selects {
            let a = try XCTUnwrap(select["attributes"] as? [String: Any])
            XCTAssertEqual(a["db.system.name"] as? String, "postgresql")
            XCTAssertEqual(a["db.operation.name"] as? String, "SELECT")
            XCTAssertEqual(a["db.collection.name"] as? String, "credit_balances")
            XCTAssertEqual(a["code.file.path"] as? String, "Store/X.swift")
            XCTAssertEqual((a["code.line.number"] as? NSNumber)?.intValue, 7)
            XCTAssertEqual(a.count, 5, "never the text or a value: \(a)")
        }
        let transaction = try XCTUnwrap(byName["transaction"])
        XCTAssertEqual((transaction["attributes"] as? [String: Any])?["code.file.path"] as? String, "Workflows/Y.swift")
        XCTAssertNil((transaction["attributes"] as? [String: Any])?["db.operation.name"])
        let s = try XCTUnwrap(byName["GET /things/{id}"])
        XCTAssertEqual(s["service"] as? String, "test-service")
        XCTAssertEqual(s["trace_id"] as? String, "4bf92f3577b34da6a3ce929d0e0e4736")
        XCTAssertEqual(s["parent_span_id"] as? String, "00f067aa0ba902b7")
        XCTAssertEqual(s["kind"] as? String, "server")
        XCTAssertEqual(s["trace_state"] as? String, "vendor=abc")
        XCTAssertEqual(s["status"] as? String, "unset")
        let attributes = try XCTUnwrap(s["attributes"] as? [String: Any])
        XCTAssertEqual(attributes["http.route"] as? String, "/things/{id}")
        XCTAssertEqual((attributes["http.response.status_code"] as? NSNumber)?.intValue, 200)
        XCTAssertEqual(attributes["ratio"] as? Double, 0.25)
        XCTAssertEqual(attributes["cached"] as? Bool, true)
        XCTAssertEqual(attributes["tags"] as? [String], ["a", "b"])
        XCTAssertEqual(attributes["long"] as? String, String(repeating: "é", count: 200))
        XCTAssertNil(attributes["after.end"])
        let start = try XCTUnwrap((s["start_ns"] as? NSNumber)?.uint64Value)
        let end = try XCTUnwrap((s["end_ns"] as? NSNumber)?.uint64Value)
        XCTAssertLessThanOrEqual(start, end)
        XCTAssertGreaterThan(start, 1_700_000_000 * 1_000_000_000, "nanoseconds since 1970")

        let c = try XCTUnwrap(byName["SELECT users"])
        XCTAssertEqual(c["trace_id"] as? String, "4bf92f3577b34da6a3ce929d0e0e4736")
        XCTAssertEqual(c["parent_span_id"] as? String, s["span_id"] as? String)
        XCTAssertEqual(c["kind"] as? String, "client")
        XCTAssertEqual(c["status"] as? String, "error")
        let events = try XCTUnwrap(c["events"] as? [[String: Any]])
        XCTAssertEqual(events.first?["name"] as? String, "exception")
        XCTAssertEqual((events.first?["attributes"] as? [String: Any])?["exception.type"] as? String, "ServiceKitTests.OTLPTracerTests.Failure")

        let j = try XCTUnwrap(byName["job push"])
        XCTAssertNotEqual(j["trace_id"] as? String, "4bf92f3577b34da6a3ce929d0e0e4736", "a job run starts its own trace")
        XCTAssertTrue(j["parent_span_id"] is NSNull)
        XCTAssertEqual(j["kind"] as? String, "consumer")
        let links = try XCTUnwrap(j["links"] as? [[String: Any]])
        XCTAssertEqual(links.count, 1)
        XCTAssertEqual(links.first?["trace_id"] as? String, "4bf92f3577b34da6a3ce929d0e0e4736")
        XCTAssertEqual(links.first?["span_id"] as? String, s["span_id"] as? String)
        XCTAssertEqual((links.first?["attributes"] as? [String: Any])?["why"] as? String, "later")
    }

    /// A request's server span, as `TracingMiddleware` makes it: named by the route's template
    /// (never the raw path, which may hold ids), with the HTTP server conventions as attributes
    /// and the request id of the answer; a request whose trace is not kept makes no span, and
    /// what leaves it is flagged not sampled.
    func testTheServerSpanCarriesTheRouteTemplateAndStatus() async throws {
        for (ratio, kept) in [(1.0, true), (0.0, false)] {
            let exporter = SpanExporter(
                settings: SpanExporter.settings(
                    service: "test-service",
                    environment: EnvironmentVariables(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"])
                ),
                logger: Logger(label: "test")
            )
            defer { exporter.close() }
            let tracer = OTLPTracer(exporter: exporter)
            let telemetry = TelemetryBackend(exporter: exporter, sampling: TraceSampling(ratio: ratio, followsCaller: true), tracer: tracer)
            let router = Router(context: ServiceRequestContext.self)
            router.add(middleware: TracingMiddleware(telemetry)).add(middleware: RequestIDMiddleware())
            router.get("things/:id") { _, _ in
                // Whether the request records, the span its context carries, what leaves it.
                "\(Telemetry.isRecording) \(ServiceContext.current?[ActiveSpanKey.self]?.identity.traceparent ?? "none") \(Telemetry.currentTraceparent() ?? "none")"
            }
            try await Application(router: router).test(.router) { client in
                let (body, requestID) = try await client.execute(uri: "/things/secret-42?token=t0ken", method: .get) { response in
                    XCTAssertEqual(response.status, .ok)
                    return (String(buffer: response.body), response.headers[.xRequestID])
                }
                let spans = exporter.waitingSpans
                guard kept else {
                    XCTAssertTrue(spans.isEmpty, "an unkept request makes no span")
                    XCTAssertTrue(body.hasPrefix("false none 00-") && body.hasSuffix("-00"), body)
                    return
                }
                XCTAssertEqual(spans.count, 1)
                let span = try XCTUnwrap(spans.first)
                XCTAssertEqual(span.name, "GET /things/{id}")
                XCTAssertEqual(span.kind, .server)
                XCTAssertNil(span.parentSpanID)
                XCTAssertNil(span.status)
                XCTAssertTrue(body.hasPrefix("true \(span.identity.traceparent) "), body)
                XCTAssertEqual(span.attributes.get("http.route"), .string("/things/{id}"))
                XCTAssertEqual(span.attributes.get("http.request.method"), .string("GET"))
                XCTAssertEqual(span.attributes.get("http.response.status_code"), .int64(200))
                XCTAssertEqual(span.attributes.get("url.scheme"), .string("http"))
                XCTAssertEqual(span.attributes.get("request_id"), .string(try XCTUnwrap(requestID)))
                var values: [String] = []
                // swift-format-ignore: ReplaceForEachWithForLoop
                // SpanAttributes is not a Sequence.
                span.attributes.forEach { _, value in values.append("\(value)") }
                XCTAssertEqual(values.count, 5)
                XCTAssertFalse(values.contains { $0.contains("secret-42") || $0.contains("t0ken") }, "\(values)")
            }
        }
    }

    /// A span never waits for the collector: beyond the queue's bound it is dropped and counted.
    func testAFullQueueDropsSpansAndCountsThem() {
        let settings = SpanExporter.settings(
            service: "test-service",
            environment: EnvironmentVariables(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_MAX_QUEUE_SIZE": "4"])
        )
        let exporter = SpanExporter(settings: settings, logger: Logger(label: "test"))
        defer { exporter.close() }
        let tracer = OTLPTracer(exporter: exporter)
        for _ in 0..<10 { tracer.startSpan("GET", context: .topLevel, ofKind: .server).end() }
        XCTAssertEqual(exporter.waiting.spans, 4)
        XCTAssertEqual(exporter.waiting.dropped, 6)
    }

    /// The standard variables, read as the OpenTelemetry SDKs read them.
    func testTheExportIsConfiguredByTheStandardVariables() {
        let table: [([String: String], String, [String], Duration, Int)] = [
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"], "http://collector:4318/v1/traces", [], .seconds(10), 512),
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"], "http://collector:4318/v1/traces", [], .seconds(10), 512),
            (
                ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/otlp/spans"],
                "https://b/otlp/spans", [], .seconds(10), 512
            ),
            (
                [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%3Dcret, x-team = blue,broken",
                    "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64",
                ], "http://a/v1/traces", ["api-key: s=cret", "x-team: blue"], .milliseconds(2500), 64
            ),
            (
                [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=2",
                    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "100", "OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64",
                ], "http://a/v1/traces", ["b: 2"], .milliseconds(100), 10
            ),
        ]
        for (env, url, headers, timeout, batch) in table {
            let s = SpanExporter.settings(service: "x-service", environment: EnvironmentVariables(env))
            XCTAssertEqual(s.url, url, "\(env)")
            XCTAssertEqual(s.headers.map { "\($0.0): \($0.1)" }, headers, "\(env)")
            XCTAssertEqual(s.timeout, timeout, "\(env)")
            XCTAssertEqual(s.maxBatch, batch, "the batch is never larger than the queue: \(env)")
            XCTAssertEqual(s.resource.first.map { "\($0.0)=\($0.1)" }, "service.name=x-service")
        }
        let named = SpanExporter.settings(service: "x-service", environment: EnvironmentVariables(["OTEL_SERVICE_NAME": "quiz-ads"]))
        XCTAssertEqual(named.resource.first.map { "\($0.0)=\($0.1)" }, "service.name=quiz-ads")
    }

    private func waitForListener(port: Int) async throws {
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        for _ in 0..<100 {
            if (try? await client.send(ServiceKit.HTTPRequest(url: "http://127.0.0.1:\(port)/", timeout: .seconds(1)))) != nil { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTFail("the collector did not listen on \(port)")
    }
}

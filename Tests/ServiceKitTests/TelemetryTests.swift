import Foundation
import ServiceContextModule
import XCTest

@testable import ServiceKit

/// #49: the pure parts of tracing (the stack's fault check follows a real trace end to end).
final class TelemetryTests: XCTestCase {
    /// A client's `traceparent` is followed only when the W3C Trace Context reads it as valid;
    /// anything else starts a new trace (and never fails the request).
    func testTraceparentIsReadAsTheSpecificationSays() {
        let t = "4bf92f3577b34da6a3ce929d0e0e4736"
        let p = "00f067aa0ba902b7"
        let valid: [(String, Bool)] = [
            ("00-\(t)-\(p)-01", true), ("00-\(t)-\(p)-00", false), ("00-\(t)-\(p)-03", true),
            // A later version may append fields; its first four are read as version 00's.
            ("01-\(t)-\(p)-01-extra", true),
        ]
        for (value, sampled) in valid {
            let parsed = TraceParent(value)
            XCTAssertEqual(parsed?.traceID, t, value)
            XCTAssertEqual(parsed?.parentID, p, value)
            XCTAssertEqual(parsed?.sampled, sampled, value)
        }
        let invalid = [
            "", "00", "00-\(t)-\(p)", "00-\(t)-\(p)-01-extra", "ff-\(t)-\(p)-01", "00-\(t.uppercased())-\(p)-01",
            "00-\(String(repeating: "0", count: 32))-\(p)-01", "00-\(t)-\(String(repeating: "0", count: 16))-01",
            "00-\(t)-zzzzzzzzzzzzzzzz-01", "00-\(t.dropLast())-\(p)-01", "00-\(t)-\(p)-1", "0x-\(t)-\(p)-01", "00_\(t)_\(p)_01",
            "00-\(t)-\(p)-01" + String(repeating: "x", count: 2000),
        ]
        for value in invalid { XCTAssertNil(TraceParent(value), value) }
    }

    /// A statement's span names its operation and first table, never its text or values.
    func testStatementsAreSummarisedByOperationAndTable() {
        let table: [(String, String, String?)] = [
            ("SELECT balance FROM credit_balances WHERE app_id = $1", "SELECT", "credit_balances"),
            ("INSERT INTO outbox (target_service, method) VALUES ($1, $2) RETURNING id", "INSERT", "outbox"),
            ("UPDATE outbox SET attempts = attempts + 1 WHERE id IN (SELECT id FROM outbox)", "UPDATE", "outbox"),
            ("DELETE FROM jobs WHERE status = 'done'", "DELETE", "jobs"),
            ("select count(*) from subscription.access_logs", "SELECT", "subscription.access_logs"),
            ("WITH r AS (DELETE FROM rewards RETURNING id) SELECT count(*) FROM r", "WITH", "rewards"),
            ("SELECT access_log_insert($1, $2)", "SELECT", nil),
            ("SELECT x FROM (SELECT 1) s", "SELECT", nil),
            ("SELECT * FROM \"Quoted\" WHERE a = 'FROM secrets'", "SELECT", "Quoted"),
            ("  BEGIN", "BEGIN", nil), ("COMMIT", "COMMIT", nil), ("", "SQL", nil),
            // A literal never becomes the table.
            ("SELECT 'INTO users' , 1", "SELECT", nil),
        ]
        for (sql, operation, table) in table {
            let summary = SQLSummary(sql)
            XCTAssertEqual(summary.operation, operation, sql)
            XCTAssertEqual(summary.table, table, sql)
            XCTAssertEqual(summary.name, table.map { "\(operation) \($0)" } ?? operation, sql)
        }
    }

    /// Tracing is asked for by an endpoint only, and switched off by the standard variables.
    func testTracingIsOnOnlyWithAnEndpoint() {
        let table: [([String: String], Bool)] = [
            ([:], false), (["OTEL_EXPORTER_OTLP_ENDPOINT": ""], false),
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"], true),
            (["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"], true),
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"], false),
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"], false),
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "otlp"], true),
        ]
        for (values, on) in table { XCTAssertEqual(Telemetry.isRequested(EnvironmentVariables(values)), on, "\(values)") }
    }

    /// The sampler's two standard variables, as the OpenTelemetry SDK configuration reads them.
    func testTheSamplerIsReadFromTheStandardVariables() {
        let table: [(String?, String?, Double, Bool)] = [
            (nil, nil, 1, true), ("parentbased_traceidratio", "0.01", 0.01, true), ("parentbased_traceidratio", nil, 1, true),
            ("traceidratio", "0.25", 0.25, false), ("always_on", "0.5", 1, false), ("always_off", nil, 0, false),
            ("parentbased_always_on", nil, 1, true), ("parentbased_always_off", "1", 0, true), (" ParentBased_TraceIdRatio ", " 0.5 ", 0.5, true),
            // A ratio outside 0...1 or unreadable is 1.0; an unknown sampler is the default.
            ("parentbased_traceidratio", "1.5", 1, true), ("parentbased_traceidratio", "-0.1", 1, true), ("traceidratio", "one", 1, false),
            ("parentbased_traceidratio", "nan", 1, true), ("jaeger_remote", "0.2", 0.2, true), ("", "0", 0, true),
        ]
        for (sampler, argument, ratio, follows) in table {
            let sampling = TraceSampling(sampler: sampler, argument: argument)
            XCTAssertEqual(sampling, TraceSampling(ratio: ratio, followsCaller: follows), "\(sampler ?? "nil") \(argument ?? "nil")")
        }
    }

    /// A request's trace is kept by the caller's decision when it is followed, otherwise by
    /// the draw against the ratio; 0 keeps none and 1 keeps all.
    func testARequestIsKeptByItsCallerOrByTheRatio() {
        let kept = TraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")!
        let unkept = TraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")!
        let percent = TraceSampling(ratio: 0.01, followsCaller: true)
        let table: [(TraceSampling, TraceParent?, UInt64, Bool)] = [
            (percent, nil, 0, true), (percent, nil, UInt64.max / 100 - 1_000_000, true), (percent, nil, UInt64.max / 100 + 1_000_000, false),
            (percent, nil, .max, false), (percent, kept, .max, true), (percent, unkept, 0, false),
            (TraceSampling(ratio: 0.01, followsCaller: false), kept, .max, false),
            (TraceSampling(ratio: 0.01, followsCaller: false), unkept, 0, true),
            (TraceSampling(ratio: 1, followsCaller: true), nil, .max, true), (TraceSampling(ratio: 1, followsCaller: true), unkept, 0, false),
            (TraceSampling(ratio: 0, followsCaller: true), nil, 0, false), (TraceSampling(ratio: 0, followsCaller: true), kept, .max, true),
            (TraceSampling(ratio: 0, followsCaller: false), kept, 0, false), (TraceSampling(ratio: 1, followsCaller: false), unkept, .max, true),
        ]
        for (i, (sampling, caller, draw, keeps)) in table.enumerated() {
            XCTAssertEqual(sampling.keeps(caller: caller, draw: draw), keeps, "row \(i)")
        }
        // Over many draws of the middleware's generator the share kept is the ratio, and its
        // draws spread over the whole range (high and low halves alike).
        let draw = SamplingDraw()
        for ratio in [0.01, 0.5] {
            let sampling = TraceSampling(ratio: ratio, followsCaller: true)
            let share = Double((0..<100_000).filter { _ in sampling.keeps(caller: nil, draw: draw.next()) }.count) / 100_000
            XCTAssertEqual(share, ratio, accuracy: ratio / 5, "ratio \(ratio)")
        }
        let draws = (0..<10_000).map { _ in draw.next() }
        XCTAssertEqual(Set(draws).count, draws.count, "no repeats")
        XCTAssertEqual(Double(draws.filter { $0 >> 63 == 1 }.count) / 10_000, 0.5, accuracy: 0.03)
        XCTAssertEqual(Double(draws.filter { $0 & 1 == 1 }.count) / 10_000, 0.5, accuracy: 0.03)
    }

    /// A request whose new trace is not kept has no ids until something leaves it: then a
    /// `traceparent` flagged not sampled, so that the next service does not draw again.
    func testAnUnkeptRequestPassesOnATraceparentFlaggedNotSampled() {
        var unkept = ServiceContext.topLevel
        unkept[UnkeptKey.self] = true
        let first = Telemetry.propagation(of: unkept)["traceparent"].flatMap(TraceParent.init)
        XCTAssertEqual(first?.sampled, false)
        XCTAssertNotEqual(first?.traceID, Telemetry.propagation(of: unkept)["traceparent"].flatMap(TraceParent.init)?.traceID)
        XCTAssertTrue(Telemetry.propagation(of: .topLevel).isEmpty, "outside any request nothing is passed on")
    }

    /// Outside a trace nothing is stored for a later link, and a stored value that is not a
    /// valid traceparent links to nothing.
    func testNothingIsCarriedOutsideATrace() {
        XCTAssertNil(Telemetry.currentTraceparent())
        XCTAssertFalse(Telemetry.isRecording)
        XCTAssertNil(Telemetry.stored(traceparent: nil))
        XCTAssertNil(Telemetry.stored(traceparent: "00-not-a-trace-01"))
        XCTAssertEqual(Telemetry.stored(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")?.kept, true)
        XCTAssertEqual(Telemetry.stored(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")?.kept, false)
    }
}

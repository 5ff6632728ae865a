import Foundation
import Logging
import WireTypes
import XCTest

@testable import ServiceKit

/// The log lines an operator's collector reads: one JSON object per line, every field where
/// it is expected, values escaped, numbers as numbers.
final class LogLinesTests: XCTestCase {
    let time = Date(timeIntervalSince1970: 1_795_412_345.678)

    func testAJSONLineIsOneObjectWithTheFieldsACollectorSearches() throws {
        let line = ServiceLogHandler.jsonLine(
            time: time,
            level: .info,
            service: "ads",
            message: "request",
            metadata: [
                "request_id": "abc", "route": "/ads/v1/ads/available", "status": "200", "duration_ms": "0.25",
                "app_id": .stringConvertible(UUID(uuidString: "6BA7B810-9DAD-11D1-80B4-00C04FD430C8")!.lowercasedString),
            ]
        )
        XCTAssertTrue(line.hasSuffix("}\n"))
        XCTAssertEqual(line.filter { $0 == "\n" }.count, 1, "one line")
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(object["time"] as? String, "2026-11-23T05:39:05.678Z")
        XCTAssertEqual(object["level"] as? String, "info")
        XCTAssertEqual(object["service"] as? String, "ads")
        XCTAssertEqual(object["message"] as? String, "request")
        XCTAssertEqual(object["request_id"] as? String, "abc")
        XCTAssertEqual(object["app_id"] as? String, "6ba7b810-9dad-11d1-80b4-00c04fd430c8")
        XCTAssertEqual(object["status"] as? Int, 200, "status is a number")
        XCTAssertEqual(object["duration_ms"] as? Double, 0.25, "duration is a number")
    }

    func testHostileTextCannotBreakTheLineOrForgeAField() throws {
        // A message or value with quotes, newlines and control characters stays one line, one value.
        let evil = "x\",\"level\":\"error\"}\n{\"forged\":1\u{01}\t\\"
        let line = ServiceLogHandler.jsonLine(
            time: time,
            level: .warning,
            service: "auth",
            message: evil,
            metadata: [
                "email": .string(evil), "status": "not-a-number",
                "nested": .dictionary(["list": .array([.string(evil), "2"])]),
            ]
        )
        XCTAssertEqual(line.filter { $0 == "\n" }.count, 1)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(object["message"] as? String, evil)
        XCTAssertEqual(object["email"] as? String, evil)
        XCTAssertEqual(object["level"] as? String, "warning")
        XCTAssertNil(object["forged"])
        XCTAssertEqual(object["status"] as? String, "not-a-number", "a non-number stays a string")
        XCTAssertEqual(((object["nested"] as? [String: Any])?["list"] as? [String])?.first, evil)
    }

    func testAMetadataKeyNamedLikeAFixedFieldDoesNotDuplicateIt() throws {
        let line = ServiceLogHandler.jsonLine(time: time, level: .error, service: "ads", message: "m", metadata: ["level": "debug", "service": "x"])
        XCTAssertEqual(line.components(separatedBy: "\"level\"").count, 2)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(object["level"] as? String, "error")
        XCTAssertEqual(object["service"] as? String, "ads")
    }

    func testTheTextFormatIsOneReadableLine() {
        let line = ServiceLogHandler.textLine(time: time, level: .info, service: "offline", message: "request", metadata: ["status": "200"])
        XCTAssertEqual(line, "2026-11-23T05:39:05.678Z info offline: request status=200\n")
    }

    func testTheFormatComesFromLOG_FORMATAndDefaultsToJSON() {
        XCTAssertEqual(ServiceConfig(service: .ads, environment: EnvironmentVariables(["LOG_FORMAT": "text"])).logFormat, .text)
        XCTAssertEqual(ServiceConfig(service: .ads, environment: EnvironmentVariables([:])).logFormat, .json)
    }

    func testMetadataKeepsTheLatestValueOfEachKeyAndCopiesStayApart() {
        var first = ServiceLogHandler(service: "ads", format: .json)
        first[metadataKey: "request_id"] = "r-1"
        first[metadataKey: "app_id"] = "a-1"
        var second = first
        second[metadataKey: "app_id"] = "a-2"
        second[metadataKey: "user_id"] = "u-2"
        second[metadataKey: "request_id"] = nil
        XCTAssertEqual(first.metadata, ["request_id": "r-1", "app_id": "a-1"], "a copy's sets do not reach the original")
        XCTAssertEqual(second.metadata, ["app_id": "a-2", "user_id": "u-2"])
        XCTAssertNil(second[metadataKey: "request_id"], "removed")
        XCTAssertEqual(second[metadataKey: "app_id"], "a-2")
        second[metadataKey: "request_id"] = "r-3"
        XCTAssertEqual(second[metadataKey: "request_id"], "r-3", "set again after removal")
        second.metadata = ["only": "this"]
        XCTAssertEqual(second.metadata, ["only": "this"])
        XCTAssertEqual(first.metadata, ["request_id": "r-1", "app_id": "a-1"])
    }

    func testAKeySetInALoopKeepsTheListBounded() {
        var handler = ServiceLogHandler(service: "ads", format: .json)
        handler[metadataKey: "job"] = "fixed"
        for i in 0..<1_000 { handler[metadataKey: "item"] = "\(i)" }
        XCTAssertEqual(handler.metadata, ["job": "fixed", "item": "999"])
        XCTAssertLessThanOrEqual(handler.depth, ServiceLogHandler.compactAt)
    }

    /// A logger keeps a handler of up to three words inline; a larger one is boxed and the box
    /// is copied with every metadata set on a copied logger (each request's).
    func testTheHandlerFitsInALoggerWithoutABox() {
        XCTAssertLessThanOrEqual(MemoryLayout<ServiceLogHandler>.size, 3 * MemoryLayout<Int>.size)
    }

    func testALoggersMetadataAndTheEventsAreOnTheLineButNotHummingbirdsOwnId() throws {
        var handler = ServiceLogHandler(service: "ads", format: .json)
        handler[metadataKey: "request_id"] = "r-1"
        handler[metadataKey: "hb.request.id"] = "internal"
        handler[metadataKey: "route"] = "/old"
        let line = handler.line(level: .info, message: "request", metadata: ["route": "/new"], time: time)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(object["request_id"] as? String, "r-1")
        XCTAssertEqual(object["route"] as? String, "/new", "the event's value wins")
        XCTAssertNil(object["hb.request.id"])
    }

    func testTheLowerCaseUUIDIsTheCanonicalForm() {
        for _ in 0..<1000 {
            let id = UUID()
            XCTAssertEqual(id.lowercasedString, id.uuidString.lowercased())
        }
    }

    /// The tenant check's parser reads what Foundation's does, and refuses what it refuses.
    func testTheHexUUIDParserAgreesWithFoundation() {
        for _ in 0..<1000 {
            let id = UUID()
            XCTAssertEqual(UUID(hexString: id.uuidString), id)
            XCTAssertEqual(UUID(hexString: id.lowercasedString), id)
        }
        let id = UUID().uuidString
        let bad = [
            "", String(id.dropLast()), id + "0", "{\(id)}", id.replacingOccurrences(of: "-", with: ""),
            String(id.prefix(8)) + "+" + id.dropFirst(9), "G" + id.dropFirst(), String(id.dropLast()) + "g",
            "00000000-0000-0000-0000-00000000000 ", "é0000000-0000-0000-0000-00000000000",
        ]
        for text in bad {
            XCTAssertNil(UUID(hexString: text), text)
            XCTAssertNil(UUID(uuidString: text), "Foundation accepts \(text)")
        }
    }

    func testAGeneratedRequestIdIs128BitsOfHexAndNeverRepeats() {
        let source = RequestIDs()
        let ids = (0..<10_000).map { _ in source.next() }
        XCTAssertEqual(Set(ids).count, ids.count)
        XCTAssertTrue(ids.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
        // Another replica (process) draws another prefix: its ids meet none of these.
        let other = (0..<10_000).map { _ in RequestIDs().next() }
        XCTAssertEqual(Set(ids + other).count, 20_000)
        // Counted from the low digits: the 256th id differs from the first in its last 4.
        XCTAssertEqual(RequestIDs.hex(256), "0000000000000100")
    }
}

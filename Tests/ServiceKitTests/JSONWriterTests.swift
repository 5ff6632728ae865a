import Foundation
import ServiceKit
import WireTypes
import XCTest

/// #45: the services' JSON is Foundation's (sorted keys, slashes unescaped, ISO-8601 dates) but
/// for UUIDs, which are written lower-case wherever they sit; both spellings are read back.
final class JSONWriterTests: XCTestCase {
    struct Inner: Codable, Equatable {
        var id: UUID
        var at: Date
        var note: String?
    }
    struct Shape: Codable, Equatable {
        var id: UUID
        var ids: [UUID]
        var byName: [String: UUID]
        var maybe: UUID?
        var absent: UUID?
        var inner: Inner
        var inners: [Inner]
        var json: JSONValue
        var text: String
        var numbers: [Double]
        var ints: [Int64]
        var flags: [Bool]
        var url: URL
        var data: Data
        enum CodingKeys: String, CodingKey {
            case id, ids
            case byName = "by_name"
            case maybe, absent, inner, inners, json, text, numbers, ints, flags, url, data
        }
    }

    static let foundation: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .iso8601
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }()

    static let sample: Shape = {
        let a = UUID(uuidString: "3B3D29C9-ACAA-468A-AE72-350295F7C244")!
        let b = UUID(uuidString: "9dfdf6be-0154-45b3-8589-9499cc3f9c51")!
        let at = Date(timeIntervalSince1970: 1_795_000_000)
        return Shape(
            id: a,
            ids: [a, b],
            byName: ["zeta": a, "alpha": b, "Beta": a, "_x": b, "é": a],
            maybe: b,
            absent: nil,
            inner: Inner(id: b, at: at, note: nil),
            inners: [Inner(id: a, at: at.addingTimeInterval(0.75), note: "q\"u/o\\te\n\t\u{1}")],
            json: .object(["b": .array([.int(1), .double(2.5), .null, .bool(false)]), "a": .string("x"), "n": .double(3.25)]),
            text: "caf\u{e9} \u{1F30D} </script> \u{7F}",
            numbers: [0, 1, -1, 0.1, 1.5, 1e-7, 123456789.125, 1e20, 1e21, -0.0, 3.0e-300, 2.5e300, 100, 0.30000000000000004],
            ints: [0, -1, Int64.max, Int64.min],
            flags: [true, false],
            url: URL(string: "https://example.com/a/b?c=d")!,
            data: Data([0, 1, 254, 255])
        )
    }()

    /// Every byte as Foundation writes it, once its upper-case UUIDs are lowered.
    func testTheSameBytesAsFoundationButForUUIDs() throws {
        let ours = String(decoding: try JSON.encoder.encode(Self.sample), as: UTF8.self)
        var theirs = String(decoding: try Self.foundation.encode(Self.sample), as: UTF8.self)
        for id in [Self.sample.id, Self.sample.maybe!] { theirs = theirs.replacingOccurrences(of: id.uuidString, with: id.lowercasedString) }
        XCTAssertEqual(ours, theirs)
        XCTAssertFalse(ours.contains("3B3D29C9"), "an upper-case UUID was written")
        XCTAssertTrue(ours.contains(#""id":"3b3d29c9-acaa-468a-ae72-350295f7c244""#))
    }

    /// Read back with the services' decoder: the same value (dates to the second, as written).
    func testWhatIsWrittenReadsBack() throws {
        var expected = Self.sample
        expected.inners[0].at = Date(timeIntervalSince1970: 1_795_000_000)
        let back = try JSON.decoder.decode(Shape.self, from: try JSON.encoder.encode(Self.sample))
        XCTAssertEqual(back, expected)
    }

    /// A value that encodes another view and then adds keys (the operator's campaign), top-level
    /// fragments, and a super-encoder all land where Foundation puts them.
    func testContainersAskedTwiceFragmentsAndSuperEncoders() throws {
        struct Twice: Encodable {
            func encode(to encoder: any Encoder) throws {
                try Inner(id: UUID(uuidString: "9DFDF6BE-0154-45B3-8589-9499CC3F9C51")!, at: Date(timeIntervalSince1970: 0), note: "n").encode(
                    to: encoder
                )
                var c = encoder.container(keyedBy: K.self)
                try c.encode([1, 2], forKey: .variants)
                try c.encodeNil(forKey: .none)
                // Through a container, as every Codable type encodes its fields. (A UUID encoding
                // itself straight into an encoder writes its own upper-case text, as a Date does
                // with Foundation's strategies: nothing in the services does that.)
                var sup = c.superEncoder(forKey: .sup).singleValueContainer()
                try sup.encode(UUID(uuidString: "9DFDF6BE-0154-45B3-8589-9499CC3F9C51")!)
            }
            enum K: String, CodingKey { case variants, none, sup }
        }
        let ours = String(decoding: try JSON.encoder.encode(Twice()), as: UTF8.self)
        XCTAssertEqual(
            ours,
            #"{"at":"1970-01-01T00:00:00Z","id":"9dfdf6be-0154-45b3-8589-9499cc3f9c51","none":null,"note":"n","sup":"9dfdf6be-0154-45b3-8589-9499cc3f9c51","variants":[1,2]}"#
        )
        XCTAssertEqual(
            String(decoding: try JSON.encoder.encode(UUID(uuidString: "9DFDF6BE-0154-45B3-8589-9499CC3F9C51")!), as: UTF8.self),
            #""9dfdf6be-0154-45b3-8589-9499cc3f9c51""#
        )
        XCTAssertEqual(String(decoding: try JSON.encoder.encode([String: Int]()), as: UTF8.self), "{}")
        XCTAssertEqual(String(decoding: try JSON.encoder.encode([Int]()), as: UTF8.self), "[]")
        XCTAssertThrowsError(try JSON.encoder.encode([Double.nan]), "NaN is not JSON")
    }

    /// Input takes either spelling.
    func testBothSpellingsAreRead() throws {
        struct Body: Decodable { var id: UUID }
        for text in ["3B3D29C9-ACAA-468A-AE72-350295F7C244", "3b3d29c9-acaa-468a-ae72-350295f7c244", "3b3d29c9-ACAA-468a-ae72-350295F7C244"] {
            XCTAssertEqual(try JSON.decoder.decode(Body.self, from: Data(#"{"id":"\#(text)"}"#.utf8)).id, Self.sample.id, text)
        }
    }
}

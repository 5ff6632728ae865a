import Foundation
import WireTypes

/// JSON as every service writes it (#45): keys sorted, slashes unescaped, dates ISO-8601 UTC to
/// the second, and every UUID lower-case (RFC 9562 §4). Foundation's `JSONEncoder` writes a UUID
/// as its `uuidString`, upper-case, so one id had two spellings across bodies (a webhook's `id`
/// against the deliveries' `event_id`); it has no strategy for UUIDs, hence this encoder. The
/// same bytes as Foundation's for everything else (JSONWriterTests compares the two).
public struct JSONWriter: Sendable {
    public init() {}

    public func encode<T: Encodable>(_ value: T) throws -> Data {
        let root = try TreeEncoder.node(for: value, codingPath: [])
        var out: [UInt8] = []
        out.reserveCapacity(256)
        try Self.write(root, into: &out)
        return Data(out)
    }

    // MARK: the tree

    /// What a value encodes to; objects and arrays are boxes so that a nested container, handed
    /// out before it is filled, writes into its parent.
    enum Node {
        case null
        case bool(Bool)
        case int(Int64)
        case uint(UInt64)
        case double(Double)
        case float(Float)
        case string(String)
        case array(ArrayBox)
        case object(ObjectBox)
    }
    final class ArrayBox { var items: [Node] = [] }
    final class ObjectBox { var pairs: [String: Node] = [:] }

    // MARK: writing

    static func write(_ node: Node, into out: inout [UInt8]) throws {
        switch node {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .uint(let u): out.append(contentsOf: String(u).utf8)
        case .double(let d): try number(d.isFinite, d.description, into: &out)
        case .float(let f): try number(f.isFinite, f.description, into: &out)
        case .string(let s): string(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, item) in a.items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                try write(item, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, key) in o.pairs.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                string(key, into: &out)
                out.append(UInt8(ascii: ":"))
                try write(o.pairs[key]!, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A number as Foundation writes it: Swift's shortest description, without a trailing `.0`.
    private static func number(_ finite: Bool, _ text: String, into out: inout [UInt8]) throws {
        guard finite else {
            throw EncodingError.invalidValue(text, .init(codingPath: [], debugDescription: "A JSON number must be finite"))
        }
        let utf8 = text.utf8
        if utf8.count > 2, text.hasSuffix(".0") { out.append(contentsOf: utf8.dropLast(2)) } else { out.append(contentsOf: utf8) }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    static func string(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// A date as the services write it (the `.iso8601` strategy's form).
    static func iso8601(_ date: Date) -> String { date.formatted(Self.dateStyle) }
    private static let dateStyle = Date.ISO8601FormatStyle(timeZone: TimeZone(secondsFromGMT: 0)!)
}

// MARK: the encoder

/// Builds the tree of one value. A value that asks twice for a keyed container gets the same
/// object (a view that encodes another view, then adds keys).
private final class TreeEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var storage: JSONWriter.Node?
    /// Where a super-encoder's single value goes (its parent's key or slot).
    let sink: ((JSONWriter.Node) -> Void)?

    init(codingPath: [any CodingKey], sink: ((JSONWriter.Node) -> Void)? = nil) {
        self.codingPath = codingPath
        self.sink = sink
    }

    func set(_ node: JSONWriter.Node) {
        storage = node
        sink?(node)
    }

    /// Type checks by metadata (cheap) before the general path: ids, dates and JSON values are
    /// the common nested values of the services' answers.
    static func node<T: Encodable>(for value: T, codingPath: [any CodingKey]) throws -> JSONWriter.Node {
        if T.self == UUID.self { return .string((value as! UUID).lowercasedString) }
        if T.self == Date.self { return .string(JSONWriter.iso8601(value as! Date)) }
        if T.self == JSONValue.self { return node(value as! JSONValue) }
        if T.self == String.self { return .string(value as! String) }
        if T.self == Int.self { return .int(Int64(value as! Int)) }
        if T.self == Bool.self { return .bool(value as! Bool) }
        if T.self == Double.self { return .double(value as! Double) }
        if T.self == URL.self { return .string((value as! URL).absoluteString) }
        if T.self == Data.self { return .string((value as! Data).base64EncodedString()) }
        let encoder = TreeEncoder(codingPath: codingPath)
        try value.encode(to: encoder)
        return encoder.storage ?? .object(JSONWriter.ObjectBox())
    }

    static func node(_ json: JSONValue) -> JSONWriter.Node {
        switch json {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(Int64(i))
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .array(let a):
            let box = JSONWriter.ArrayBox()
            box.items = a.map { node($0) }
            return .array(box)
        case .object(let o):
            let box = JSONWriter.ObjectBox()
            box.pairs.reserveCapacity(o.count)
            for (k, v) in o { box.pairs[k] = node(v) }
            return .object(box)
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let object: JSONWriter.ObjectBox
        if case .object(let existing)? = storage {
            object = existing
        } else {
            object = JSONWriter.ObjectBox()
            set(.object(object))
        }
        return KeyedEncodingContainer(KeyedContainer<Key>(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: JSONWriter.ArrayBox
        if case .array(let existing)? = storage {
            array = existing
        } else {
            array = JSONWriter.ArrayBox()
            set(.array(array))
        }
        return UnkeyedContainer(array: array, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleContainer(encoder: self) }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let object: JSONWriter.ObjectBox
    let codingPath: [any CodingKey]

    func put(_ node: JSONWriter.Node, _ key: Key) { object.pairs[key.stringValue] = node }

    mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { put(.double(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { put(.float(value), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { put(.uint(UInt64(value)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { put(.uint(UInt64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { put(.uint(UInt64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { put(.uint(UInt64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { put(.uint(value), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        put(try TreeEncoder.node(for: value, codingPath: codingPath + [key]), key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let box = JSONWriter.ObjectBox()
        put(.object(box), key)
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(object: box, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let box = JSONWriter.ArrayBox()
        put(.array(box), key)
        return UnkeyedContainer(array: box, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: "super") }
    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key.stringValue) }

    private func superEncoder(named name: String) -> any Encoder {
        let object = self.object
        object.pairs[name] = .object(JSONWriter.ObjectBox())
        return TreeEncoder(codingPath: codingPath, sink: { object.pairs[name] = $0 })
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let array: JSONWriter.ArrayBox
    let codingPath: [any CodingKey]
    var count: Int { array.items.count }

    func add(_ node: JSONWriter.Node) { array.items.append(node) }

    mutating func encodeNil() throws { add(.null) }
    mutating func encode(_ value: Bool) throws { add(.bool(value)) }
    mutating func encode(_ value: String) throws { add(.string(value)) }
    mutating func encode(_ value: Double) throws { add(.double(value)) }
    mutating func encode(_ value: Float) throws { add(.float(value)) }
    mutating func encode(_ value: Int) throws { add(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { add(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { add(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { add(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { add(.int(value)) }
    mutating func encode(_ value: UInt) throws { add(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { add(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { add(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { add(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { add(.uint(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        add(try TreeEncoder.node(for: value, codingPath: codingPath + [IndexKey(count)]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let box = JSONWriter.ObjectBox()
        let path = codingPath + [IndexKey(count)]
        add(.object(box))
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(object: box, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let box = JSONWriter.ArrayBox()
        let path = codingPath + [IndexKey(count)]
        add(.array(box))
        return UnkeyedContainer(array: box, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let array = self.array
        let index = array.items.count
        array.items.append(.object(JSONWriter.ObjectBox()))
        return TreeEncoder(codingPath: codingPath + [IndexKey(index)], sink: { array.items[index] = $0 })
    }
}

private struct SingleContainer: SingleValueEncodingContainer {
    let encoder: TreeEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() throws { encoder.set(.null) }
    mutating func encode(_ value: Bool) throws { encoder.set(.bool(value)) }
    mutating func encode(_ value: String) throws { encoder.set(.string(value)) }
    mutating func encode(_ value: Double) throws { encoder.set(.double(value)) }
    mutating func encode(_ value: Float) throws { encoder.set(.float(value)) }
    mutating func encode(_ value: Int) throws { encoder.set(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { encoder.set(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { encoder.set(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { encoder.set(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { encoder.set(.int(value)) }
    mutating func encode(_ value: UInt) throws { encoder.set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { encoder.set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { encoder.set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { encoder.set(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { encoder.set(.uint(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        encoder.set(try TreeEncoder.node(for: value, codingPath: encoder.codingPath))
    }
}

private struct IndexKey: CodingKey {
    var intValue: Int?
    var stringValue: String { "\(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}

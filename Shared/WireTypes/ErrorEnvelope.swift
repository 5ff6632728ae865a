import Foundation

/// The one error body of every service: `{"error": "snake_case_code", "message": "...", ...extra}`.
/// Extra fields (`attempts_remaining`, `retry_after`, `locked_until`, `can_link`...) sit at the
/// top level beside `error` and `message`, as the specification writes them.
public struct ErrorEnvelope: Codable, Sendable, Equatable {
    public var error: String
    public var message: String
    public var extra: [String: JSONValue]

    public init(error: String, message: String, extra: [String: JSONValue] = [:]) {
        self.error = error
        self.message = message
        self.extra = extra
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        error = try c.decode(String.self, forKey: Key("error"))
        message = try c.decodeIfPresent(String.self, forKey: Key("message")) ?? ""
        var extra: [String: JSONValue] = [:]
        for key in c.allKeys where key.stringValue != "error" && key.stringValue != "message" {
            extra[key.stringValue] = try c.decode(JSONValue.self, forKey: key)
        }
        self.extra = extra
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(error, forKey: Key("error"))
        try c.encode(message, forKey: Key("message"))
        for (k, v) in extra.sorted(by: { $0.key < $1.key }) where k != "error" && k != "message" {
            try c.encode(v, forKey: Key(k))
        }
    }
}

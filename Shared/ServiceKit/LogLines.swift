import Foundation
import Logging

/// How a service writes its log lines (`LOG_FORMAT`): one JSON object per line (the default,
/// for log collectors), or text for a person reading a terminal.
public enum LogFormat: String, Sendable {
    case json, text
}

/// The services' log handler: one line per event on standard error, written with one `write`.
///
/// Metadata is only stored when it is set and formatted when a line is written. (swift-log's
/// `StreamLogHandler` formats all of a logger's metadata every time one key is set, which was
/// 8 % of a cached read's CPU: the request id is set on every request, most of which log nothing.)
///
/// Every request sets three keys (request, app, user) on its own copy of the logger. Kept in a
/// dictionary, each set copied the logger's handler box and its dictionary (3 allocations and a
/// rehash, 3–4 % of a cached read, #35); kept as a shared list, a set adds one node in front,
/// and the handler (two references and a level) fits in the logger without a box of its own.
public struct ServiceLogHandler: LogHandler {
    /// What never changes per request, shared by every copy.
    final class Settings: Sendable {
        let service: String
        let format: LogFormat
        let metadataProvider: Logger.MetadataProvider?
        init(service: String, format: LogFormat, metadataProvider: Logger.MetadataProvider?) {
            self.service = service
            self.format = format
            self.metadataProvider = metadataProvider
        }
    }

    /// One metadata key set (nil: removed), in front of the keys set before it.
    final class Entry: Sendable {
        let key: String
        let value: Logger.Metadata.Value?
        let next: Entry?
        /// Entries in this list: past `compactAt` the list is folded into one entry per key, so
        /// a long-lived logger that sets a key in a loop stays bounded.
        let depth: Int
        init(key: String, value: Logger.Metadata.Value?, next: Entry?) {
            self.key = key
            self.value = value
            self.next = next
            depth = (next?.depth ?? 0) + 1
        }
    }
    static let compactAt = 32

    private var settings: Settings
    private var entries: Entry?
    public var logLevel: Logger.Level = .info

    public init(service: String, format: LogFormat) {
        settings = Settings(service: service, format: format, metadataProvider: nil)
    }

    var depth: Int { entries?.depth ?? 0 }
    var service: String { settings.service }
    var format: LogFormat { settings.format }

    public var metadataProvider: Logger.MetadataProvider? {
        get { settings.metadataProvider }
        set { settings = Settings(service: settings.service, format: settings.format, metadataProvider: newValue) }
    }

    /// The keys set, the latest value of each.
    public var metadata: Logger.Metadata {
        get {
            var all: Logger.Metadata = [:]
            var removed: Set<String> = []
            var entry = entries
            while let e = entry {
                if all[e.key] == nil && !removed.contains(e.key) {
                    if let value = e.value { all[e.key] = value } else { removed.insert(e.key) }
                }
                entry = e.next
            }
            return all
        }
        set {
            entries = nil
            for (key, value) in newValue.sorted(by: { $0.key < $1.key }) { entries = Entry(key: key, value: value, next: entries) }
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get {
            var entry = entries
            while let e = entry {
                if e.key == key { return e.value }
                entry = e.next
            }
            return nil
        }
        set {
            entries = Entry(key: key, value: newValue, next: entries)
            if entries!.depth > Self.compactAt { metadata = metadata }
        }
    }

    public func log(event: LogEvent) {
        var extra = event.metadata ?? [:]
        if let error = event.error, extra["error"] == nil { extra["error"] = .string("\(error)") }
        Self.writeLine(line(level: event.level, message: "\(event.message)", metadata: extra, time: Date()))
    }

    /// The line for one event: the logger's metadata, then the provider's, then the event's.
    func line(level: Logger.Level, message: String, metadata extra: Logger.Metadata, time: Date) -> String {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        all.merge(extra) { _, new in new }
        // Hummingbird's own id names nothing an operator can search for: the request id is the
        // gateway's (`request_id`, set by `RequestIDMiddleware`).
        all["hb.request.id"] = nil
        return format == .json
            ? Self.jsonLine(time: time, level: level, service: service, message: message, metadata: all)
            : Self.textLine(time: time, level: level, service: service, message: message, metadata: all)
    }

    /// `{"time":…,"level":…,"service":…,"message":…, then the metadata}`, keys sorted.
    /// `status` and `duration_ms` are numbers, so a collector can sum and compare them.
    static func jsonLine(time: Date, level: Logger.Level, service: String, message: String, metadata: Logger.Metadata) -> String {
        var out = "{\"time\":\"\(timestamp(time))\",\"level\":\"\(level.rawValue)\",\"service\":"
        appendQuoted(service, to: &out)
        out += ",\"message\":"
        appendQuoted(message, to: &out)
        for key in metadata.keys.sorted() where !["time", "level", "service", "message"].contains(key) {
            out += ","
            appendQuoted(key, to: &out)
            out += ":"
            appendValue(metadata[key]!, key: key, to: &out)
        }
        out += "}\n"
        return out
    }

    static func textLine(time: Date, level: Logger.Level, service: String, message: String, metadata: Logger.Metadata) -> String {
        var out = "\(timestamp(time)) \(level.rawValue) \(service): \(message)"
        for key in metadata.keys.sorted() { out += " \(key)=\(metadata[key]!)" }
        out += "\n"
        return out
    }

    static let numericKeys: Set<String> = ["status", "duration_ms"]

    static func appendValue(_ value: Logger.Metadata.Value, key: String?, to out: inout String) {
        switch value {
        case .string(let s):
            if let key, numericKeys.contains(key), Double(s) != nil { out += s } else { appendQuoted(s, to: &out) }
        case .stringConvertible(let c):
            appendValue(.string(c.description), key: key, to: &out)
        case .array(let values):
            out += "["
            for (i, v) in values.enumerated() {
                if i > 0 { out += "," }
                appendValue(v, key: nil, to: &out)
            }
            out += "]"
        case .dictionary(let dict):
            out += "{"
            for (i, k) in dict.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                appendQuoted(k, to: &out)
                out += ":"
                appendValue(dict[k]!, key: nil, to: &out)
            }
            out += "}"
        }
    }

    /// A JSON string literal (RFC 8259 escapes; control characters as \u00XX).
    static func appendQuoted(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// ISO-8601 UTC with milliseconds, without a formatter (called for every line).
    static func timestamp(_ date: Date) -> String {
        let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(ms / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ n: Int32, _ width: Int) -> String {
            let s = String(n)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(ms % 1000), 3))Z"
    }

    /// One `write` per line, so lines from concurrent tasks never interleave.
    static func writeLine(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                if n <= 0 {
                    if n < 0 && errno == EINTR { continue }
                    return
                }
                offset += n
            }
        }
    }
}

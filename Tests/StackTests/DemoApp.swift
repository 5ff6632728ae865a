import Foundation

/// The demo application `make test` created for the stack (`.data/demo.env`).
enum DemoApp {
    static func values() throws -> [String: String] {
        var values: [String: String] = [:]
        for line in try String(contentsOfFile: ".data/demo.env", encoding: .utf8).split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        return values
    }

    /// `X-App-ID`, `X-API-Key` and a JSON content type.
    static func tenantHeaders() throws -> [(String, String)] {
        let v = try values()
        return [("X-App-ID", v["APP_ID"] ?? ""), ("X-API-Key", v["API_KEY"] ?? ""), ("Content-Type", "application/json")]
    }
}

import Tracing

/// What a statement's span says of it (#49): its operation and the table it names first, read
/// from the SQL text, which is never recorded itself (OpenTelemetry's `db.query.summary`
/// shape: `SELECT access_logs`). Values are bound parameters in every statement here, but the
/// text can still hold literals, so only keywords and an identifier leave the process.
public struct SQLSummary: Equatable, Sendable {
    public let operation: String
    public let table: String?
    public var name: String { table.map { "\(operation) \($0)" } ?? operation }

    public init(_ sql: String) {
        let words = Self.words(sql)
        operation = words.first.map { $0.uppercased() } ?? "SQL"
        // The table an operation acts on: INSERT INTO t, UPDATE t, DELETE FROM t, SELECT … FROM t
        // (the first named: after a WITH, the CTE's). A subquery or a function call is not a table.
        let markers: Set<String> = ["INTO", "UPDATE", "FROM", "JOIN", "TABLE"]
        var found: String?
        for (i, word) in words.enumerated() where markers.contains(word.uppercased()) && i + 1 < words.count {
            let next = words[i + 1]
            if Self.isIdentifier(next), !["SELECT", "LATERAL", "ONLY"].contains(next.uppercased()) {
                found = next
                break
            }
        }
        table = found
    }

    /// Words and identifiers (letters, digits, `_`, `.`), with quoted identifiers kept whole,
    /// and string literals, comments and parenthesised groups' openings as separators.
    static func words(_ sql: String) -> [String] {
        var out: [String] = []
        var current = ""
        var inString = false
        for ch in sql {
            if inString {
                if ch == "'" { inString = false }
                continue
            }
            if ch == "'" {
                inString = true
                if !current.isEmpty {
                    out.append(current)
                    current = ""
                }
                continue
            }
            if ch.isLetter || ch.isNumber || ch == "_" || ch == "." || ch == "\"" {
                current.append(ch)
            } else {
                if !current.isEmpty {
                    out.append(current)
                    current = ""
                }
                if ch == "(" { out.append("(") }
            }
            if out.count > 64 { break }
        }
        if !current.isEmpty { out.append(current) }
        return out.map { $0.replacingOccurrences(of: "\"", with: "") }
    }

    static func isIdentifier(_ word: String) -> Bool {
        guard let first = word.first, first.isLetter || first == "_" else { return false }
        return word.count <= 63 * 2 + 1
    }

    /// The attributes every database span carries: the system and where in the code it ran.
    static func attributes(file: String, line: Int) -> SpanAttributes {
        var attributes = SpanAttributes()
        attributes["db.system.name"] = "postgresql"
        attributes["code.file.path"] = file
        attributes["code.line.number"] = line
        return attributes
    }
}

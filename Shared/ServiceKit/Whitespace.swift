import Foundation

extension StringProtocol {
    /// `trimmingCharacters(in: .whitespaces)`, without Foundation for what headers carry: an
    /// ASCII value is trimmed of spaces and tabs on its bytes (Foundation's bridge was 2 % of a
    /// content check, #35); anything else goes to Foundation, so the answer is the same.
    public var trimmingWhitespace: String {
        let text = Substring(self)
        let bytes = text.utf8
        guard bytes.allSatisfy({ $0 < 0x80 }) else { return text.trimmingCharacters(in: .whitespaces) }
        guard let first = bytes.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }),
            let last = bytes.lastIndex(where: { $0 != 0x20 && $0 != 0x09 })
        else { return "" }
        return String(text[first...last])
    }
}

import Crypto
import HTTPTypes

extension HTTPFields {
    /// The value of the fields named `name`, joined as `self[name]` joins them (`", "`, or `"; "`
    /// for cookies), found by one scan of the fields. `self[name]` first builds an index of
    /// every field name (a dictionary per request, through unspecialised generic code): for the
    /// handful of fields a request carries that cost more than the lookups it served, 3 % of a
    /// cached read's CPU (#35).
    public func value(_ name: HTTPField.Name) -> String? {
        var found: String?
        for field in self where field.name == name {
            if let earlier = found {
                found = earlier + (name == .cookie ? "; " : ", ") + field.value
            } else {
                found = field.value
            }
        }
        return found
    }

    /// The credential of `Authorization: Bearer <credential>` (the scheme in any case, RFC 9110
    /// §11.1), nil when the field is absent, of another scheme or carries nothing after it.
    /// Measured on bytes: `String.count` walks every grapheme of a 700-byte token.
    public var bearerCredential: String? {
        guard let auth = value(.authorization) else { return nil }
        let utf8 = auth.utf8
        guard utf8.count > 7 else { return nil }
        let scheme = utf8.prefix(7).lazy.map { $0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0 }
        guard scheme.elementsEqual("bearer ".utf8) else { return nil }
        return String(auth.utf8.dropFirst(7))
    }
}

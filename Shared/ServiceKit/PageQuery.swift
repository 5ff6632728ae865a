import Hummingbird

/// The query of a paged admin list (#47): `limit` within bounds, and the cursor the previous page
/// returned. One reading for every list, so each answers bad paging the same way (422, the field
/// named) and none can 500.
public struct PageQuery {
    let request: Request

    public init(_ request: Request) { self.request = request }

    /// `limit`, 1 to `max`; `fallback` when absent.
    public func limit(max: Int, fallback: Int = 50) throws -> Int {
        try request.uri.queryParameters.get("limit").map { raw -> Int in
            guard let n = Int(raw), (1...max).contains(n) else { throw AppError.validation("limit", "limit is 1 to \(max)") }
            return n
        } ?? fallback
    }

    /// A cursor that is a row id (`before=` the last id of the previous page).
    public func id(_ name: String) throws -> Int64? {
        try request.uri.queryParameters.get(name).map { raw -> Int64 in
            guard let id = Int64(raw), id > 0 else { throw AppError.validation(name, "\(name) is the next_\(name) of a previous page") }
            return id
        }
    }

    /// A cursor of another shape, checked by `parse` (nil: refused).
    public func cursor<T>(_ name: String, _ parse: (String) -> T?) throws -> T? {
        try request.uri.queryParameters.get(name).map { raw -> T in
            guard let value = parse(raw) else { throw AppError.validation(name, "\(name) is the next_\(name) of a previous page") }
            return value
        }
    }
}

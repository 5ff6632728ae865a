import Foundation
import Logging
import PostgresNIO
import ServiceKit
import SubscriptionDomain

/// The store notifications an app received, as its operators read them (#47): what each was,
/// and what it did. The payload stays here (it is the store's signed document, for support by
/// hand); an operator sees its kind, its transaction and the outcome.
public struct StoreEventStore: Sendable {
    let logger: Logger

    public struct Event: Encodable, Sendable {
        var id: UUID
        var store: String
        var notificationType: String
        var subtype: String?
        var originalTransactionID: String?
        var receivedAt: Date
        var result: String
        enum CodingKeys: String, CodingKey {
            case id, store, subtype, result
            case notificationType = "notification_type"
            case originalTransactionID = "original_transaction_id"
            case receivedAt = "received_at"
        }
    }

    /// Where a page ends: the last event's time and id (ties on the time are ordered by id).
    public struct Cursor: Sendable, Equatable {
        /// The event's time in exact microseconds since 1970, as the database keeps it: a
        /// `Date` (a Double) sent back as the bound could land a microsecond off, and events of
        /// one microsecond (ordered by id) after the page's last would then be skipped.
        var micros: Int64
        var id: UUID

        /// `<microseconds since 1970>_<id>`, opaque to the console.
        public var description: String { "\(micros)_\(id.lowercasedString)" }

        public init(receivedAt: Date, id: UUID) {
            self.init(micros: Int64((receivedAt.timeIntervalSince1970 * 1_000_000).rounded()), id: id)
        }

        init(micros: Int64, id: UUID) {
            self.micros = micros
            self.id = id
        }

        /// 2^53 µs (the year 2255): the bound is exact in SQL's `interval * double` up to here,
        /// and a time beyond it is no event's.
        static let latest: Int64 = 1 << 53

        public init?(_ raw: String) {
            let parts = raw.split(separator: "_", omittingEmptySubsequences: false)
            guard raw.utf8.count <= 64, parts.count == 2, let micros = Int64(parts[0]), (0...Self.latest).contains(micros),
                let id = UUID(uuidString: String(parts[1]))
            else {
                return nil
            }
            self.init(micros: micros, id: id)
        }
    }

    /// The app's events, newest first, `limit` of them before `cursor`.
    public func recent(app: UUID, before cursor: Cursor?, limit: Int, on conn: PostgresConnection) async throws -> [Event] {
        let rows: PostgresRows
        if let cursor {
            rows = try await conn.run(
                """
                SELECT id, store, notification_type, subtype, original_transaction_id, received_at, result FROM store_notifications
                WHERE app_id = \(app) AND (received_at, id) < (timestamptz 'epoch' + \(cursor.micros) * interval '1 microsecond', \(cursor.id))
                ORDER BY received_at DESC, id DESC LIMIT \(limit)
                """,
                logger: logger
            )
        } else {
            rows = try await conn.run(
                """
                SELECT id, store, notification_type, subtype, original_transaction_id, received_at, result FROM store_notifications
                WHERE app_id = \(app) ORDER BY received_at DESC, id DESC LIMIT \(limit)
                """,
                logger: logger
            )
        }
        var out: [Event] = []
        for try await r in rows.decode((UUID, String, String, String?, String?, Date, String).self) {
            out.append(Event(id: r.0, store: r.1, notificationType: r.2, subtype: r.3, originalTransactionID: r.4, receivedAt: r.5, result: r.6))
        }
        return out
    }
}

import AuthDomain
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit

/// The sealed columns of auth's secrets at rest, read and written for `DataKeyResealing` in
/// its transactions.
struct ResealStore: Sendable {
    /// (table, key column, sealed column).
    static let columns = [
        ("oauth_connections", "id", "refresh_token_sealed"), ("refresh_tokens", "id", "successor_sealed"),
        ("apple_signin_settings", "app_id", "sealed_private_key"),
        ("webhook_endpoints", "id", "secret_sealed"), ("webhook_endpoints", "id", "previous_secret_sealed"),
    ]

    let logger: Logger

    /// The next `batch` sealed values of a column after `after`, locked (`SKIP LOCKED`: a row a
    /// request holds is left to the next run).
    func lock(
        table: String,
        key: String,
        column: String,
        after: UUID,
        batch: Int,
        on conn: PostgresConnection
    ) async throws -> [(UUID, ByteBuffer)] {
        var rows: [(UUID, ByteBuffer)] = []
        // Identifiers from the fixed list above, never from input.
        for try await r in try await conn.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT \(key), \(column) FROM \(table) WHERE \(column) IS NOT NULL AND \(key) > $1
                    ORDER BY \(key) LIMIT \(batch) FOR UPDATE SKIP LOCKED
                    """,
                binds: Self.binds(after)
            ),
            logger: logger
        ).decode((UUID, ByteBuffer).self) { rows.append(r) }
        return rows
    }

    func write(table: String, key: String, column: String, id: UUID, sealed: ByteBuffer, on conn: PostgresConnection) async throws {
        try await conn.query(
            PostgresQuery(unsafeSQL: "UPDATE \(table) SET \(column) = $1 WHERE \(key) = $2", binds: Self.binds(sealed, id)),
            logger: logger
        )
    }

    static func binds(_ id: UUID) -> PostgresBindings {
        var b = PostgresBindings()
        b.append(id)
        return b
    }

    static func binds(_ value: ByteBuffer, _ id: UUID) -> PostgresBindings {
        var b = PostgresBindings()
        b.append(value)
        b.append(id)
        return b
    }
}

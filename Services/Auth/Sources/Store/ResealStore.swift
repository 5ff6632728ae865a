import AuthDomain
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ServiceKit

/// Seals auth's secrets at rest again with the current data key (after `AUTH_DATA_KEY`
/// changed, the old one in `AUTH_DATA_KEY_PREVIOUS`): Apple's refresh tokens, the successors of
/// rotated refresh tokens, the apps' Sign in with Apple keys. In batches, each its own
/// transaction, rows locked `SKIP LOCKED`; a value already under the current key is left as it
/// is, so a run that stopped can simply run again.
public struct ResealStore: Sendable {
    /// (table, key column, sealed column).
    static let columns = [
        ("oauth_connections", "id", "refresh_token_sealed"), ("refresh_tokens", "id", "successor_sealed"),
        ("apple_signin_settings", "app_id", "sealed_private_key"),
        ("webhook_endpoints", "id", "secret_sealed"), ("webhook_endpoints", "id", "previous_secret_sealed"),
    ]

    let db: DatabasePool
    let box: SecretBox
    let logger: Logger

    public init(db: DatabasePool, box: SecretBox, logger: Logger) {
        self.db = db
        self.box = box
        self.logger = logger
    }

    /// Values sealed again, by table; `unreadable` counts those neither key opens (left as
    /// they are, and logged: a key that is neither the current nor the previous one).
    public func run(batch: Int = 500) async throws -> [String: Int] {
        var out: [String: Int] = ["unreadable": 0]
        for (table, key, column) in Self.columns {
            var after = UUID(uuidString: "00000000-0000-0000-0000-000000000000")!
            while true {
                let (count, unreadable, last) = try await db.withTransaction(logger: logger) { conn -> (Int, Int, UUID?) in
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
                    var changed = 0
                    var unreadable = 0
                    for (id, sealed) in rows where !box.isCurrent(sealed) {
                        guard let plain = try? box.open(sealed) else {
                            unreadable += 1
                            logger.error(
                                "a sealed value opens with neither data key",
                                metadata: ["table": "\(table)", "key": "\(id.lowercasedString)"]
                            )
                            continue
                        }
                        let again = try box.seal(plain)
                        try await conn.query(
                            PostgresQuery(
                                unsafeSQL: "UPDATE \(table) SET \(column) = $1 WHERE \(key) = $2",
                                binds: Self.binds(again, id)
                            ),
                            logger: logger
                        )
                        changed += 1
                    }
                    return (changed, unreadable, rows.last?.0)
                }
                out[table, default: 0] += count
                out["unreadable", default: 0] += unreadable
                guard let last else { break }
                after = last
            }
        }
        return out
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

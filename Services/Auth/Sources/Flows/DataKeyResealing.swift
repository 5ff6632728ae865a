import Foundation
import Logging
import NIOCore
import ServiceKit

/// Seals auth's secrets at rest again with the current data key (after `AUTH_DATA_KEY`
/// changed, the old one in `AUTH_DATA_KEY_PREVIOUS`): Apple's refresh tokens, the successors of
/// rotated refresh tokens, the apps' Sign in with Apple keys, the webhook secrets. In batches,
/// each its own transaction, rows locked `SKIP LOCKED`; a value already under the current key is
/// left as it is, so a run that stopped can simply run again.
public struct DataKeyResealing: Sendable {
    let db: DatabasePool
    let box: SecretBox
    let store: ResealStore
    let logger: Logger

    public init(db: DatabasePool, box: SecretBox, logger: Logger) {
        self.db = db
        self.box = box
        self.store = ResealStore(logger: logger)
        self.logger = logger
    }

    /// Values sealed again, by table; `unreadable` counts those neither key opens (left as
    /// they are, and logged: a key that is neither the current nor the previous one).
    public func run(batch: Int = 500) async throws -> [String: Int] {
        var out: [String: Int] = ["unreadable": 0]
        for (table, key, column) in ResealStore.columns {
            var after = UUID(uuidString: "00000000-0000-0000-0000-000000000000")!
            while true {
                let (count, unreadable, last) = try await db.withTransaction(logger: logger) { conn -> (Int, Int, UUID?) in
                    let rows = try await store.lock(table: table, key: key, column: column, after: after, batch: batch, on: conn)
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
                        try await store.write(table: table, key: key, column: column, id: id, sealed: try box.seal(plain), on: conn)
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
}

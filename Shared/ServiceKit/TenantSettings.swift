import Crypto
import Foundation
import Logging
import NIOCore
import Synchronization

/// One service's settings for every app (store credentials, upstreams, …), kept whole in
/// memory and read without I/O on the hot path. The table's trigger announces `topic` on the
/// change feed at each write (on any replica); the next read after that, or after the feed lost
/// its connection, or once the copy is `maxAge` old, reads the table again (one read at a time).
/// An operator's change therefore takes effect on every replica within about a second, with no
/// restart. Environment variables give a bootstrap value per app, for the local stack; a stored
/// row for the same app wins over it.
public final class TenantSettings<Value: Sendable>: Sendable {
    public typealias Loader = @Sendable () async throws -> [UUID: Value]
    private let topic: String
    private let bootstrap: [UUID: Value]
    private let load: Loader
    private let maxAge: Duration
    private struct State {
        var stored: [UUID: Value]?
        var loadedAt = ContinuousClock.Instant.now
        /// Bumped by every announced change: a load that began before one is not the latest.
        var generation: UInt64 = 0
        var loadedGeneration: UInt64 = 0
        /// The read under way and the generation it began at.
        var inflight: (generation: UInt64, task: Task<[UUID: Value], any Error>)?
    }
    private let state = Mutex(State())

    public init(topic: String, bootstrap: [UUID: Value], feed: ChangeFeed, maxAge: Duration = .seconds(30), load: @escaping Loader) {
        self.topic = topic
        self.bootstrap = bootstrap
        self.load = load
        self.maxAge = maxAge
        feed.subscribe { [weak self] event in
            guard let self else { return }
            switch event {
            case .change(let change) where change.topic == self.topic: self.state.withLock { $0.generation += 1 }
            case .reset: self.state.withLock { $0.generation += 1 }
            case .change: break
            }
        }
    }

    /// Every app's settings: the stored ones over the bootstrap.
    public func all() async throws -> [UUID: Value] {
        let fresh = state.withLock { s -> [UUID: Value]? in
            guard let stored = s.stored, s.loadedGeneration == s.generation, ContinuousClock.now - s.loadedAt < maxAge else { return nil }
            return stored
        }
        if let fresh { return bootstrap.merging(fresh) { $1 } }
        return bootstrap.merging(try await reload()) { $1 }
    }

    public func value(for app: UUID) async throws -> Value? { try await all()[app] }

    /// Drops the copy (after this replica's own write: its next read sees the write without
    /// waiting for the notification to come back).
    public func invalidate() { state.withLock { $0.generation += 1 } }

    /// Reads the table, joining a read under way only if no change was announced since it began.
    @discardableResult
    public func reload() async throws -> [UUID: Value] {
        let task = state.withLock { s -> Task<[UUID: Value], any Error> in
            if let running = s.inflight, running.generation == s.generation { return running.task }
            let generation = s.generation
            let load = self.load
            let task = Task { [weak self] () throws -> [UUID: Value] in
                let loaded: [UUID: Value]
                do { loaded = try await load() } catch {
                    // Not kept: the next read tries again.
                    self?.state.withLock { s in if s.inflight?.generation == generation { s.inflight = nil } }
                    throw error
                }
                self?.state.withLock { s in
                    if s.inflight?.generation == generation { s.inflight = nil }
                    // Never over a newer read's result; a change announced meanwhile makes the next read load again.
                    guard generation >= s.loadedGeneration || s.stored == nil else { return }
                    s.stored = loaded
                    s.loadedAt = .now
                    s.loadedGeneration = generation
                }
                return loaded
            }
            s.inflight = (generation, task)
            return task
        }
        return try await task.value
    }
}

/// Seals small secrets at rest (store credentials, the successor of a rotated refresh token,
/// Apple's refresh token) with AES-GCM.
public struct SecretBox: Sendable {
    let key: SymmetricKey
    /// During a change of data key: what was sealed before still opens (sealing uses `key` only).
    let previous: SymmetricKey?
    public init(key: SymmetricKey, previous: SymmetricKey? = nil) {
        self.key = key
        self.previous = previous
    }

    public func seal(_ plain: String) throws -> ByteBuffer {
        ByteBuffer(bytes: try AES.GCM.seal(Data(plain.utf8), using: key).combined!)
    }

    public func open(_ sealed: ByteBuffer) throws -> String {
        do { return try open(sealed, with: key) } catch {
            guard let previous else { throw error }
            return try open(sealed, with: previous)
        }
    }

    /// True when the value is sealed with the current key (a re-seal skips it).
    public func isCurrent(_ sealed: ByteBuffer) -> Bool { (try? open(sealed, with: key)) != nil }

    private func open(_ sealed: ByteBuffer, with key: SymmetricKey) throws -> String {
        String(decoding: try AES.GCM.open(AES.GCM.SealedBox(combined: Data(sealed.readableBytesView)), using: key), as: UTF8.self)
    }

    /// A service's data key: `<NAME>` (base64, 32 bytes). The local stack may run without it
    /// (a fixed local key, named so nobody mistakes it for a secret); elsewhere the service's
    /// `unsafeSecrets` check refuses to start first.
    public static func dataKey(named name: String, environment: EnvironmentVariables) throws -> SymmetricKey {
        guard let raw = environment.optional(name), !raw.isEmpty else {
            return SymmetricKey(data: "local-only \(name)".sha256)
        }
        guard let data = Data(base64Encoded: raw), data.count == 32 else { throw ConfigurationError("\(name) must be 32 bytes, base64") }
        return SymmetricKey(data: data)
    }
}

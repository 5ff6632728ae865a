import AdsDomain
import Crypto
import Foundation
import ServiceKit
import Synchronization

/// A parsed AdMob server-side verification callback.
struct AdMobCallback: Sendable, Equatable {
    var fields: [String: String]
    var keyID: Int64
    var transactionID: String
    var customData: String?
    var userID: String?
    var rewardAmount: Int?
}

enum AdMobVerificationError: Error, Equatable {
    case malformed(String)
    case unknownKey(Int64)
    case badSignature
    case keysUnavailable
}

/// Verifies AdMob's rewarded-ad callbacks as Google specifies: ECDSA P-256 with SHA-256 over
/// the raw query string up to `&signature=`, with the public key named by `key_id` in the
/// verifier-keys document (fetched from a configured URL, kept at most 24 h). An unknown key id
/// (AdMob rotates its keys) fetches the document again at once: a key published since the last
/// fetch is never refused for it. The refetch is limited per key id (one per 10 s for an id still
/// absent), fetches are coalesced, and at most one starts per second, so a flood of made-up ids
/// costs AdMob's server at most one request a second.
final class AdMobVerifier: Sendable {
    let keysURL: String
    let http: CurlHTTPClient
    let maxAge: Duration
    private struct State {
        var keys: [Int64: P256.Signing.PublicKey] = [:]
        var fetchedAt: ContinuousClock.Instant?
        /// When each absent key id last caused a fetch.
        var missedAt: [Int64: ContinuousClock.Instant] = [:]
        var inFlight: Task<Void, any Error>?
    }
    static let missInterval: Duration = .seconds(10)
    static let minimumFetchInterval: Duration = .seconds(1)
    private let state = Mutex(State())

    init(keysURL: String, http: CurlHTTPClient, maxAge: Duration = .seconds(86400)) {
        self.keysURL = keysURL
        self.http = http
        self.maxAge = maxAge
    }

    /// Splits the raw query (as received, still percent-encoded) into the signed part, the
    /// signature and the key id; `signature` and `key_id` come last.
    static func parse(rawQuery: String) throws -> (message: String, signature: Data, callback: AdMobCallback) {
        guard let range = rawQuery.range(of: "&signature=") else { throw AdMobVerificationError.malformed("signature is missing") }
        let message = String(rawQuery[..<range.lowerBound])
        let tail = rawQuery[range.upperBound...]
        guard let keyRange = tail.range(of: "&key_id=") else { throw AdMobVerificationError.malformed("key_id is missing") }
        let signatureText = String(tail[..<keyRange.lowerBound])
        guard let keyID = Int64(tail[keyRange.upperBound...]) else { throw AdMobVerificationError.malformed("key_id is not a number") }
        guard let signature = Base64URL.decode(signatureText.replacingOccurrences(of: "%3D", with: "=").replacingOccurrences(of: "=", with: ""))
        else {
            throw AdMobVerificationError.malformed("signature is not web-safe base64")
        }
        var fields: [String: String] = [:]
        for pair in message.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(kv[0]).removingPercentEncoding ?? String(kv[0])
            let value = kv.count > 1 ? (String(kv[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(kv[1])) : ""
            fields[key] = value
        }
        guard let transaction = fields["transaction_id"], !transaction.isEmpty else {
            throw AdMobVerificationError.malformed("transaction_id is missing")
        }
        let callback = AdMobCallback(
            fields: fields,
            keyID: keyID,
            transactionID: transaction,
            customData: fields["custom_data"],
            userID: fields["user_id"],
            rewardAmount: fields["reward_amount"].flatMap { Int($0) }
        )
        return (message, signature, callback)
    }

    func verify(rawQuery: String) async throws -> AdMobCallback {
        let (message, signature, callback) = try Self.parse(rawQuery: rawQuery)
        guard let key = try await key(id: callback.keyID) else { throw AdMobVerificationError.unknownKey(callback.keyID) }
        guard let sig = try? P256.Signing.ECDSASignature(derRepresentation: signature),
            key.isValidSignature(sig, for: Data(message.utf8))
        else { throw AdMobVerificationError.badSignature }
        return callback
    }

    private func key(id: Int64) async throws -> P256.Signing.PublicKey? {
        let now = ContinuousClock.now
        let (cached, fetchedAt, missed) = state.withLock { ($0.keys[id], $0.fetchedAt, $0.missedAt[id]) }
        let fresh = fetchedAt.map { now - $0 < maxAge } ?? false
        if let cached, fresh { return cached }
        if cached == nil, fresh, let missed, now - missed < Self.missInterval { return nil }
        if cached == nil {
            state.withLock { s in
                if s.missedAt.count > 10_000 { s.missedAt = s.missedAt.filter { now - $0.value < Self.missInterval } }
                s.missedAt[id] = now
            }
            // Another id's fetch a moment ago: wait for the floor, then fetch for this one.
            if let fetchedAt, now - fetchedAt < Self.minimumFetchInterval {
                try await Task.sleep(for: Self.minimumFetchInterval - (now - fetchedAt))
                if let key = state.withLock({ $0.keys[id] }) { return key }
            }
        }
        try await refreshCoalesced()
        return state.withLock { $0.keys[id] }
    }

    /// One fetch at a time: concurrent lookups share it.
    private func refreshCoalesced() async throws {
        let task: Task<Void, any Error> = state.withLock { s in
            if let running = s.inFlight { return running }
            let started = Task { try await self.refresh() }
            s.inFlight = started
            return started
        }
        try await task.value
    }

    struct KeysDocument: Decodable {
        struct Key: Decodable {
            var keyId: Int64
            var pem: String?
            var base64: String?
        }
        var keys: [Key]
    }

    private func refresh() async throws {
        defer { state.withLock { $0.inFlight = nil } }
        let response: HTTPResponseData
        do { response = try await http.send(HTTPRequest(method: "GET", url: keysURL, timeout: .seconds(5)), retries: 1) } catch {
            throw AdMobVerificationError.keysUnavailable
        }
        guard response.isSuccess, let doc = try? response.decode(KeysDocument.self) else { throw AdMobVerificationError.keysUnavailable }
        var keys: [Int64: P256.Signing.PublicKey] = [:]
        for k in doc.keys {
            if let pem = k.pem, let key = try? P256.Signing.PublicKey(pemRepresentation: pem) {
                keys[k.keyId] = key
            } else if let b64 = k.base64, let der = Data(base64Encoded: b64), let key = try? P256.Signing.PublicKey(derRepresentation: der) {
                keys[k.keyId] = key
            }
        }
        let fetched = keys
        state.withLock {
            $0.keys = fetched
            $0.fetchedAt = ContinuousClock.now
        }
    }
}

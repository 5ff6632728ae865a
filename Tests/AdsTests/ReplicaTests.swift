import AdsDomain
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import ServiceKit
import ServiceLifecycle
import TestSupport
import WireTypes
import XCTest

@testable import AdsService

/// Two replicas of the ads service (two processes' worth: separate pools) on one database:
/// the caps hold across both because they live in Postgres.
final class ReplicaTests: XCTestCase {
    func testTwoReplicasShareTheCooldownAndTheDailyCap() async throws {
        try await AdsHarness.run { h in
            try await h.provider()
            let user = UUID()
            try await h.consent(user)
            try await h.withSecondReplica { second, _ in
                let clients: [any TestClientProtocol] = [h.client, second]
                var granted = 0
                for _ in 0..<15 {
                    h.clock.advance(by: 31)
                    let headers = try h.headers(user)
                    let ids = try await withThrowingTaskGroup(of: UUID?.self) { group in
                        for i in 0..<10 {
                            group.addTask {
                                let r = try await clients[i % 2].execute(
                                    uri: "/ads/v1/ads/request",
                                    method: .post,
                                    headers: headers,
                                    body: ByteBuffer(string: #"{"ad_type":"rewarded","placement":"earn_credits"}"#)
                                ) { $0 }
                                guard r.status == .created, case .string(let s)? = try r.json([String: JSONValue].self)["ad_request_id"] else {
                                    return nil
                                }
                                return UUID(uuidString: s)
                            }
                        }
                        return try await group.reduce(into: [UUID]()) { if let id = $1 { $0.append(id) } }
                    }
                    XCTAssertLessThanOrEqual(ids.count, 1, "one request per cooldown across both replicas")
                    h.clock.advance(by: 31)
                    for (i, id) in ids.enumerated() {
                        _ = try await clients[i % 2].execute(
                            uri: "/ads/v1/ads/\(id)/impression",
                            method: .post,
                            headers: try h.headers(user),
                            body: ByteBuffer(string: #"{"loaded":true,"shown":true}"#)
                        ) { $0 }
                        let r = try await clients[(i + 1) % 2].execute(
                            uri: "/ads/v1/ads/\(id)/complete",
                            method: .post,
                            headers: try h.headers(user),
                            body: ByteBuffer(string: #"{"completed":true,"display_duration_ms":30000}"#)
                        ) { $0 }
                        if try r.json([String: JSONValue].self)["reward_granted"] == .bool(true) { granted += 1 }
                    }
                }
                XCTAssertEqual(granted, 10, "the daily cap holds across replicas")
                XCTAssertEqual(h.upstream.balance(h.app, user), 10)
            }
        }
    }
}

import Foundation
import OfflineDomain
import ServiceKit
import XCTest

@testable import OfflineService

/// Offline's decisions as functions of values (#36), a row per flow; no database.
final class OfflineDecisionTests: XCTestCase {
    /// UC-OFFLINE-3.1: what a FREE copy may take, and what it refuses (never silently added).
    func testCopyBudget() {
        let rows: [(String, Int, Int64, Int64, Int64?, CopyBudget.Refusal?)] = [
            ("a new item with room", 10, 1_000, 5_000, nil, nil),
            ("the 51st item of a category", 50, 1_000, 10, nil, .itemLimit),
            ("an item already held may change at the count limit", 50, 1_000, 2_000, 1_500, nil),
            ("a new item past 50 MB", 10, 49_999_000, 2_000, nil, .storageLimit),
            ("an item exactly filling 50 MB", 10, 49_998_000, 2_000, nil, nil),
            ("a held item that grows past 50 MB", 10, 49_999_000, 3_000, 1_000, .storageLimit),
            ("a held item that shrinks when full", 10, 50_000_000, 500, 1_000, nil),
        ]
        for (flow, count, used, size, old, refusal) in rows {
            var budget = CopyBudget(itemCount: count, usedBytes: used, limits: .free)
            XCTAssertEqual(budget.admit(newSize: size, oldSize: old), refusal, flow)
        }
        var premium = CopyBudget(itemCount: 10_000, usedBytes: 0, limits: .premium)
        XCTAssertNil(premium.admit(newSize: 1_000, oldSize: nil), "PREMIUM: no count limit")
    }

    /// UC-OFFLINE-3.4: the queue's priorities, what a full queue may drop, and the back-off.
    func testSyncQueueRules() {
        let rows: [(String, Int, Bool)] = [
            ("answer_submit", 5, false), ("progress_save", 7, false), ("favorite_toggle", 10, true),
            ("answer_submit", 10, false), ("settings_update", 3, false),
        ]
        for (type, priority, droppable) in rows {
            XCTAssertEqual(OfflineRules.isDroppable(actionType: type, priority: priority), droppable, "\(type) at \(priority)")
        }
        XCTAssertEqual(OfflineRules.defaultPriority(actionType: "answer_submit"), 5)
        XCTAssertEqual(OfflineRules.defaultPriority(actionType: "progress_save"), 7)
        XCTAssertEqual(OfflineRules.defaultPriority(actionType: "anything_else"), 10)
        XCTAssertEqual((0...7).map { OfflineRules.retryDelay(afterAttempt: $0) }, [2, 2, 4, 8, 16, 32, 32, 32])
        XCTAssertEqual(OfflineRules.retryDelay(afterAttempt: 3, jitter: 1.2), 9.6, accuracy: 1e-9)
    }

    /// UC-OFFLINE-3.5: a merge takes each named field from the side chosen, the server's otherwise.
    func testConflictMerge() throws {
        let local: [String: Any] = ["score": 9, "answer": "Paris", "only_local": true]
        let server: [String: Any] = ["score": 7, "answer": "Lyon", "only_server": 1]
        let merged = try ConflictMerge.merge(local: local, server: server, choices: ["score": "local", "answer": "server"])
        XCTAssertEqual(merged["score"] as? Int, 9)
        XCTAssertEqual(merged["answer"] as? String, "Lyon")
        XCTAssertEqual(merged["only_server"] as? Int, 1, "fields not named keep the server's value")
        XCTAssertNil(merged["only_local"])
        XCTAssertThrowsError(try ConflictMerge.merge(local: local, server: server, choices: ["score": "both"])) {
            XCTAssertEqual($0 as? ConflictMerge.MergeError, .badChoice("score"))
        }
    }

    func testErrorCatalogue() {
        let codes = OfflineErrorCode.allCases.map(\.rawValue)
        XCTAssertEqual(Set(codes).count, codes.count)
        for code in OfflineErrorCode.allCases { XCTAssertTrue((400..<600).contains(code.status.code), code.rawValue) }
    }
}

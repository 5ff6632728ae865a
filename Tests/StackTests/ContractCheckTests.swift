import Foundation
import TestSupport
import WireTypes
import XCTest

/// The check every stack answer goes through (DocumentedHTTPClient), against the committed
/// documents: each way an answer can drift from its document is caught, and a right one passes.
final class ContractCheckTests: XCTestCase {
    let contract = APIContract.documents
    let json = "application/json"

    func problems(_ method: String, _ path: String, _ status: Int, _ body: String, contentType: String = "application/json") -> [String] {
        contract.problems(method: method, url: TestEnvironment.gatewayURL + path, status: status, contentType: contentType, body: Data(body.utf8))
    }

    func testAnAnswerAsDocumentedPasses() {
        XCTAssertEqual(problems("GET", "/subscription/v1/credits/balance", 200, #"{"balance":3}"#), [])
        XCTAssertEqual(
            problems(
                "POST",
                "/offline/v1/sync/execute",
                202,
                #"{"job_id":"C5437DD6-E224-43B6-9274-839F7DD82E15","status":"pending","items_to_process":1,"succeeded":0,"duplicates":0,"failed":0,"conflicts":0}"#
            ),
            []
        )
        XCTAssertEqual(problems("GET", "/subscription/v1/subscriptions/me", 200, #"{"subscription":null,"is_premium":false,"features":{}}"#), [])
        XCTAssertEqual(problems("GET", "/ads/v1/campaigns/active", 401, #"{"error":"invalid_token","message":"no"}"#), [])
        // A refusal of an unknown route, in the envelope.
        XCTAssertEqual(problems("GET", "/auth/v1/no/such/route", 404, #"{"error":"not_found","message":"no"}"#), [])
    }

    func testEachDriftIsCaught() {
        let drift: [(String, [String])] = [
            ("a field the document does not name", problems("GET", "/subscription/v1/credits/balance", 200, #"{"balance":3,"secret":1}"#)),
            ("a required field missing", problems("GET", "/subscription/v1/credits/balance", 200, #"{}"#)),
            ("a wrong type", problems("GET", "/subscription/v1/credits/balance", 200, #"{"balance":"3"}"#)),
            (
                "a value outside its enum",
                problems(
                    "GET",
                    "/offline/v1/sync/execute/C5437DD6-E224-43B6-9274-839F7DD82E15",
                    200,
                    #"{"job_id":"C5437DD6-E224-43B6-9274-839F7DD82E15","status":"exploded","items_to_process":1,"succeeded":0,"duplicates":0,"failed":0,"conflicts":0}"#
                )
            ),
            (
                "an error code the service does not declare",
                problems("GET", "/subscription/v1/credits/balance", 403, #"{"error":"made_up_code","message":"no"}"#)
            ),
            (
                "a status the operation does not declare",
                problems("GET", "/subscription/v1/credits/balance", 418, #"{"error":"not_found","message":"no"}"#)
            ),
            (
                "a media type the operation does not declare",
                problems("GET", "/subscription/v1/credits/balance", 200, "balance=3", contentType: "text/plain")
            ),
            ("an operation the document does not have", problems("GET", "/subscription/v1/secret-route", 200, #"{}"#)),
            (
                "a nested object with an extra field",
                problems(
                    "GET",
                    "/subscription/v1/subscriptions/me",
                    200,
                    #"{"subscription":{"id":"x","status":"active","plan_type":"monthly","start_date":"2026-01-01T00:00:00Z","end_date":"2026-02-01T00:00:00Z","auto_renew":true,"x":1},"is_premium":true,"features":{}}"#
                )
            ),
        ]
        for (what, found) in drift { XCTAssertFalse(found.isEmpty, "\(what) passed the check") }
    }

    /// #45: no schema of the four documents leaves an object or an array untyped (74 objects and
    /// 5 arrays did), and an answer checked against such a schema fails.
    func testNoSchemaIsLeftUntyped() {
        XCTAssertEqual(contract.untypedSchemas(), [])
        let schemas = JSONSchemaCheck(document: .object([:]))
        var problems: [String] = []
        schemas.check(.object(["anything": .int(1)]), against: .object(["type": .string("object")]), at: "body", problems: &problems)
        XCTAssertFalse(problems.isEmpty, "an answer against an untyped object passed")
        problems = []
        schemas.check(.array([.int(1)]), against: .object(["type": .string("array")]), at: "body", problems: &problems)
        XCTAssertFalse(problems.isEmpty, "an answer against an array without items passed")
        // `{}` says "any JSON value" on purpose (an export's rows): neither is a hole.
        for value in [JSONValue.object(["a": .int(1)]), .array([.int(1)])] {
            problems = []
            schemas.check(value, against: .object(["description": .string("any")]), at: "body", problems: &problems)
            XCTAssertEqual(problems, [], "\(value)")
        }
        problems = []
        schemas.check(
            .object(["a": .int(1)]),
            against: .object(["type": .string("object"), "additionalProperties": .object(["type": .string("integer")])]),
            at: "body",
            problems: &problems
        )
        XCTAssertEqual(problems, [], "a typed map is typed")
    }
}

import Foundation
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// The stack `make test` started (four binaries + nginx), reached through the gateway.
final class GatewayTests: XCTestCase {
    let http = DocumentedHTTPClient()
    let gateway = TestEnvironment.gatewayURL
    deinit { http.shutdown() }

    /// Health through the gateway; readiness and metrics only on each service's own port (#15:
    /// operators only: the gateway and the Ingress route the public prefixes, where they are not).
    func testHealthThroughTheGatewayReadyAndMetricsOnlyOnTheServicePort() async throws {
        for service in ServiceName.allCases {
            let r = try await http.send(HTTPRequest(url: "\(gateway)/\(service.rawValue)/v1/health"))
            XCTAssertEqual(r.status, 200, "\(service) health")
            XCTAssertEqual(try r.decode(HealthStatus.self).service, service.rawValue)
            for path in ["ready", "metrics"] {
                let hidden = try await http.send(HTTPRequest(url: "\(gateway)/\(service.rawValue)/v1/\(path)"))
                XCTAssertEqual(hidden.status, 404, "\(service) \(path) through the gateway")
            }
            let own = "http://127.0.0.1:\(service.defaultPort)"
            let ready = try await http.send(HTTPRequest(url: "\(own)/ready"))
            XCTAssertEqual(ready.status, 200)
            let metrics = try await http.send(HTTPRequest(url: "\(own)/metrics"))
            XCTAssertEqual(metrics.status, 200)
            XCTAssertTrue(String(decoding: metrics.body, as: UTF8.self).contains("http_requests_total"))
        }
    }

    /// #14: a request resumes its task once or twice, not once per `async` call. Run isolated
    /// to the event loop (NIO's takeover of the global executor), every call into or out of a
    /// nonisolated async function was enqueued again: about 50 jobs per `/health`, 78 per
    /// cached nearby read. Counted by the executor itself, on each binary, 200 requests each.
    func testARequestCostsOneOrTwoExecutorJobsNotOnePerAwait() async throws {
        func jobs(_ own: String) async throws -> Double {
            let text = String(decoding: try await http.send(HTTPRequest(url: "\(own)/metrics")).body, as: UTF8.self)
            let line = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("executor_jobs_total ") }, "no executor_jobs_total in /metrics")
            return try XCTUnwrap(Double(line.split(separator: " ")[1]))
        }
        for service in ServiceName.allCases {
            let own = "http://127.0.0.1:\(service.defaultPort)"
            let before = try await jobs(own)
            for _ in 0..<200 {
                let r = try await http.send(HTTPRequest(url: "\(own)/health"))
                XCTAssertEqual(r.status, 200)
            }
            let perRequest = (try await jobs(own) - before) / 200
            // Background workers and the scrape itself add a few; one per await would be ~50.
            XCTAssertLessThan(perRequest, 10, "\(service): \(perRequest) executor jobs per /health")
            // Each request resumes its connection's task at least once: a counter that stands
            // still is not counting.
            XCTAssertGreaterThanOrEqual(perRequest, 0.5, "\(service): executor_jobs_total does not count")
        }
    }

    /// Runs `serve` outside local mode with `unset` removed from the environment; returns its
    /// exit status and what it printed.
    func serveOutsideLocal(_ service: ServiceName, unset: [String]) throws -> (status: Int32, text: String) {
        var env = ProcessInfo.processInfo.environment
        env["ENVIRONMENT"] = "production"
        env["\(service.envPrefix)_PORT"] = String(try TestEnvironment.freePort())
        for name in unset { env[name] = nil }
        let r = try runServiceBinary("\(service.rawValue)-service", ["serve"], environment: env)
        return (r.status, r.err + r.out)
    }

    /// #15: outside ENVIRONMENT=local a service refuses to start with a built-in secret, naming it.
    func testAServiceRefusesToStartWithADefaultSecret() async throws {
        let (status, text) = try serveOutsideLocal(.ads, unset: ["ADMIN_API_TOKEN"])
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(text.contains("ADMIN_API_TOKEN"), text)
        XCTAssertTrue(text.contains("ADS_INTERNAL_CREDENTIAL"), text)
    }

    /// #16: outside local mode auth needs its signing key and its data key set: a generated key
    /// differs per replica, and a data key derived from the signing key would change with it.
    func testAuthRefusesToStartWithoutItsKeysOutsideLocal() async throws {
        let (status, text) = try serveOutsideLocal(.auth, unset: ["AUTH_SIGNING_KEY", "AUTH_DATA_KEY"])
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(text.contains("AUTH_SIGNING_KEY"), text)
        XCTAssertTrue(text.contains("AUTH_DATA_KEY"), text)
    }

    func testTheDocsPageLinksEveryServicesDocument() async throws {
        let index = try await http.send(HTTPRequest(url: "\(gateway)/docs"))
        XCTAssertEqual(index.status, 200)
        for service in ServiceName.allCases {
            XCTAssertTrue(String(decoding: index.body, as: UTF8.self).contains("/\(service.rawValue)/v1/docs"))
            let page = try await http.send(HTTPRequest(url: "\(gateway)/\(service.rawValue)/v1/docs"))
            XCTAssertEqual(page.status, 200)
            XCTAssertEqual(page.header("Content-Type"), "text/html; charset=utf-8")
            let doc = try await http.send(HTTPRequest(url: "\(gateway)/\(service.rawValue)/v1/openapi.json"))
            XCTAssertEqual(doc.status, 200)
        }
    }

    func testInternalPathsAreNotFoundAtTheGateway() async throws {
        let paths = [
            "/internal/apps/verify", "/auth/v1/internal/apps/verify", "/auth/internal/apps/verify",
            "/subscription/v1/internal/users/x", "/offline/v1/internal/", "/ads/v1/internal",
        ]
        for path in paths {
            for method in ["GET", "POST"] {
                let r = try await http.send(
                    HTTPRequest(
                        method: method,
                        url: gateway + path,
                        headers: [("Authorization", "Bearer local-internal-ads"), ("X-Service-Name", "ads")],
                        body: method == "POST" ? Data("{}".utf8) : nil
                    )
                )
                XCTAssertEqual(r.status, 404, "\(method) \(path)")
                XCTAssertEqual(try r.decode(ErrorEnvelope.self).error, "not_found")
            }
        }
        // The same route is there on the service itself, for other services.
        let direct = try await http.send(
            HTTPRequest(
                method: "POST",
                url: "http://127.0.0.1:3001/internal/apps/verify",
                headers: [("Content-Type", "application/json")],
                body: Data("{}".utf8)
            )
        )
        XCTAssertEqual(direct.status, 401)
    }

    func testGatewaySetsARequestIDAndKeepsTheClients() async throws {
        let mine = try await http.send(HTTPRequest(url: "\(gateway)/auth/v1/health", headers: [("X-Request-ID", "client-chosen-id")]))
        XCTAssertEqual(mine.header("X-Request-ID"), "client-chosen-id")
        let generated = try await http.send(HTTPRequest(url: "\(gateway)/ads/v1/health"))
        XCTAssertEqual(generated.header("X-Request-ID")?.count, 32)
        // One header, not the service's and the gateway's: a client joining repeated headers
        // (fetch's Headers.get) would read "id, id".
        for response in [mine, generated] {
            XCTAssertEqual(response.headers.filter { $0.0.lowercased() == "x-request-id" }.count, 1, "\(response.headers)")
        }
    }

    /// A guest signs in at auth and sees the seeded paywall at subscription: the token auth
    /// signed is verified by subscription through auth's JWKS, the tenant through auth.
    func testGuestSeesTheDemoPaywall() async throws {
        let tenant = try DemoApp.tenantHeaders()
        let register = try await http.send(
            HTTPRequest(
                method: "POST",
                url: "\(gateway)/auth/v1/auth/register",
                headers: tenant,
                body: Data(#"{"provider":"guest","credentials":{"device_id":"stack-\#(UUID())"}}"#.utf8)
            )
        )
        XCTAssertEqual(register.status, 201, String(decoding: register.body, as: UTF8.self))
        struct Tokens: Decodable {
            struct T: Decodable { var access_token: String }
            var tokens: T
        }
        let token = try register.decode(Tokens.self).tokens.access_token
        let plans = try await http.send(
            HTTPRequest(url: "\(gateway)/subscription/v1/plans", headers: tenant + [("Authorization", "Bearer \(token)")])
        )
        XCTAssertEqual(plans.status, 200, String(decoding: plans.body, as: UTF8.self))
        let text = String(decoding: plans.body, as: UTF8.self)
        XCTAssertTrue(text.contains("Premium Annuel") && text.contains("-33%"), text)
        let balance = try await http.send(
            HTTPRequest(url: "\(gateway)/subscription/v1/credits/balance", headers: tenant + [("Authorization", "Bearer \(token)")])
        )
        XCTAssertEqual(String(decoding: balance.body, as: UTF8.self), #"{"balance":0}"#)
    }

    func testBadInputAtTheGatewayGetsTheEnvelope() async throws {
        let big = Data(repeating: UInt8(ascii: "a"), count: 2 << 20)
        let tooLarge = try await http.send(
            HTTPRequest(
                method: "POST",
                url: "\(gateway)/auth/v1/anything",
                headers: [("Content-Type", "application/json")],
                body: big
            )
        )
        XCTAssertEqual(tooLarge.status, 413)
        XCTAssertEqual(try tooLarge.decode(ErrorEnvelope.self).error, "payload_too_large")

        // The gateway's own refusals are in the envelope too (nginx answers HTML by default).
        let longPath = try await http.send(HTTPRequest(url: "\(gateway)/auth/v1/" + String(repeating: "a", count: 9 * 1024)))
        XCTAssertEqual(longPath.status, 414)
        XCTAssertEqual(try longPath.decode(ErrorEnvelope.self).error, "uri_too_long")
        let bigHeader = try await http.send(
            HTTPRequest(url: "\(gateway)/auth/v1/health", headers: [("X-Padding", String(repeating: "b", count: 9 * 1024))])
        )
        XCTAssertEqual(bigHeader.status, 431)
        XCTAssertEqual(try bigHeader.decode(ErrorEnvelope.self).error, "headers_too_large")
        let malformed = try await http.send(HTTPRequest(url: "\(gateway)/auth/v1/health%00"))
        XCTAssertEqual(malformed.status, 400)
        XCTAssertNoThrow(try malformed.decode(ErrorEnvelope.self), String(decoding: malformed.body, as: UTF8.self))

        let unknown = try await http.send(HTTPRequest(url: "\(gateway)/nope/v1/health"))
        XCTAssertEqual(unknown.status, 404)
        XCTAssertEqual(try unknown.decode(ErrorEnvelope.self).error, "not_found")
        // #32: each of the gateway's own refusals names its request, in the header and the body;
        // a client's id is kept when it is a plain token, replaced when it is not.
        for (response, code) in [
            (unknown, "not_found"), (longPath, "uri_too_long"), (bigHeader, "headers_too_large"), (tooLarge, "payload_too_large"),
        ] {
            let id = try XCTUnwrap(response.header("X-Request-ID"), code)
            XCTAssertEqual(try response.decode(ErrorEnvelope.self).extra["request_id"], .string(id), code)
        }
        let trace = try await http.send(HTTPRequest(method: "TRACE", url: "\(gateway)/auth/v1/health"))
        XCTAssertEqual(trace.status, 405)
        XCTAssertEqual(try trace.decode(ErrorEnvelope.self).error, "method_not_allowed")
        // #45: a method the API does not use, and a Transfer-Encoding nginx does not implement,
        // are refused in the envelope (a service's parser answered BREW with a bare 400; nginx
        // answered the encoding with its HTML 501).
        for (raw, status, code) in [
            ("BREW /auth/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "405", "method_not_allowed"),
            (
                "POST /auth/v1/auth/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n0\r\n\r\n", "501",
                "not_implemented"
            ),
            ("POST /auth/v1/auth/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: teapot\r\nConnection: close\r\n\r\n", "501", "not_implemented"),
        ] {
            let answer = try Self.rawRequest(raw, gateway: gateway)
            XCTAssertTrue(answer.hasPrefix("HTTP/1.1 \(status)"), answer)
            XCTAssertTrue(answer.contains(#""error":"\#(code)""#), answer)
            XCTAssertTrue(answer.lowercased().contains("content-type: application/json"), answer)
        }
        let kept = try await http.send(HTTPRequest(url: "\(gateway)/nope", headers: [("X-Request-ID", "client-id-1")]))
        XCTAssertEqual(kept.header("X-Request-ID"), "client-id-1")
        let replaced = try await http.send(HTTPRequest(url: "\(gateway)/nope", headers: [("X-Request-ID", #"bad"id"#)]))
        XCTAssertNotEqual(replaced.header("X-Request-ID"), #"bad"id"#)
        XCTAssertNoThrow(try replaced.decode(ErrorEnvelope.self), "the body stays JSON")
        let version = try Self.rawRequest("GET /auth/v1/health HTTP/3.0\r\nHost: x\r\n\r\n", gateway: gateway)
        XCTAssertTrue(version.hasPrefix("HTTP/1.1 505"), version)
        XCTAssertTrue(version.contains(#""error":"http_version_not_supported""#), version)
        XCTAssertTrue(version.lowercased().contains("x-request-id:"), version)

        // The demo application's credentials work; a wrong key does not.
        let values = try DemoApp.values()
        let appID = try XCTUnwrap(values["APP_ID"])
        for service in ServiceName.allCases {
            let noHeaders = try await http.send(HTTPRequest(url: "\(gateway)/\(service.rawValue)/v1/some/resource"))
            XCTAssertTrue([401, 404].contains(noHeaders.status), "\(service): \(noHeaders.status)")
            XCTAssertNoThrow(try noHeaders.decode(ErrorEnvelope.self))
        }
        let jwks = try await http.send(HTTPRequest(url: "\(gateway)/auth/v1/.well-known/jwks.json"))
        XCTAssertEqual(jwks.status, 200)
        let doc = try jwks.decode(JWKSDocument.self)
        XCTAssertEqual(doc.keys.first?.alg, "EdDSA")
        XCTAssertNotNil(doc.keys.first?.kid)
        XCTAssertFalse(appID.isEmpty)
    }

    /// A request line libcurl would not send (an HTTP version nginx does not speak), over a
    /// plain socket; the whole answer as text.
    static func rawRequest(_ text: String, gateway: String) throws -> String {
        let port = UInt16(gateway.split(separator: ":").last.flatMap { Int($0) } ?? 8080)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw HTTPClientError.connectionRefused(url: gateway) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = text.utf8CString.withUnsafeBufferPointer { send(fd, $0.baseAddress, $0.count - 1, 0) }
        var out = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}

import Foundation
import TestSupport
import XCTest

@testable import AuthService

#if canImport(Glibc)
import Glibc
import AuthDomain
#endif

/// Auth's connections carry the live socket's upgrade (#46). A first request NIO cannot parse
/// never yields a head, so the upgrade was never decided: the connection stayed open with no
/// answer (a fuzzer's cookie bytes hung 10 s). These speak raw HTTP/1.1 over a socket, as the
/// broken client does.
final class UnparsableRequestTests: XCTestCase {
    /// Sends `request` and reads until the server closes (or 5 s pass): what came back.
    static func exchange(port: Int, _ request: [UInt8]) throws -> (answer: String, closed: Bool) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(connected, 0)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var answer = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return (String(decoding: answer, as: UTF8.self), true) }
            if n < 0 { return (String(decoding: answer, as: UTF8.self), false) }
            answer += buffer[0..<n]
        }
    }

    func testAnUnparsableFirstRequestIsAnsweredWithTheEnvelopeAndClosed() async throws {
        try await AuthHarness.run(live: true) { h in
            let port = try XCTUnwrap(h.client.port)
            for bad: [UInt8] in [[0x01], [0x7F], [0x00]] {
                let request =
                    Array("POST /auth/v1/console/refresh HTTP/1.1\r\nHost: x\r\nCookie: console_refresh=".utf8) + bad
                    + Array("\r\nContent-Length: 0\r\n\r\n".utf8)
                let (answer, closed) = try Self.exchange(port: port, request)
                XCTAssertTrue(answer.hasPrefix("HTTP/1.1 400"), "byte \(bad): \(answer)")
                XCTAssertTrue(answer.contains(#""error":"invalid_request""#), answer)
                XCTAssertTrue(closed, "the connection is closed after the answer")
            }
            // A well-formed request on the same kind of connection is answered as before.
            let (fine, _) = try Self.exchange(port: port, Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
            XCTAssertTrue(fine.hasPrefix("HTTP/1.1 200"), fine)
        }
    }
}

import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceKit
import Synchronization
import TestSupport
import XCTest

/// A plain HTTP/1.1 server on loopback that counts the TCP connections it accepts.
final class CountingServer: Sendable {
    final class Counter: Sendable { let value = Atomic<Int>(0) }
    private let counter = Counter()
    let channel: any Channel
    var port: Int { channel.localAddress!.port! }
    var accepted: Int { counter.value.load(ordering: .relaxed) }

    init() async throws {
        let counter = self.counter
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                counter.value.add(1, ordering: .relaxed)
                return channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(Handler())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    func close() async throws { try await channel.close() }

    final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .head(let head) = unwrapInboundIn(data) else { return }
            let body = head.uri == "/slow" ? "slow" : "hello \(head.method.rawValue)"
            let respond = { [context] in
                var headers = HTTPHeaders([
                    ("Content-Type", "text/plain"), ("Content-Length", String(body.utf8.count)),
                    ("X-Seen-Request-ID", head.headers.first(name: "X-Request-ID") ?? ""),
                ])
                if head.uri == "/unavailable" { headers.add(name: "X-Unavailable", value: "1") }
                let status: HTTPResponseStatus = head.uri == "/unavailable" ? .serviceUnavailable : .ok
                context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
                context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
                context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            }
            if head.uri == "/slow" {
                context.eventLoop.scheduleTask(in: .seconds(3)) { respond() }
            } else {
                respond()
            }
        }
    }
}

final class HTTPClientTests: XCTestCase {
    func testSlowEndpointHitsTheTimeoutWithATypedError() async throws {
        let server = try await CountingServer()
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        let url = "http://127.0.0.1:\(server.port)/slow"
        do {
            _ = try await client.send(HTTPRequest(url: url, timeout: .milliseconds(300)))
            XCTFail("expected a timeout")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error, .timeout(url: url))
        }
        try await server.close()
    }

    func testRefusedConnectionIsATypedError() async throws {
        let port = try TestEnvironment.freePort()
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        let url = "http://127.0.0.1:\(port)/"
        do {
            _ = try await client.send(HTTPRequest(url: url))
            XCTFail("expected a refused connection")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error, .connectionRefused(url: url))
        }
    }

    func testSequentialCallsReuseConnections() async throws {
        let server = try await CountingServer()
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        var newConnections = 0
        for i in 0..<100 {
            let response = try await client.send(
                HTTPRequest(
                    method: i % 2 == 0 ? "GET" : "POST",
                    url: "http://127.0.0.1:\(server.port)/ping",
                    body: i % 2 == 0 ? nil : Data("{}".utf8)
                )
            )
            XCTAssertEqual(response.status, 200)
            XCTAssertEqual(String(decoding: response.body, as: UTF8.self), i % 2 == 0 ? "hello GET" : "hello POST")
            newConnections += response.newConnections
        }
        XCTAssertLessThanOrEqual(server.accepted, 2, "the server saw \(server.accepted) connections for 100 calls")
        XCTAssertLessThanOrEqual(newConnections, 2)
        try await server.close()
    }

    func testConcurrentCallsAllComplete() async throws {
        let server = try await CountingServer()
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        let port = server.port
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<50 { group.addTask { try await client.send(HTTPRequest(url: "http://127.0.0.1:\(port)/x")).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(statuses, Array(repeating: 200, count: 50))
        try await server.close()
    }

    func testRequestIDIsCarriedOntoOutboundCalls() async throws {
        let server = try await CountingServer()
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        let response = try await RequestTrace.$requestID.withValue("req-123") {
            try await client.send(HTTPRequest(url: "http://127.0.0.1:\(server.port)/x"))
        }
        XCTAssertEqual(response.header("X-Seen-Request-ID"), "req-123")
        try await server.close()
    }

    func testIdempotentCallsAreRetriedOthersAreNot() async throws {
        let port = try TestEnvironment.freePort()
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        let start = ContinuousClock.now
        do {
            _ = try await client.send(HTTPRequest(url: "http://127.0.0.1:\(port)/"), retries: 2, backoff: .milliseconds(100))
            XCTFail("expected failure")
        } catch let e as HTTPClientError { XCTAssertEqual(e, .connectionRefused(url: "http://127.0.0.1:\(port)/")) }
        // Two retries: at least 100 + 200 ms of backoff.
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(300))
        XCTAssertTrue(HTTPRequest(method: "POST", url: "x", headers: [("Idempotency-Key", "k")]).isIdempotent)
        XCTAssertFalse(HTTPRequest(method: "POST", url: "x").isIdempotent)
    }

    /// An email sent through libcurl's SMTP reaches a real SMTP server (aiosmtpd).
    func testSMTPMessageReachesALocalSMTPServer() async throws {
        let sink = try SMTPSink()
        defer { sink.stop() }
        let port = sink.port
        // Wait until it listens.
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        for _ in 0..<100 {
            if connectable(port) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let message = SMTPMessage(
            from: "no-reply@quiz.example",
            to: ["player@example.com"],
            subject: "Vérifiez votre email",
            text: "Bonjour,\nvotre code: 123456\n.\nfin"
        )
        try await client.sendMail(message, via: SMTPServer(url: sink.url))
        let messages = try sink.messages()
        XCTAssertEqual(messages.count, 1)
        let text = messages[0]
        XCTAssertTrue(text.contains("To: player@example.com"))
        XCTAssertTrue(text.contains("votre code: 123456"))
        XCTAssertTrue(text.contains("=?UTF-8?B?"), "non-ASCII subject is encoded")
        XCTAssertTrue(text.contains("\n.\nfin") || text.contains("\r\n.\r\nfin"), "a lone dot line survives dot-stuffing")
    }

    private func connectable(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}

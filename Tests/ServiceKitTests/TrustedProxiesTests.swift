import ServiceKit
import XCTest

/// Whose `X-Forwarded-For` is believed.
final class TrustedProxiesTests: XCTestCase {
    func testOnlyATrustedPeerForwardsTheClientAddress() throws {
        let proxies = try XCTUnwrap(TrustedProxies(cidrs: "10.0.0.0/8, 127.0.0.1, ::1/128, 2001:db8::/32"))
        XCTAssertTrue(proxies.contains("10.200.3.4"))
        XCTAssertFalse(proxies.contains("11.0.0.1"))
        XCTAssertTrue(proxies.contains("::1"))
        XCTAssertTrue(proxies.contains("2001:db8:1::5"))
        XCTAssertTrue(proxies.contains("::ffff:10.1.2.3"), "an IPv4-mapped address is its IPv4 address")
        XCTAssertFalse(proxies.contains("not-an-ip"))
        // A direct client: its socket address, whatever it claims.
        XCTAssertEqual(proxies.clientAddress(peer: "203.0.113.9", forwardedFor: "1.2.3.4", realIP: "5.6.7.8"), "203.0.113.9")
        // Behind the proxy: the rightmost address that is not one of ours (earlier ones are the client's claims).
        XCTAssertEqual(proxies.clientAddress(peer: "10.0.0.2", forwardedFor: "6.6.6.6, 198.51.100.7, 10.0.0.9", realIP: nil), "198.51.100.7")
        XCTAssertEqual(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: nil, realIP: "198.51.100.8"), "198.51.100.8")
        XCTAssertEqual(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: nil, realIP: nil), "127.0.0.1")
        // No IP peer (a Unix socket, in-process): local, trusted like loopback.
        XCTAssertEqual(proxies.clientAddress(peer: nil, forwardedFor: "198.51.100.1", realIP: nil), "198.51.100.1")
        XCTAssertEqual(proxies.clientAddress(peer: nil, forwardedFor: nil, realIP: nil), "unknown")
        for bad in ["10.0.0.0/33", "banana", "::1/129", "10.0.0.0/x"] { XCTAssertNil(TrustedProxies(cidrs: bad), bad) }
        XCTAssertTrue(TrustedProxies.loopback.contains("127.0.0.53"))
        XCTAssertFalse(TrustedProxies.loopback.contains("192.168.1.1"))
    }
}

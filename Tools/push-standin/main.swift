import Crypto
import Foundation
import Logging
import PushStandIn
import ServiceLifecycle
import _CryptoExtras

// Local APNs (HTTP/2, h2c) and FCM stand-ins for `make run`, the test stack and `make bench`:
//   push-standin --apns-port P --http-port Q [--ca-out ca.pem] [--apns-key TEAM:KID:public.pem] [--fcm-account EMAIL:public.pem] [--quiet]
// With --ca-out, APNs is served over TLS (ALPN h2) with a certificate for localhost issued by a
// CA written there (auth's APNS_CA_BUNDLE); without it, as h2c with prior knowledge.
// Each push that arrives is logged (unless --quiet), so a newcomer sees it land.
let args = Array(CommandLine.arguments.dropFirst())
func value(_ name: String, in args: [String] = args) -> String? {
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
    return args[i + 1]
}
guard let apnsPort = value("--apns-port").flatMap(Int.init), let httpPort = value("--http-port").flatMap(Int.init) else {
    FileHandle.standardError.write(
        Data("usage: push-standin --apns-port P --http-port Q [--apns-key TEAM:KID:pem] [--fcm-account EMAIL:pem] [--quiet]\n".utf8)
    )
    exit(2)
}
var logger = Logger(label: "push-standin")
logger.logLevel = .notice
let standIn = PushStandIn(logger: logger, quiet: args.contains("--quiet"), keep: 50_000)
if let spec = value("--apns-key") {
    let p = spec.split(separator: ":", maxSplits: 2).map(String.init)
    standIn.addAPNsKey(
        teamID: p[0],
        keyID: p[1],
        publicKey: try P256.Signing.PublicKey(pemRepresentation: String(contentsOfFile: p[2], encoding: .utf8))
    )
}
if let spec = value("--fcm-account") {
    let p = spec.split(separator: ":", maxSplits: 1).map(String.init)
    standIn.addFCMAccount(clientEmail: p[0], publicKey: try _RSA.Signing.PublicKey(pemRepresentation: String(contentsOfFile: p[1], encoding: .utf8)))
}
let tls = try value("--ca-out").map { try PushStandIn.tls(caPath: $0) }
let group = ServiceGroup(
    configuration: .init(
        services: [try standIn.apnsApplication(port: apnsPort, tls: tls), standIn.httpApplication(port: httpPort)],
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: logger
    )
)
logger.notice(
    "push stand-ins listening",
    metadata: ["apns": "\(tls == nil ? "h2c" : "https")://localhost:\(apnsPort)", "fcm": "http://127.0.0.1:\(httpPort)"]
)
try await group.run()

import Crypto
import Foundation
import ServiceKit

/// StoreKit 2 data signed with the stack's local chain (`.data/storekit`, made by `make test`;
/// the stack trusts its root for the demo app only).
struct LocalStoreKit {
    let key: P256.Signing.PrivateKey
    let chain: [String]
    static let bundle = "com.quiz.geography"

    init(directory: String = ".data/storekit/") throws {
        key = try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: directory + "leaf.p8", encoding: .utf8))
        chain = try ["leaf", "inter", "root"].map {
            try String(contentsOfFile: directory + "\($0).der.b64", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    func sign(_ payload: String) throws -> String {
        let header = #"{"alg":"ES256","x5c":[\#(chain.map { "\"\($0)\"" }.joined(separator: ","))]}"#
        let input = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(Data(payload.utf8))
        return input + "." + Base64URL.encode(try key.signature(for: Data(input.utf8)).rawRepresentation)
    }

    static func ms(_ d: Date) -> Int { Int(d.timeIntervalSince1970 * 1000) }

    /// A signed transaction; `environment` "Xcode" is what StoreKit testing in Xcode produces.
    func transaction(
        id: String,
        original: String,
        product: String,
        expires: Date,
        environment: String = "Xcode",
        bundle: String = Self.bundle
    ) throws -> String {
        try sign(
            #"{"transactionId":"\#(id)","originalTransactionId":"\#(original)","bundleId":"\#(bundle)","productId":"\#(product)","purchaseDate":\#(Self.ms(Date() - 5)),"expiresDate":\#(Self.ms(expires)),"type":"Auto-Renewable Subscription","environment":"\#(environment)","signedDate":\#(Self.ms(Date()))}"#
        )
    }

    /// An App Store Server Notification v2 `signedPayload`.
    func notification(_ type: String, subtype: String? = nil, transaction: String, uuid: UUID = UUID()) throws -> String {
        let sub = subtype.map { #","subtype":"\#($0)""# } ?? ""
        return try sign(
            #"{"notificationType":"\#(type)"\#(sub),"notificationUUID":"\#(uuid)","data":{"bundleId":"\#(Self.bundle)","environment":"Sandbox","signedTransactionInfo":"\#(transaction)"},"version":"2.0","signedDate":\#(Self.ms(Date()))}"#
        )
    }
}

import Foundation
import ServiceKit
import SubscriptionDomain

/// Per-app App Store settings (`APPLE_IAP_APPS`, JSON keyed by app id): the bundle id, the
/// environment the app's purchases come from, the trusted roots, and whether Xcode /
/// LocalTesting data is accepted (the local stack only; never in Production).
public struct AppleIAPConfig: Sendable {
    public var bundleID: String
    public var environment: AppStoreEnvironment
    public var rootCertificatesDER: [[UInt8]]
    public var allowLocalEnvironments: Bool
    /// The app's shared secret for legacy `verifyReceipt` calls.
    public var sharedSecret: String?

    /// An app's App Store settings as the operator gives them (an `APPLE_IAP_APPS` entry, or
    /// the body of `PUT /admin/stores/apple`).
    public struct Settings: Codable, Sendable, Equatable {
        public var bundleID: String
        public var environment: String
        public var rootCertificatesDERBase64: [String]?
        public var allowLocalEnvironments: Bool?
        public var sharedSecret: String?
        enum CodingKeys: String, CodingKey {
            case sharedSecret = "shared_secret"
            case bundleID = "bundle_id"
            case environment
            case rootCertificatesDERBase64 = "root_certificates_der_base64"
            case allowLocalEnvironments = "allow_local_environments"
        }
    }

    public static func parse(_ json: String?) throws -> [UUID: AppleIAPConfig] {
        guard let json, !json.isEmpty else { return [:] }
        var out: [UUID: AppleIAPConfig] = [:]
        for (app, r) in try JSONDecoder().decode([String: Settings].self, from: Data(json.utf8)) {
            guard let id = UUID(uuidString: app) else { throw ConfigurationError("APPLE_IAP_APPS: bad entry for \(app)") }
            do { out[id] = try AppleIAPConfig(r) } catch let e as AppError {
                throw ConfigurationError("APPLE_IAP_APPS: bad entry for \(app): \(e.message)")
            }
        }
        return out
    }

    /// Checked as a request body is: each bad field named.
    public init(_ r: Settings) throws {
        guard !r.bundleID.isEmpty, r.bundleID.count <= 255 else {
            throw AppError.validation("bundle_id", "bundle_id is required (at most 255 characters)")
        }
        guard let env = AppStoreEnvironment(rawValue: r.environment) else {
            throw AppError.validation("environment", "environment must be Production, Sandbox, Xcode or LocalTesting")
        }
        let roots = try (r.rootCertificatesDERBase64 ?? [AppleRoots.appleRootCAG3]).map { b64 -> [UInt8] in
            guard let d = Data(base64Encoded: b64), !d.isEmpty else {
                throw AppError.validation("root_certificates_der_base64", "each root certificate must be DER, base64")
            }
            return Array(d)
        }
        guard !roots.isEmpty, roots.count <= 4 else { throw AppError.validation("root_certificates_der_base64", "one to four root certificates") }
        if let secret = r.sharedSecret, secret.isEmpty || secret.count > 256 {
            throw AppError.validation("shared_secret", "shared_secret must be 1-256 characters")
        }
        self.init(
            bundleID: r.bundleID,
            environment: env,
            rootCertificatesDER: roots,
            allowLocalEnvironments: (r.allowLocalEnvironments ?? false) && env != .production,
            sharedSecret: r.sharedSecret
        )
        // The roots must be certificates the verifier can use.
        do { _ = try verifier() } catch { throw AppError.validation("root_certificates_der_base64", "a root certificate cannot be read") }
    }

    public init(
        bundleID: String,
        environment: AppStoreEnvironment,
        rootCertificatesDER: [[UInt8]],
        allowLocalEnvironments: Bool,
        sharedSecret: String?
    ) {
        self.bundleID = bundleID
        self.environment = environment
        self.rootCertificatesDER = rootCertificatesDER
        self.allowLocalEnvironments = allowLocalEnvironments
        self.sharedSecret = sharedSecret
    }

    public func verifier() throws -> AppStoreSignedDataVerifier {
        try AppStoreSignedDataVerifier(
            rootCertificatesDER: rootCertificatesDER,
            bundleID: bundleID,
            environment: environment,
            allowLocalEnvironments: allowLocalEnvironments
        )
    }
}

/// Apple Root CA - G3, the root production App Store data chains to (public certificate).
public enum AppleRoots {
    public static let appleRootCAG3 =
        "MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwSQXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcNMTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgxOTA2WjBnMRswGQYDVQQDDBJBcHBsZSBSb290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRpZmljYXRpb24gQXV0aG9yaXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtfTjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqXl5dvMVztK517IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySrMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gAMGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZLuN+yRhHFD/3meoyhpmvOwgPUnPWTxnS4at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM6BgD56KyKA=="
}

/// The fields of a StoreKit 2 transaction (JWSTransactionDecodedPayload) that purchases use.
public struct AppStoreTransaction: Decodable, Sendable {
    public var transactionId: String
    public var originalTransactionId: String
    public var productId: String
    public var purchaseDate: Double
    public var expiresDate: Double?
    public var revocationDate: Double?
    public var offerType: Int?
    public var offerDiscountType: String?
    public var environment: String?
    public var price: Double?
    public var currency: String?
    /// Set by the app at purchase (StoreKit 2), to the buyer's account id.
    public var appAccountToken: String?

    var isTrial: Bool { offerType == 1 && (offerDiscountType == nil || offerDiscountType == "FREE_TRIAL") }
    static func date(_ ms: Double) -> Date { Date(timeIntervalSince1970: ms / 1000) }

    /// The purchase this transaction is, in the store's own milliseconds (`now` when it has no expiry).
    func purchase(environment: String, proof: String, now: Date) -> StorePurchase {
        let expiresMS = expiresDate.map { Int64($0) } ?? PurchaseRules.milliseconds(now)
        return StorePurchase(
            store: "apple",
            transactionID: transactionId,
            originalTransactionID: originalTransactionId,
            productID: productId,
            purchaseDate: Self.date(purchaseDate),
            endDate: Self.date(Double(expiresMS)),
            expiresMS: expiresMS,
            status: isTrial ? .trial : .active,
            autoRenew: true,
            isTrial: isTrial,
            environment: self.environment ?? environment,
            proof: proof,
            appAccountToken: appAccountToken.flatMap(UUID.init(uuidString:))
        )
    }
}

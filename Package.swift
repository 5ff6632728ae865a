// swift-tools-version:6.1
import PackageDescription

// One package, four service binaries. Each service is a library (`<Name>Service`, what tests
// import and `buildApplication` lives in) plus a thin executable (`<name>-service`).
let serviceKitDeps: [Target.Dependency] = [
    "ServiceCore", "WireTypes", "CCurl", "CSwiftHooks",
    .product(name: "Hummingbird", package: "hummingbird"),
    .product(name: "HummingbirdCore", package: "hummingbird"),
    .product(name: "HTTPTypes", package: "swift-http-types"),
    .product(name: "PostgresNIO", package: "postgres-nio"),
    .product(name: "JWTKit", package: "jwt-kit"),
    .product(name: "Crypto", package: "swift-crypto"),
    .product(name: "_CryptoExtras", package: "swift-crypto"),
    .product(name: "Logging", package: "swift-log"),
    .product(name: "Metrics", package: "swift-metrics"),
    .product(name: "Prometheus", package: "swift-prometheus"),
    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
    .product(name: "ArgumentParser", package: "swift-argument-parser"),
    .product(name: "NIOPosix", package: "swift-nio"),
    // #49 traces: spans (swift-distributed-tracing) exported over OTLP/HTTP (OTLPTracer, SpanExporter).
    .product(name: "Tracing", package: "swift-distributed-tracing"),
    .product(name: "Instrumentation", package: "swift-distributed-tracing"),
    .product(name: "ServiceContextModule", package: "swift-service-context"),
]

/// The service binaries are linked by lld with packed relative relocations (DT_RELR, glibc 2.36):
/// a statically linked service carries ~150,000 of them, 3.6 MB of table read at every start and
/// kept resident (#35: auth's RSS). They export no symbols (`--no-export-dynamic`): nothing looks
/// one up (the executor hook's address is linked, CSwiftHooks; backtraces read `.symtab`), and the
/// 54,500 exported names' tables (5 MB, read by the loader at start) were resident: auth idle
/// 58.4 -> 53.3 MB. On the executables only: a product whose targets carry unsafe flags cannot be
/// a versioned dependency, and an app depends on this package for its client.
let serviceLinkerSettings: [LinkerSetting] = [
    .unsafeFlags(
        ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic"],
        .when(platforms: [.linux])
    )
]

struct ServiceSpec {
    let name: String  // directory under Services/ and library name prefix
    let executable: String  // product name
    let extra: [Target.Dependency]
    var resources: [Resource] = []
    /// #50 the service's `Domain/` is a target of its own (decisions without I/O): it depends on
    /// ServiceCore and WireTypes (and what `domain` adds) only, so the compiler, not a regular
    /// expression, keeps it pure. Nil: still a folder of the service's target.
    var domain: [Target.Dependency]? = nil
    /// Folders of the service that are modules of their own (a target each, which the service
    /// depends on and which depends on ServiceKit, WireTypes and the Domain only).
    var modules: [Module] = []

    struct Module {
        let name: String
        let folder: String
        let dependencies: [Target.Dependency]
    }
}

let services: [ServiceSpec] = [
    .init(
        name: "Auth",
        executable: "auth-service",
        extra: [
            .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
            .product(name: "_CryptoExtras", package: "swift-crypto"),
        ],
        resources: [.copy("Resources/zxcvbn"), .copy("OpenAPI")],
        domain: [.product(name: "Crypto", package: "swift-crypto"), .product(name: "HTTPTypes", package: "swift-http-types")],
        modules: [
            .init(
                name: "AuthMessaging",
                folder: "Messaging",
                dependencies: [
                    .product(name: "Hummingbird", package: "hummingbird"),
                    .product(name: "HummingbirdCore", package: "hummingbird"),
                    .product(name: "PostgresNIO", package: "postgres-nio"),
                    .product(name: "Logging", package: "swift-log"),
                    .product(name: "Prometheus", package: "swift-prometheus"),
                    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                    .product(name: "Crypto", package: "swift-crypto"),
                    .product(name: "_CryptoExtras", package: "swift-crypto"),
                    .product(name: "NIOCore", package: "swift-nio"),
                    .product(name: "NIOPosix", package: "swift-nio"),
                    // APNs speaks HTTP/2 only (see APNsClient).
                    .product(name: "AsyncHTTPClient", package: "async-http-client"),
                    // #46: the live WebSocket (RFC 6455 framing and upgrade from swift-nio).
                    .product(name: "NIOWebSocket", package: "swift-nio"),
                    .product(name: "NIOHTTP1", package: "swift-nio"),
                    .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                    .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                    .product(name: "NIOSSL", package: "swift-nio-ssl"),
                    .product(name: "HTTPTypes", package: "swift-http-types"),
                    // #49: the APNs call's span (AsyncHTTPClient's own would record the device token).
                    .product(name: "Tracing", package: "swift-distributed-tracing"),
                    .product(name: "ServiceContextModule", package: "swift-service-context"),
                ]
            )
        ]
    ),
    .init(
        name: "Subscription",
        executable: "subscription-service",
        extra: [
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
        ],
        resources: [.copy("OpenAPI")],
        domain: []
    ),
    // zlib for gzip of large items (UC-OFFLINE-3.1 compression rule).
    .init(
        name: "Offline",
        executable: "offline-service",
        extra: ["CZlib"],
        resources: [.copy("OpenAPI")],
        domain: ["CZlib", .product(name: "Crypto", package: "swift-crypto")]
    ),
    .init(
        name: "Ads",
        executable: "ads-service",
        extra: [],
        resources: [.copy("OpenAPI")],
        domain: [.product(name: "Crypto", package: "swift-crypto")]
    ),
]

/// One generated client per service document (the build plugin reads `Clients/<Name>API/openapi.json`,
/// a link to the document the service serves), and the library an app adds.
let apiClientTargets: [Target] =
    ["Auth", "Subscription", "Offline", "Ads"].map { name in
        .target(
            name: "\(name)API",
            dependencies: [.product(name: "OpenAPIRuntime", package: "swift-openapi-runtime")],
            path: "Clients/\(name)API",
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        )
    } + [
        .target(
            name: "AppBackendClient",
            dependencies: [
                "AuthAPI", "SubscriptionAPI", "OfflineAPI", "AdsAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Clients/AppBackendClient"
        )
    ]

/// The manifest helper: every service gets the same three targets (library, executable, tests).
func serviceTargets(_ s: ServiceSpec) -> [Target] {
    // Auth's tests run the other services as peers (privacy export).
    let peers: [Target.Dependency] = s.name == "Auth" ? ["SubscriptionService", "OfflineService", "AdsService", "PushStandIn"] : []
    let domain: [Target] =
        s.domain.map { extra in
            [.target(name: "\(s.name)Domain", dependencies: ["ServiceCore", "WireTypes"] + extra, path: "Services/\(s.name)/Sources/Domain")]
        } ?? []
    let domainDependency: [Target.Dependency] = s.domain == nil ? [] : [.target(name: "\(s.name)Domain")]
    // #50 auth's messaging (push, webhooks, live) is a module of its own: auth's core calls its
    // narrow interface (`AuthMessaging`, `MessagingOutbox`) and it calls nothing of the core back.
    let modules: [Target] =
        s.modules.map { m in
            .target(
                name: m.name,
                dependencies: ["ServiceKit", "WireTypes"] + domainDependency + m.dependencies,
                path: "Services/\(s.name)/Sources/\(m.folder)"
            )
        }
    let moduleDependencies: [Target.Dependency] = s.modules.map { .target(name: $0.name) }
    return domain + modules + [
        .target(
            name: "\(s.name)Service",
            dependencies: [
                "ServiceKit", "WireTypes",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ] + domainDependency + moduleDependencies + s.extra,
            path: "Services/\(s.name)/Sources",
            exclude: (s.domain == nil ? [] : ["Domain"]) + s.modules.map(\.folder),
            resources: [.copy("Migrations")] + s.resources
        ),
        .executableTarget(
            name: s.executable,
            dependencies: [.target(name: "\(s.name)Service"), "ServiceKit"],
            path: "Services/\(s.name)/Main",
            linkerSettings: serviceLinkerSettings
        ),
        .testTarget(
            name: "\(s.name)Tests",
            dependencies: [.target(name: "\(s.name)Service"), "TestSupport"] + domainDependency + moduleDependencies + peers + [
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Tests/\(s.name)Tests"
        ),
    ]
}

let package = Package(
    name: "app-backend",
    // iOS: what an app builds of this package is the client (AppBackendClient).
    platforms: [.macOS(.v14), .iOS(.v16)],
    products: services.map { .executable(name: $0.executable, targets: [$0.executable]) }
        + [
            .executable(name: "push-standin", targets: ["push-standin"]),
            // The Swift client an app adds with SwiftPM (#32): generated from the four documents.
            .library(name: "AppBackendClient", targets: ["AppBackendClient"]),
        ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // The live WebSocket's upgrade on Hummingbird's HTTP/1 pipeline (#46).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-openapi-generator.git", from: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession.git", from: "1.4.0"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0"),
        // The live stream's WebSocket client in the stack tests (#46).
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-service-context.git", from: "1.5.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CCurlSystem",
            path: "Shared/CCurlSystem",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "CCurl", dependencies: ["CCurlSystem"], path: "Shared/CCurl"),
        .systemLibrary(name: "CZlib", path: "Shared/CZlib"),
        .target(name: "CSwiftHooks", path: "Shared/CSwiftHooks"),
        .target(name: "WireTypes", path: "Shared/WireTypes"),
        // #50 what a Domain target may use of the shared code (errors as values), and nothing else.
        .target(
            name: "ServiceCore",
            dependencies: [
                "WireTypes", .product(name: "HTTPTypes", package: "swift-http-types"), .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Shared/ServiceCore"
        ),
        .target(name: "ServiceKit", dependencies: serviceKitDeps, path: "Shared/ServiceKit"),
        .target(
            name: "TestSupport",
            dependencies: ["ServiceKit", .product(name: "HummingbirdTesting", package: "hummingbird")],
            path: "Tests/TestSupport"
        ),
        .testTarget(
            name: "ServiceKitTests",
            dependencies: [
                "ServiceKit", "TestSupport", "AuthService", "SubscriptionService", "OfflineService", "AdsService",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/ServiceKitTests"
        ),
        // Local APNs (HTTP/2) and FCM stand-ins: in-process in auth's tests, a process in
        // `make run`, the test stack and `make bench`.
        .target(
            name: "PushStandIn",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            path: "Tools/PushStandIn"
        ),
        .executableTarget(
            name: "push-standin",
            dependencies: ["PushStandIn", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            path: "Tools/push-standin"
        ),
        .testTarget(
            name: "StackTests",
            // jwt-kit: a stock JOSE library verifies auth's tokens from the discovery document alone.
            // The journey goes through the generated client, on the server-side transport.
            dependencies: [
                "ServiceKit", "TestSupport", .product(name: "JWTKit", package: "jwt-kit"), "AppBackendClient",
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Tests/StackTests"
        ),
    ] + apiClientTargets + [] + services.flatMap(serviceTargets)
)

// swift-tools-version: 6.1
import CompilerPluginSupport
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Trellis",
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        .library(name: "Trellis", targets: ["Trellis"]),
        .library(name: "TrellisTesting", targets: ["TrellisTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/swiftlang/swift-syntax.git", "602.0.0"..<"604.0.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // Spans and metrics of calls; swift-distributed-tracing also comes with AsyncHTTPClient.
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        // Tests only: the in-process test server. SwiftPM resolves no test-only dependency
        // for an app that depends on Trellis; the demo and the benchmarks, whose servers would
        // count, are packages of their own (`Demo/`, `Benchmarks/`).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        // SHA-256 of public keys for pinning (CryptoKit on Apple platforms); in tests, of
        // transferred bytes.
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        // Tests only: a standard multipart parser on the server.
        .package(url: "https://github.com/vapor/multipart-kit.git", from: "4.7.1"),
        // Tests only: the test server's WebSocket endpoints.
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        // Tests only: certificates generated at test time for the in-process TLS server.
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
    ],
    targets: [
        .macro(
            name: "TrellisMacros",
            dependencies: [
                .product(name: "SwiftSyntax", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftSyntaxBuilder", package: "swift-syntax"),
                .product(name: "SwiftDiagnostics", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "Trellis",
            dependencies: [
                "TrellisMacros",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypesFoundation", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "TrellisTesting",
            dependencies: ["Trellis"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TrellisMacrosTests",
            dependencies: [
                "TrellisMacros",
                .product(name: "SwiftSyntaxMacrosGenericTestSupport", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacroExpansion", package: "swift-syntax"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TrellisTests",
            dependencies: [
                "Trellis",
                "TrellisTesting",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer harnesses, declared only for `Fuzz/run`, which sets TRELLIS_FUZZ and builds them
// with `-sanitize=fuzzer,address`; a normal build and CI never see them.
if Context.environment["TRELLIS_FUZZ"] != nil {
    // The harnesses use the runtime alone. Leaving the macro declarations out spares building
    // the compiler plugin with fuzzer instrumentation, which the system linker cannot link.
    for target in package.targets where target.name == "Trellis" {
        target.exclude.append("Service/ServiceMacros.swift")
        target.dependencies.removeAll { dependency in
            switch dependency {
            case .byNameItem(name: "TrellisMacros", _), .targetItem(name: "TrellisMacros", _): true
            default: false
            }
        }
    }
    package.targets += [
        .executableTarget(name: "fuzz-url-template", dependencies: ["Trellis"], path: "Fuzz/URLTemplate"),
        .executableTarget(name: "fuzz-query-encoder", dependencies: ["Trellis"], path: "Fuzz/QueryEncoder"),
        .executableTarget(
            name: "fuzz-multipart-encoder",
            dependencies: ["Trellis", .product(name: "MultipartKit", package: "multipart-kit")],
            path: "Fuzz/Multipart"
        ),
        // What Trellis parses from the network; these reach its internal parsers through
        // `@testable import`, which `Fuzz/run` allows with -enable-testing.
        .executableTarget(name: "fuzz-event-stream", dependencies: ["Trellis"], path: "Fuzz/EventStream"),
        .executableTarget(name: "fuzz-retry-after", dependencies: ["Trellis"], path: "Fuzz/RetryAfter"),
        .executableTarget(name: "fuzz-content-range", dependencies: ["Trellis"], path: "Fuzz/ContentRange"),
        .executableTarget(
            name: "fuzz-websocket-handshake",
            dependencies: [
                "Trellis",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Fuzz/WebSocketHandshake"
        ),
    ]
}

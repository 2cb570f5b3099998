// swift-tools-version: 6.1
import PackageDescription

// The benchmark harness, a package of its own so that an app depending on Trellis never
// resolves what only the benchmarks use (malloc-interposer, Hummingbird) and the library's
// builds never compile the harness. Run it from this directory:
// `swift run -c release trellis-benchmarks`.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "TrellisBenchmarks",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "trellis-benchmarks", targets: ["TrellisBenchmarks"]),
    ],
    dependencies: [
        // With the Postgres trait, for the `fleet` suite's TrellisPostgres, and the SQLite trait,
        // for the `outbox` suite's TrellisSQLite (against bare inserts through sqlite-nio).
        .package(name: "Trellis", path: "..", traits: ["Postgres", "SQLite"]),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        // Allocation counts.
        .package(url: "https://github.com/ordo-one/malloc-interposer.git", from: "1.6.1"),
        // The in-process servers.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        // The server side of `TRELLIS_BENCH_PAIRING`, which reads request heads as HTTPTypes.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        // The `openapi` suite: a generated client over TrellisOpenAPI against the same client
        // over swift-openapi-async-http-client, both served by the generated server.
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird.git", from: "2.1.0"),
        // The `bomb` suite's compressed body.
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
    ],
    targets: [
        .executableTarget(
            name: "TrellisBenchmarks",
            dependencies: [
                .product(name: "Trellis", package: "Trellis"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "MallocInterposerSwift", package: "malloc-interposer"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "TrellisOpenAPI", package: "Trellis"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                "BenchmarkOpenAPIFixture",
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "TrellisPostgres", package: "Trellis"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "TrellisSQLite", package: "Trellis"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
            ],
            path: "Sources/trellis-benchmarks",
            swiftSettings: strictSettings
        ),
        // The client and server generated from `Tests/TrellisOpenAPIFixture/openapi.yaml` by
        // `Scripts/generate-openapi` (the same code the tests compile); the generator's own
        // warnings are silenced.
        .target(
            name: "BenchmarkOpenAPIFixture",
            dependencies: [.product(name: "OpenAPIRuntime", package: "swift-openapi-runtime")],
            path: "OpenAPIFixture",
            swiftSettings: [.unsafeFlags(["-suppress-warnings"])]
        ),
        // The compile-cost benchmark's subjects: 200 endpoints declared with the macros, and
        // the same written by hand. Their sources are written by `trellis-benchmarks compile`.
        .target(
            name: "CompileCostGenerated",
            dependencies: [.product(name: "Trellis", package: "Trellis")],
            path: "CompileCost/Generated",
            swiftSettings: strictSettings
        ),
        .target(
            name: "CompileCostHandwritten",
            dependencies: [.product(name: "Trellis", package: "Trellis")],
            path: "CompileCost/Handwritten",
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)

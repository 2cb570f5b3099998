// swift-tools-version: 6.1
import PackageDescription

// The demo, a package of its own so that an app depending on Trellis never resolves the
// demo server's dependencies (Hummingbird). From the repository's root:
// `swift run --package-path Demo trellis-demo`; `trellis-fleet-example DATABASE_URL` shows a
// fleet of processes sharing one quota through PostgreSQL.
let package = Package(
    name: "TrellisDemo",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "trellis-demo", targets: ["TrellisDemo"]),
        // Four processes sharing one quota through a PostgreSQL database you name.
        .executable(name: "trellis-fleet-example", targets: ["TrellisFleetExample"]),
    ],
    dependencies: [
        // With the traits CI builds Trellis with, so that the demo reuses its build.
        .package(name: "Trellis", path: "..", traits: ["Postgres", "SQLite"]),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .executableTarget(
            name: "TrellisDemo",
            dependencies: [
                .product(name: "Trellis", package: "Trellis"),
                .product(name: "TrellisOpenAPI", package: "Trellis"),
                .product(name: "TrellisSQLite", package: "Trellis"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            ],
            path: "Sources/trellis-demo",
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("InternalImportsByDefault"),
            ]
        ),
        .executableTarget(
            name: "TrellisFleetExample",
            dependencies: [
                .product(name: "Trellis", package: "Trellis"),
                .product(name: "TrellisPostgres", package: "Trellis"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            path: "Sources/trellis-fleet-example",
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("InternalImportsByDefault"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

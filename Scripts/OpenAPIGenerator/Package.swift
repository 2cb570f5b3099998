// swift-tools-version: 6.2
import PackageDescription

// swift-openapi-generator, built only by `Scripts/generate-openapi` to regenerate the client
// and server that TrellisOpenAPI's tests and the benchmarks compile. The generated code is
// committed, so neither the tests nor CI build the generator.
let package = Package(
    name: "OpenAPIGenerator",
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-generator.git", exact: "1.14.3"),
    ]
)

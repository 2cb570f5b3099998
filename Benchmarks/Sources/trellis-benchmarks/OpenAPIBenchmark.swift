import BenchmarkOpenAPIFixture
import Foundation
import Hummingbird
import OpenAPIAsyncHTTPClient
import OpenAPIHummingbird
import OpenAPIRuntime
import Trellis
import TrellisOpenAPI

/// The `openapi` suite: one generated client, sent over TrellisOpenAPI and over
/// swift-openapi-async-http-client's transport (both on one AsyncHTTPClient `HTTPClient`, so
/// the connection pool is the same), against the server generated from the same document.
enum OpenAPIBenchmark {
    typealias PetStore = BenchmarkOpenAPIFixture.Client

    /// The server generated from the same document.
    static func installServer(_ router: Router<BasicRequestContext>) {
        PetStoreHandler().install(router)
    }

    static func run(rounds: Int) async throws -> [CallRow] {
        try await withServer(.openapi) { url in
            let serverURL = url.appending(path: "v1")
            let transport = LoopPairing.shared.map(\.transport) ?? Trellis.AsyncHTTPClientTransport.shared
            let http = transport.httpClient
            let baseline = PetStore(
                serverURL: serverURL,
                transport: OpenAPIAsyncHTTPClient.AsyncHTTPClientTransport(configuration: .init(client: http))
            )
            let trellis = PetStore(
                serverURL: serverURL,
                transport: TrellisClientTransport(client: Trellis.Client(baseURL: url, transport: transport))
            )
            @Sendable func get(_ api: PetStore) async throws {
                _ = try await api.getPet(path: .init(petId: 1)).ok.body.json
            }
            @Sendable func post(_ api: PetStore) async throws {
                _ = try await api.createPet(body: .json(.init(name: "Nemo", species: "fish"))).created.body.json
            }
            let scenarios = [
                CallBenchmark.Scenario(name: "getPet, sequential", concurrency: 1, requests: 1_000, raw: { try await get(baseline) }, trellis: { try await get(trellis) }),
                CallBenchmark.Scenario(name: "getPet, concurrency 32", concurrency: 32, requests: 6_400, raw: { try await get(baseline) }, trellis: { try await get(trellis) }),
                CallBenchmark.Scenario(name: "createPet, sequential", concurrency: 1, requests: 1_000, raw: { try await post(baseline) }, trellis: { try await post(trellis) }),
                CallBenchmark.Scenario(name: "createPet, concurrency 32", concurrency: 32, requests: 6_400, raw: { try await post(baseline) }, trellis: { try await post(trellis) }),
            ]
            if let profiled = ProcessInfo.processInfo.environment["TRELLIS_BENCH_PROFILE"] {
                try await CallBenchmark.profile(profiled, scenarios)
                return []
            }
            let chosen = ProcessInfo.processInfo.environment["TRELLIS_BENCH_CASES"].map { Set($0.split(separator: ",").compactMap { Int($0) }) }
            var rows: [CallRow] = []
            for (index, scenario) in scenarios.enumerated() where chosen?.contains(index) ?? true {
                rows.append(try await CallBenchmark.measure(scenario, rounds: rounds))
            }
            return rows
        }
    }
}

/// The two operations the suite calls; a fixed pet, and a created one echoed back.
private struct PetStoreHandler: APIProtocol {
    typealias Pet = Components.Schemas.Pet

    func install(_ router: Router<BasicRequestContext>) {
        do {
            try registerHandlers(on: router, serverURL: URL(string: "/v1")!)
        } catch {
            fatalError("the generated server's routes could not be registered: \(error)")
        }
    }

    func getPet(_ input: Operations.GetPet.Input) async throws -> Operations.GetPet.Output {
        .ok(.init(body: .json(Pet(id: input.path.petId, name: "Rex", species: "dog"))))
    }

    func createPet(_ input: Operations.CreatePet.Input) async throws -> Operations.CreatePet.Output {
        guard case .json(let new) = input.body else { return .undocumented(statusCode: 400, .init()) }
        return .created(.init(body: .json(Pet(id: 100, name: new.name, species: new.species))))
    }

    func listPets(_ input: Operations.ListPets.Input) async throws -> Operations.ListPets.Output { .undocumented(statusCode: 501, .init()) }
    func downloadPhoto(_ input: Operations.DownloadPhoto.Input) async throws -> Operations.DownloadPhoto.Output { .undocumented(statusCode: 501, .init()) }
    func uploadPhoto(_ input: Operations.UploadPhoto.Input) async throws -> Operations.UploadPhoto.Output { .undocumented(statusCode: 501, .init()) }
    func getOwner(_ input: Operations.GetOwner.Input) async throws -> Operations.GetOwner.Output { .undocumented(statusCode: 501, .init()) }
    func refreshToken(_ input: Operations.RefreshToken.Input) async throws -> Operations.RefreshToken.Output { .undocumented(statusCode: 501, .init()) }
    func getInventory(_ input: Operations.GetInventory.Input) async throws -> Operations.GetInventory.Output { .undocumented(statusCode: 501, .init()) }
    func hold(_ input: Operations.Hold.Input) async throws -> Operations.Hold.Output { .undocumented(statusCode: 501, .init()) }
}

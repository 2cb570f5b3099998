import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import OpenAPIHummingbird
import OpenAPIRuntime
import TrellisOpenAPIFixture

/// The server generated from `Tests/TrellisOpenAPIFixture/openapi.yaml`, on Hummingbird, with
/// the counters and signals TrellisOpenAPI's tests assert on.
final class PetStoreServer: APIProtocol {
    typealias Pet = Components.Schemas.Pet

    struct State {
        var pets: [Pet] = [
            Pet(id: 1, name: "Rex", species: "dog"),
            Pet(id: 2, name: "Tom", species: "cat"),
            Pet(id: 3, name: "Fido", species: "dog"),
        ]
        var validToken = "token-0"
        var tokensIssued = 0
        var inventoryFailuresLeft = 0
        var inventoryCalls = 0
        /// The `Authorization` of every request, by operation, in arrival order.
        var authorizations: [String: [String?]] = [:]
    }

    let state = NIOLockedValueBox(State())
    /// Yields the bytes of an upload received so far, each time a chunk arrives.
    let uploadProgress: AsyncStream<Int>
    private let uploadSink: AsyncStream<Int>.Continuation
    /// Yields once when a request reaches `hold`.
    let holding: AsyncStream<Void>
    private let holdingSink: AsyncStream<Void>.Continuation
    /// `downloadPhoto` sends its first chunk, then waits here before sending the rest; the
    /// test yields once the client has read that first chunk.
    let downloadGate: AsyncStream<Void>
    let downloadGateSink: AsyncStream<Void>.Continuation

    init() {
        (uploadProgress, uploadSink) = AsyncStream.makeStream(of: Int.self)
        (holding, holdingSink) = AsyncStream.makeStream(of: Void.self)
        (downloadGate, downloadGateSink) = AsyncStream.makeStream(of: Void.self)
    }

    /// The request's `Authorization`, which generated handlers do not see (security schemes
    /// are not parameters), handed over by ``AuthorizationCapture``.
    @TaskLocal static var authorization: String?

    func install(_ router: Router<BasicRequestContext>) {
        router.middlewares.add(AuthorizationCapture())
        do {
            try registerHandlers(on: router, serverURL: URL(string: "/v1")!)
        } catch {
            fatalError("the generated server's routes could not be registered: \(error)")
        }
    }

    private func record(_ operation: String) {
        let authorization = Self.authorization
        state.withLockedValue { $0.authorizations[operation, default: []].append(authorization) }
    }

    func authorizations(of operation: String) -> [String?] {
        state.withLockedValue { $0.authorizations[operation] ?? [] }
    }

    /// Makes the current token invalid, as its expiry on the server would.
    func expireToken() {
        state.withLockedValue { $0.validToken = "expired-\($0.tokensIssued)" }
    }

    func listPets(_ input: Operations.ListPets.Input) async throws -> Operations.ListPets.Output {
        record("listPets")
        var pets = state.withLockedValue { $0.pets }
        if let species = input.query.species { pets = pets.filter { $0.species == species } }
        if let limit = input.query.limit { pets = Array(pets.prefix(limit)) }
        return .ok(.init(body: .json(pets)))
    }

    func createPet(_ input: Operations.CreatePet.Input) async throws -> Operations.CreatePet.Output {
        record("createPet")
        guard case .json(let new) = input.body else { throw PetStoreError.unexpectedBody }
        let pet = state.withLockedValue { state in
            let pet = Pet(id: (state.pets.map(\.id).max() ?? 0) + 1, name: new.name, species: new.species)
            state.pets.append(pet)
            return pet
        }
        return .created(.init(body: .json(pet)))
    }

    func getPet(_ input: Operations.GetPet.Input) async throws -> Operations.GetPet.Output {
        record("getPet")
        let id = input.path.petId
        guard let pet = state.withLockedValue({ $0.pets.first { $0.id == id } }) else {
            return .notFound(.init(body: .json(.init(message: "no pet has ID \(id)"))))
        }
        return .ok(.init(body: .json(pet)))
    }

    func uploadPhoto(_ input: Operations.UploadPhoto.Input) async throws -> Operations.UploadPhoto.Output {
        record("uploadPhoto")
        // An upload that carries a token must carry the valid one (the document leaves the
        // operation open, so a refused one is an undocumented 401).
        let valid = state.withLockedValue { $0.validToken }
        if let authorization = Self.authorization, authorization != "Bearer \(valid)" {
            return .undocumented(statusCode: 401, .init())
        }
        guard case .binary(let body) = input.body else { throw PetStoreError.unexpectedBody }
        var hash = SHA256()
        var received = 0
        for try await chunk in body {
            hash.update(data: Data(chunk))
            received += chunk.count
            uploadSink.yield(received)
        }
        let digest = hash.finalize().map { String(format: "%02x", $0) }.joined()
        return .ok(.init(body: .json(.init(bytes: Int64(received), sha256: digest))))
    }

    func downloadPhoto(_ input: Operations.DownloadPhoto.Input) async throws -> Operations.DownloadPhoto.Output {
        record("downloadPhoto")
        let size = input.query.size
        let gate = downloadGate
        let chunkSize = 64 * 1024
        let chunks = AsyncThrowingStream<ArraySlice<UInt8>, any Error> { continuation in
            let producer = Task {
                var sent = 0
                var gateIterator = gate.makeAsyncIterator()
                while sent < size {
                    let count = min(chunkSize, size - sent)
                    continuation.yield(ArraySlice(repeating: UInt8(truncatingIfNeeded: sent / chunkSize), count: count))
                    if sent == 0, size > count {
                        guard await gateIterator.next() != nil else { break }
                    }
                    sent += count
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in producer.cancel() }
        }
        return .ok(.init(body: .binary(HTTPBody(chunks, length: .unknown, iterationBehavior: .single))))
    }

    func getOwner(_ input: Operations.GetOwner.Input) async throws -> Operations.GetOwner.Output {
        record("getOwner")
        let valid = state.withLockedValue { $0.validToken }
        guard Self.authorization == "Bearer \(valid)" else { return .unauthorized(.init()) }
        return .ok(.init(body: .json(.init(name: "Ada"))))
    }

    func refreshToken(_ input: Operations.RefreshToken.Input) async throws -> Operations.RefreshToken.Output {
        record("refreshToken")
        let token = state.withLockedValue { state in
            state.tokensIssued += 1
            state.validToken = "token-\(state.tokensIssued)"
            return state.validToken
        }
        return .ok(.init(body: .json(.init(accessToken: token))))
    }

    func getInventory(_ input: Operations.GetInventory.Input) async throws -> Operations.GetInventory.Output {
        record("getInventory")
        let fails = state.withLockedValue { state in
            state.inventoryCalls += 1
            guard state.inventoryFailuresLeft > 0 else { return false }
            state.inventoryFailuresLeft -= 1
            return true
        }
        if fails { return .serviceUnavailable(.init()) }
        let counts = state.withLockedValue { Dictionary($0.pets.map { ($0.species, 1) }, uniquingKeysWith: +) }
        return .ok(.init(body: .json(.init(additionalProperties: counts))))
    }

    func hold(_ input: Operations.Hold.Input) async throws -> Operations.Hold.Output {
        record("hold")
        holdingSink.yield()
        // Held until the server stops (which cancels this handler); the client gives up first.
        let (never, keptOpen) = AsyncStream.makeStream(of: Void.self)
        for await _ in never {}
        keptOpen.finish()
        return .noContent(.init())
    }
}

enum PetStoreError: Error {
    case unexpectedBody
}

/// Hands each request's `Authorization` to the generated handlers through a task-local.
struct AuthorizationCapture: RouterMiddleware {
    typealias Context = BasicRequestContext

    func handle(_ request: Hummingbird.Request, context: Context, next: (Hummingbird.Request, Context) async throws -> Hummingbird.Response) async throws -> Hummingbird.Response {
        try await PetStoreServer.$authorization.withValue(request.headers[.authorization]) {
            try await next(request, context)
        }
    }
}

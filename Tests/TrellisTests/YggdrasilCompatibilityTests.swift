import Foundation
import Hummingbird
import NIOCore
import Testing
import Trellis

// Yggdrasil's README, as close as Trellis allows (the migration table in the README gives the
// mapping for what is spelled differently).

// httpbin.org/uuid response: { "uuid": "0a4f1b83-8781-4258-8d72-635edbfa79b5" }
struct HttpBinUUID: Decodable {
    let uuid: String
}

// Make parsable
extension HttpBinUUID: Parsable {}

/// Yggdrasil parses an image with `UIImage(data:)`; Linux has no UIImage, so this "image" is a
/// PPM header, parsed by its own function the same way.
struct Image: Parsable {
    enum MyErrors: Error { case imageConversionFailed }

    let width: Int
    let height: Int

    static func parseData(_ data: Data) throws -> Image {
        let words = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard words.count >= 3, words[0] == "P6", let width = Int(words[1]), let height = Int(words[2]) else {
            throw MyErrors.imageConversionFailed
        }
        return Image(width: width, height: height)
    }
}

/// Decodable, yet made by its own `parseData(_:)`: adopting `Parsable` asks for it.
struct Shouting: Decodable, Parsable {
    let text: String

    static func parseData(_ data: Data) throws -> Shouting {
        Shouting(text: String(decoding: data, as: UTF8.self).uppercased())
    }
}

@Service
protocol HttpBin {
    @GET("/uuid")
    func uuid() async throws -> HttpBinUUID

    @GET("/image")
    func image() async throws -> Image

    @GET("/broken-image")
    func brokenImage() async throws -> Image

    @GET("/text")
    func shouting() async throws -> Shouting
}

@Suite("Yggdrasil's examples")
struct YggdrasilCompatibilityTests {
    private static func install(_ router: Router<BasicRequestContext>) {
        router.get("uuid") { _, _ in
            Hummingbird.Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{ "uuid": "0a4f1b83-8781-4258-8d72-635edbfa79b5" }"#)))
        }
        router.get("image") { _, _ in
            Hummingbird.Response(status: .ok, headers: [.contentType: "image/x-portable-pixmap"], body: .init(byteBuffer: ByteBuffer(string: "P6 2048 1024 255\n")))
        }
        router.get("broken-image") { _, _ in
            Hummingbird.Response(status: .ok, headers: [.contentType: "image/png"], body: .init(byteBuffer: ByteBuffer(string: "not an image")))
        }
        router.get("text") { _, _ in
            Hummingbird.Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "quiet")))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func parsableTypesAreMadeByTheirOwnFunction(_ kind: TransportKind) async throws {
        try await TestServer.with(Self.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            let httpBin = HttpBinService(client: client)

            let uuid = try await httpBin.uuid()
            #expect(uuid.uuid == "0a4f1b83-8781-4258-8d72-635edbfa79b5")
            let image = try await httpBin.image()
            #expect(image.width == 2048 && image.height == 1024)
            let shouting = try await httpBin.shouting()
            #expect(shouting.text == "QUIET")

            // Without a service, as Yggdrasil's tasks do.
            let direct = try await client.value(for: Trellis.Request(method: .get, url: url.appending(path: "image")), as: Image.self)
            #expect(direct.width == 2048)

            let error = await #expect(throws: TrellisError.self) { try await httpBin.brokenImage() }
            guard case .decodingFailed(let failure) = error else {
                Issue.record("expected decodingFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.bodyExcerpt == "not an image")
            #expect(failure.type.hasSuffix("Image"))
            #expect(failure.reason.contains("imageConversionFailed"))
        }
    }
}

// An enum adopting the EndpointType protocol defining two API endpoints. Yggdrasil's names a
// fixed host; this one takes the test server's.
enum BaconIpsumEndpoints: EndpointType {
    case meatAndFiller(server: String)
    case allMeat(server: String)

    var baseUrl: String {
        switch self {
        case .meatAndFiller(let server), .allMeat(let server): return server
        }
    }

    var path: String {
        switch self {
        case .meatAndFiller:
            return "/echo/api"
        case .allMeat:
            return "/echo/api/"
        }
    }

    var parameters: [String: Any] {
        switch self {
        case .meatAndFiller:
            return ["type": "meat-and-filler"]
        case .allMeat:
            return ["type": "all-meat", "paras": "2", "start-with-lorem": "1"]
        }
    }
}

@Suite("Yggdrasil's endpoint values")
struct YggdrasilEndpointTests {
    @Test(arguments: TransportKind.allCases)
    func anEnumOfEndpointsIsSentThroughTheClient(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            let server = url.absoluteString

            let meat = try await client.value(for: BaconIpsumEndpoints.meatAndFiller(server: server), as: Echo.self)
            #expect(meat.method == "GET")
            #expect(meat.path == "/echo/api")
            #expect(meat.query == "type=meat-and-filler")

            let all = try await client.value(for: BaconIpsumEndpoints.allMeat(server: server), as: Echo.self)
            #expect(all.path == "/echo/api/")
            #expect(all.query == "paras=2&start-with-lorem=1&type=all-meat")

            // Defines an endpoint with parameters; a POST sends them as a form.
            let endpoint = NetworkEndpoint(
                baseUrl: server,
                path: "/echo/form",
                method: .post,
                parameters: ["type": "meat & filler", "tags": ["a", "b"]],
                headers: ["X-Trace": "t1"]
            )
            let posted = try await client.value(for: endpoint, as: Echo.self)
            #expect(posted.method == "POST")
            #expect(posted.body == "tags=a&tags=b&type=meat+%26+filler")
            #expect(posted.header("Content-Type") == "application/x-www-form-urlencoded")
            #expect(posted.header("X-Trace") == "t1")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func anEndpointValueGoesThroughThePipelineLikeAnyCall(_ kind: TransportKind) async throws {
        let flaky = FlakyRoutes()
        try await TestServer.with({ router in
            TestRoutes.install(router)
            flaky.install(router)
        }) { url in
            let sleeper = RecordingSleeper()
            // The client retries nothing; the request's retryCount does, with the client's waits.
            let client = Client(baseURL: url, transport: kind.transport) { sleeper.retry(&$0, maximumRetries: 0) }
            let request = try Trellis.Request(
                url: url.absoluteString + "/flaky/ygg-\(kind)?status=503&failures=2",
                ignoreLocalCache: true,
                retryCount: 2
            )
            let attempt = try await client.value(for: request, as: Attempt.self)
            #expect(attempt.attempt == 3)
            #expect(sleeper.recorded.count == 2)

            // An endpoint whose base URL is not one fails before anything is sent.
            let broken = Endpoint(baseUrl: "baconipsum.com", path: "/api")
            let error = await #expect(throws: TrellisError.self) { try await client.perform(broken) }
            guard case .invalidRequest = error else {
                Issue.record("expected invalidRequest, got \(String(describing: error))")
                return
            }
        }
    }
}

// Network request using the defined BaconIpsumEndpoints.
struct LoremRequest: RequestType {
    let endpoint: any EndpointType  // Yggdrasil writes `EndpointType`; Swift 6 asks for `any`
    let retryCount = 3
    let ignoreLocalCache = true

    var preconditions: [RequestPrecondition] = []
    var responseValidations: [ResponseValidation] = []
}

extension YggdrasilEndpointTests {
    @Test(arguments: TransportKind.allCases)
    func aRequestValueAddsRetriesAndChecksToItsEndpoint(_ kind: TransportKind) async throws {
        let flaky = FlakyRoutes()
        try await TestServer.with({ router in
            TestRoutes.install(router)
            flaky.install(router)
        }) { url in
            let sleeper = RecordingSleeper()
            let client = Client(baseURL: url, transport: kind.transport) { sleeper.retry(&$0, maximumRetries: 0) }
            let server = url.absoluteString

            var loremRequest = LoremRequest(endpoint: BaconIpsumEndpoints.meatAndFiller(server: server))
            // Adding a response validation check
            loremRequest.responseValidations.append(ResponseValidation("the status is below 300") { response, _ in
                guard response.status.code < 300 else { throw URLError(.badServerResponse) }
            })
            let echo = try await client.value(for: loremRequest, as: Echo.self)
            #expect(echo.query == "type=meat-and-filler")

            // Three retries after the first attempt: a flaky endpoint failing twice succeeds.
            let flakyRequest = LoremRequest(endpoint: Endpoint(baseUrl: server, path: "/flaky/lorem-\(kind)", parameters: ["status": 503, "failures": 2]))
            let attempt = try await client.value(for: flakyRequest, as: Attempt.self)
            #expect(attempt.attempt == 3)
            #expect(sleeper.recorded.count == 2)

            // Adding a precondition check: nothing is sent when it fails.
            struct NoActiveUser: Error {}
            loremRequest.preconditions.append(RequestPrecondition("the user is signed in") { _ in throw NoActiveUser() })
            let error = await #expect(throws: TrellisError.self) { try await client.perform(loremRequest) }
            guard case .preconditionFailed(let failure) = error else {
                Issue.record("expected preconditionFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.name == "the user is signed in")
        }
    }

    /// The parameter and error cases a `@Service` endpoint is tested with, for endpoint values.
    @Test(arguments: TransportKind.allCases)
    func endpointParametersAreEncodedAndErrorsReportedAsAServicesAre(_ kind: TransportKind) async throws {
        try await TestServer.with(TestRoutes.install) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            let server = url.absoluteString
            let missing: Int? = nil
            let page: Int? = 2
            let query = Endpoint(baseUrl: server, path: "/echo/search", parameters: [
                "q": "café & crème = 100% +1",
                "tags": ["a b", "c/d"],
                "page": page,
                "missing": missing,
                "flag": true,
                "at": Date(timeIntervalSince1970: 1.5),
            ])
            let echoed = try await client.value(for: query, as: Echo.self)
            #expect(echoed.values(of: "q") == ["café & crème = 100% +1"])
            #expect(echoed.values(of: "tags") == ["a b", "c/d"])
            #expect(echoed.values(of: "page") == ["2"])
            #expect(echoed.values(of: "missing") == [])
            #expect(echoed.values(of: "flag") == ["true"])
            #expect(echoed.values(of: "at") == ["1970-01-01T00:00:01.500Z"])

            // In a form body the same values, form-encoded.
            let form = Endpoint(baseUrl: server, path: "/echo/form", method: .put, parameters: ["q": "a+b c", "missing": missing])
            let posted = try await client.value(for: form, as: Echo.self)
            #expect(posted.body == "q=a%2Bb+c")

            // A status outside 2xx is unacceptableStatus, its problem details decoded.
            let problem = Endpoint(baseUrl: server, path: "/problem")
            let error = await #expect(throws: TrellisError.self) { try await client.value(for: problem, as: Echo.self) }
            guard case .unacceptableStatus(let failure) = error else {
                Issue.record("expected unacceptableStatus, got \(String(describing: error))")
                return
            }
            #expect(failure.status.code == 422)
            #expect(failure.problem?.detail == "Item 7 is sold out")

            // A body that is not the type asked for is decodingFailed, with the body.
            let text = Endpoint(baseUrl: server, path: "/text")
            let decoding = await #expect(throws: TrellisError.self) { try await client.value(for: text, as: Echo.self) }
            guard case .decodingFailed = decoding else {
                Issue.record("expected decodingFailed, got \(String(describing: decoding))")
                return
            }
        }
    }

    /// An endpoint value is cancelled as a service's call is: the task's cancellation closes
    /// the connection and the call throws `CancellationError`.
    @Test(.hangGuard, arguments: TransportKind.allCases)
    func cancellingAnEndpointCallClosesTheConnection(_ kind: TransportKind) async throws {
        let silent = try await SilentServer()
        let client = Client(baseURL: silent.url, transport: kind.transport) { $0.timeouts.request = .seconds(600) }
        let endpoint = Endpoint(baseUrl: silent.url.absoluteString, path: "/text")
        let call = Task { try await client.value(for: endpoint, as: String.self) }
        var events = silent.events.makeAsyncIterator()
        #expect(await events.next() == .requestReceived)
        call.cancel()
        let result = await call.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(await events.next() == .connectionClosed)
        try await silent.stop()
    }
}

@Suite("Yggdrasil's tasks")
struct YggdrasilTaskTests {
    private static func install(_ router: Router<BasicRequestContext>) {
        TestRoutes.install(router)
        router.get("image") { _, _ in
            Hummingbird.Response(status: .ok, headers: [.contentType: "image/x-portable-pixmap"], body: .init(byteBuffer: ByteBuffer(string: "P6 1024 1024 255\n")))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func quickStartAndExecutionTasksRun(_ kind: TransportKind) async throws {
        try await TestServer.with(Self.install) { url in
            // Yggdrasil's tasks use a default client: the shared one, unless one is given.
            let client = kind == .asyncHTTPClient ? Client.shared : Client(baseURL: url, transport: kind.transport)
            let server = url.absoluteString

            let imageDownloadTask = DownloadTask(url: server + "/image", client: client)
            let file = try await imageDownloadTask.value
            #expect(try Data(contentsOf: file.url) == Data("P6 1024 1024 255\n".utf8))
            try? FileManager.default.removeItem(at: file.url)

            // Data task which returns the downloaded data as Swift data structure
            let imageData = try await DataTask<Data>(url: server + "/image", client: client).value
            #expect(imageData.count == 17)

            // Upload task which does a POST request to the given URL; the response is a JSON dictionary
            let uploadTask = UploadTask<JSONDictionary>(url: server + "/echo/body", dataToUpload: .data(imageData), client: client)
            let jsonUpload = try await uploadTask.value
            #expect(jsonUpload["method"] == .string("POST"))
            #expect(jsonUpload["body"] == .string("P6 1024 1024 255\n"))

            let imageEndPoint = Endpoint(baseUrl: server, path: "/image")
            let image = try await DataTask<Data>(endpoint: imageEndPoint, client: client).value
            #expect(try Image.parseData(image).width == 1024)

            // Download task with custom file URL
            let downloadDestinationURL = FileManager.default.temporaryDirectory
                .appendingPathComponent("MyImage-\(UUID().uuidString)")
                .appendingPathExtension("jpeg")
            let saved = try await DownloadTask(url: server + "/image", downloadDestination: downloadDestinationURL, client: client).value
            #expect(saved.url.standardizedFileURL == downloadDestinationURL.standardizedFileURL)
            try? FileManager.default.removeItem(at: downloadDestinationURL)

            let multipartEndpoint = Endpoint(baseUrl: server, path: "/echo/body", method: .post)
            let multipartRequest = MultipartFormDataRequest(endpoint: multipartEndpoint, data: imageData, mimeType: "jpeg", dataName: "MyImage")
            let multipartUploadTask = MultipartFormDataUploadTask<Echo>(request: multipartRequest, client: client)
            let echoed = try await multipartUploadTask.value
            #expect(echoed.body.contains("name=\"MyImage\""))
            #expect(echoed.body.contains("Content-Type: image/jpeg"))

            // A dictionary of tasks runs with awaitAll, the values under the same keys.
            let tasks = ["a": DataTask<Data>(url: server + "/image", client: client), "b": DataTask<Data>(url: server + "/text", client: client)]
            let results = try await tasks.awaitAll()
            #expect(results["a"]?.count == 17)
            #expect(results["b"].map { String(decoding: $0, as: UTF8.self) } == "héllo, world")
        }
    }

    /// "Each task has a type parameter which defines the expected return type… These return
    /// types must comply to the `Parsable` protocol": a task of an image made by its own
    /// function, of a `Decodable` type made Parsable by an empty extension, and of one that is
    /// both and parses itself.
    @Test(arguments: TransportKind.allCases)
    func tasksMakeParsableTypesWithTheirOwnFunction(_ kind: TransportKind) async throws {
        try await TestServer.with({ router in
            Self.install(router)
            router.get("uuid") { _, _ in
                Hummingbird.Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"uuid": "0a4f"}"#)))
            }
        }) { url in
            let client = Client(baseURL: url, transport: kind.transport)
            let server = url.absoluteString

            let image = try await DataTask<Image>(url: server + "/image", client: client).value
            #expect(image.width == 1024 && image.height == 1024)
            let fromEndpoint = try await DataTask<Image>(endpoint: Endpoint(baseUrl: server, path: "/image"), client: client).value
            #expect(fromEndpoint.width == 1024)
            let uuid = try await DataTask<HttpBinUUID>(url: server + "/uuid", client: client).value
            #expect(uuid.uuid == "0a4f")
            let shouting = try await UploadTask<Shouting>(url: server + "/echo/body", dataToUpload: .data(Data("quiet".utf8)), client: client).value
            #expect(shouting.text.contains("\"METHOD\":\"POST\""))

            // What parseData throws reaches the task's caller as decodingFailed, with the body.
            let broken = DataTask<Image>(url: server + "/text", client: client)
            let error = await #expect(throws: TrellisError.self) { try await broken.value }
            guard case .decodingFailed(let failure) = error else {
                Issue.record("expected decodingFailed, got \(String(describing: error))")
                return
            }
            #expect(failure.bodyExcerpt == "héllo, world")
        }
    }

    @Test func aTaskForAMalformedURLFailsWhenAwaited() async throws {
        let task = DataTask<Data>(url: "not a url")
        await #expect(throws: TrellisError.self) { try await task.value }
        // The shared client has no base URL of use: a relative URL is refused.
        await #expect(throws: TrellisError.self) { try await DataTask<Data>(url: "/relative").value }
    }
}

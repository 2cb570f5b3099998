// The names the documentation's examples use without declaring them, as a reader would
// assume them: a client, a base URL, a request, the `Blog` service of the getting-started
// article and its values. A document's own declaration of a name wins over this one.
// Scripts/check-examples compiles every document's examples against this module.
public import CoreMetrics
public import Foundation
public import Tracing
public import Trellis

public let url = URL(string: "https://api.example.com/v1")!
public let client = Client(baseURL: url)
public let request = try! Request(method: .get, url: url.appending(path: "posts"))

public struct Post: Codable, Sendable {
    public var id: Int
    public var title: String
    public init(id: Int, title: String) {
        self.id = id
        self.title = title
    }
}

public struct NewPost: Codable, Sendable {
    public var title: String
    public init(title: String) { self.title = title }
}

@Service
public protocol Blog {
    @GET("/posts")
    func posts() async throws -> [Post]

    @GET("/posts/{id}")
    func post(id: Int) async throws -> Post

    @POST("/posts")
    @Body("post")
    func create(post: NewPost) async throws -> Post
}

public let blog = BlogService(client: client)

// Files and bytes an app would have.
public let documents = FileManager.default.temporaryDirectory
public let destination = documents.appending(path: "report.pdf")
public let videoURL = documents.appending(path: "video.mp4")
public let photoURL = documents.appending(path: "photo.jpg")
public let notes = Data("notes".utf8)
public let imageData = Data()
public let data = Data()
public let fileRequests: [Request] = []
public let mirrors: [DownloadTask] = []

// An app's own models, decoded from the answers.
public struct UploadReceipt: Decodable, Sendable {}
public struct Echo: Decodable, Sendable {}
public struct Album: Decodable, Sendable {}
public struct Entry: Decodable, Sendable {}
public struct Order: Encodable, Sendable {}
public struct Receipt: Decodable, Sendable {}
public struct Payment: Encodable, Sendable {}
public let orderID = 42
public struct Report: Decodable, Sendable {}
public struct Comment: Decodable, Sendable {}
public struct User: Decodable, Sendable {}
public struct Quote: Decodable, Sendable {
    public var symbol: String
    public var price: Double
}
public struct Message: Codable, Sendable {
    public var text: String
    public var from: String
    public init(text: String, from: String) {
        self.text = text
        self.from = from
    }
}

// Errors an app would throw from its checks.
public struct Offline: Error {
    public init() {}
}
public struct WrongVersion: Error {
    public init() {}
}

/// Whether the network is reachable, as an app's own monitor would say.
public actor NetworkMonitor {
    public var isOnline = true
}
public let monitor = NetworkMonitor()
public let hasToken = RequestPrecondition("a token is stored") { _ in }

// What an app bootstraps for observability.
public let tracer: any Tracer = NoOpTracer()
public let metrics: any MetricsFactory = NOOPMetricsHandler.instance
public struct MyServerError: Decodable, Sendable {
    public var message: String
}

// An app's own pieces, as the configuration examples name them.
public struct UserAgent: Middleware {
    public init() {}
    public func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        var request = request
        request.headerFields[.userAgent] = "MyApp/1.0"
        return try await next(request)
    }
}

public struct MyRefresher: TokenRefresher {
    public init() {}
    public func refreshToken(_ current: AccessToken?, label: String, client: Client) async throws -> any AccessTokenConvertible {
        AccessToken(accessToken: "new", refreshToken: current?.refreshToken, expiresIn: 3600)
    }
}

/// Counts the calls it sees; its other events are the protocol's defaults.
public struct Audit: ClientEventMonitor {
    public init() {}
    public func requestWillBeSent(_ request: Request, hop: Int) {}
}

public let myDecoder = JSONDecoder()
public let stamp: BeforeSending = { $0 }
public let audit = Audit()
public let sharedJar = CookieJar()

// Certificates an app bundles.
public let apiURL = url
public let rootCAURL = documents.appending(path: "root-ca.pem")
public let serverPEM = "-----BEGIN CERTIFICATE-----\n…\n-----END CERTIFICATE-----"
public let certificateData = Data()
public let appSupport = documents
public let cachesFolder = documents.appending(path: "Caches")
public let bigText = String(repeating: "log line\n", count: 1000)
public let supportDirectory = documents

public struct Credentials: Encodable, Sendable {
    public var user: String
    public var password: String
    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }
}
public struct RefreshGrant: Encodable, Sendable {
    public var refreshToken: String
    public init(refreshToken: String) { self.refreshToken = refreshToken }
}
public let proxyPassword = "…"
public let clientCertificateURL = documents.appending(path: "client.pem")
public let clientKeyURL = documents.appending(path: "client-key.pem")

/// Where an app keeps its secrets.
public struct Vault: Sendable {
    public func secret(named name: String) async throws -> String { "…" }
}
public let vault = Vault()
public let clientArchiveURL = documents.appending(path: "client.p12")
public let archivePassword = "…"
public let environmentProxy: ProxySettings? = nil
public let companyAuthority: [TrustedCertificate] = []
public let serviceIdentity: ClientIdentity? = nil
public struct ContainerSummary: Decodable, Sendable {
    // Docker's spelling.
    // swiftlint:disable:next identifier_name
    public let Id: String
}

import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing

/// Checks a source's diagnostics (message, position, fix-its and the fixed source), leaving
/// the generated code to the expansion tests.
func assertDiagnostics(
    _ source: String,
    _ diagnostics: [DiagnosticSpec],
    fixedSource: String? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    assertMacroExpansion(
        source,
        expandedSource: "",
        diagnostics: diagnostics,
        macroSpecs: trellisMacros,
        fixedSource: fixedSource,
        failureHandler: { failure in
            guard !failure.message.hasPrefix("Macro expansion did not produce the expected expanded source") else { return }
            Issue.record(Comment(rawValue: failure.message), sourceLocation: sourceLocation)
        }
    )
}

@Suite("@Service diagnostics")
struct DiagnosticTests {
    @Test func placeholderWithoutParameterSuggestsTheClosestOne() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET("/posts/{postId}")
                func post(postID: Int) async throws -> Post
            }
            """,
            [
                DiagnosticSpec(
                    message: "the path placeholder {postId} has no matching parameter in 'post'",
                    line: 3, column: 10,
                    fixIts: [FixItSpec(message: "Use the parameter 'postID'")]
                )
            ],
            fixedSource: """
                @Service
                protocol Blog {
                    @GET("/posts/{postID}")
                    func post(postID: Int) async throws -> Post
                }
                """
        )
    }

    @Test func serviceURLMustBeAnAbsoluteHTTPURLLiteral() {
        assertDiagnostics(
            """
            @Service(url: "my-endpoint.com/api")
            protocol Blog {
                @GET("/posts")
                func posts() async throws -> [Post]
            }
            """,
            [DiagnosticSpec(message: "'my-endpoint.com/api' is not an absolute http, https, ws or wss URL with a host", line: 1, column: 15)]
        )
        assertDiagnostics(
            """
            @Service(url: baseURLString)
            protocol Blog {
                @GET("/posts")
                func posts() async throws -> [Post]
            }
            """,
            [DiagnosticSpec(message: "@Service(url:) takes a string literal, so the URL can be checked when the service compiles", line: 1, column: 15)]
        )
    }

    @Test func placeholderWithNothingCloseHasNoFixIt() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET("/posts/{id}")
                func posts() async throws -> [Post]
            }
            """,
            [DiagnosticSpec(message: "the path placeholder {id} has no matching parameter in 'posts'", line: 3, column: 10)]
        )
    }

    @Test func parameterInPathAndBody() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @PUT("/posts/{post}")
                @Body("post")
                func update(post: Post) async throws
            }
            """,
            [
                DiagnosticSpec(
                    message: "'post' is bound to the path placeholder {post} and named by @Body; a parameter can only be one of them",
                    line: 4, column: 5
                )
            ]
        )
    }

    @Test func twoMethodMacrosOfferToRemoveOne() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET("/posts") @POST("/posts")
                func posts() async throws -> [Post]
            }
            """,
            [
                DiagnosticSpec(
                    message: "'posts' has more than one HTTP method macro; keep one of @GET, @POST",
                    line: 3, column: 20,
                    fixIts: [FixItSpec(message: "Remove @POST")]
                )
            ],
            fixedSource: """
                @Service
                protocol Blog {
                    @GET("/posts") 
                    func posts() async throws -> [Post]
                }
                """
        )
    }

    @Test func functionWithoutMethodMacro() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                func posts() async throws -> [Post]
            }
            """,
            [DiagnosticSpec(message: "'posts' needs an HTTP method macro such as @GET(\"/path\") or @POST(\"/path\")", line: 3, column: 10)]
        )
    }

    @Test func functionThatIsNotAsyncThrowsGetsAFixIt() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET("/posts")
                func posts() -> [Post]
            }
            """,
            [
                DiagnosticSpec(
                    message: "'posts' must be declared 'async throws': it sends a request over the network",
                    line: 4, column: 15,
                    fixIts: [FixItSpec(message: "Declare 'posts' as 'async throws'")]
                )
            ],
            fixedSource: """
                @Service
                protocol Blog {
                    @GET("/posts")
                    func posts() async throws -> [Post]
                }
                """
        )
    }

    @Test func asyncWithoutThrowsIsReported() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @DELETE("/posts")
                func clear() async
            }
            """,
            [
                DiagnosticSpec(
                    message: "'clear' must be declared 'async throws': it sends a request over the network",
                    line: 4, column: 15,
                    fixIts: [FixItSpec(message: "Declare 'clear' as 'async throws'")]
                )
            ],
            fixedSource: """
                @Service
                protocol Blog {
                    @DELETE("/posts")
                    func clear() async throws
                }
                """
        )
    }

    @Test func bodyNamingAMissingParameter() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @POST("/posts")
                @Body("pots")
                func create(post: NewPost) async throws -> Post
            }
            """,
            [
                DiagnosticSpec(
                    message: "@Body names 'pots', but 'create' has no parameter of that name",
                    line: 4, column: 11,
                    fixIts: [FixItSpec(message: "Use the parameter 'post'")]
                )
            ],
            fixedSource: """
                @Service
                protocol Blog {
                    @POST("/posts")
                    @Body("post")
                    func create(post: NewPost) async throws -> Post
                }
                """
        )
    }

    @Test(arguments: [
        ("https://evil.example/posts", "the path must be relative to the base URL, not an absolute URL (\"https://evil.example/posts\")"),
        ("/posts with space", "the path contains a space, which is not allowed in a URL; percent-encode it"),
        ("/posts/{id", "'{' without a matching '}' in the path"),
        ("/posts/id}", "'}' without a matching '{' in the path"),
        ("/posts#top", "the path must not contain a fragment ('#')"),
        ("/posts?id={id}", "placeholders are only allowed in the path, not in the query; add the value as a parameter instead"),
        ("/posts/{1id}", "\"{1id}\" is not a valid placeholder: the name must be a Swift identifier"),
        ("/posts/{id}/{id}", "the placeholder {id} appears more than once"),
        ("/posts/{id=}", "the placeholder {id=} has an empty default value"),
        ("/100%", "'%' must start a percent-encoded byte such as %20"),
    ])
    func invalidPaths(_ path: String, _ problem: String) {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET("\(path)")
                func post(id: Int) async throws -> Post
            }
            """,
            [DiagnosticSpec(message: "\"\(path)\" is not a valid relative URL: \(problem)", line: 3, column: 10)]
        )
    }

    @Test func pathMustBeALiteral() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET(postsPath)
                func posts() async throws -> [Post]
            }
            """,
            [DiagnosticSpec(message: "the path of @GET must be a string literal without interpolation", line: 3, column: 5)]
        )
    }

    @Test func aStaticEndpointIsRefusedAtItsDeclaration() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET("/posts")
                static func posts() async throws -> [Post]
            }
            """,
            [
                DiagnosticSpec(
                    message: "'posts' is declared 'static': an endpoint is called on a service, which holds the client that sends it; remove 'static'",
                    line: 4, column: 5,
                    fixIts: [FixItSpec(message: "Remove 'static'")]
                )
            ],
            fixedSource: """
                @Service
                protocol Blog {
                    @GET("/posts")
                    func posts() async throws -> [Post]
                }
                """
        )
    }

    @Test func serviceOnSomethingOtherThanAProtocol() {
        assertDiagnostics(
            """
            @Service
            struct Blog {
            }
            """,
            [DiagnosticSpec(message: "@Service applies to a protocol; declare the API as 'protocol' and Trellis writes the class", line: 1, column: 1)]
        )
    }

    @Test func headerProblems() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET("/posts")
                @Header("X Trace", "trace")
                @Header("X-Other", "tarce")
                @Headers(["Accept": "a\\nb", "Bad Name": "x"])
                func posts(trace: String) async throws -> [Post]
            }
            """,
            [
                DiagnosticSpec(message: "\"X Trace\" is not a valid HTTP header name", line: 4, column: 13),
                DiagnosticSpec(
                    message: "@Header names 'tarce', but 'posts' has no parameter of that name",
                    line: 5, column: 24,
                    fixIts: [FixItSpec(message: "Use the parameter 'trace'")]
                ),
                DiagnosticSpec(message: "the value of header \"Accept\" contains CR, LF or NUL", line: 6, column: 25),
                DiagnosticSpec(message: "\"Bad Name\" is not a valid HTTP header name", line: 6, column: 33),
            ]
        )
    }

    @Test func markerArgumentsMustBeLiterals() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @POST("/posts")
                @Body(name)
                @Header(headerName, "x")
                @Headers(commonHeaders)
                func create(x: String) async throws
            }
            """,
            [
                DiagnosticSpec(message: "@Body takes the name of a parameter as a string literal", line: 4, column: 5),
                DiagnosticSpec(message: "@Header takes a header name and a parameter name, both string literals", line: 5, column: 5),
                DiagnosticSpec(message: "@Headers takes a dictionary literal of header names and values", line: 6, column: 5),
            ]
        )
    }

    @Test func twoBodies() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @POST("/posts")
                @Body("a")
                @Body("b")
                func create(a: String, b: String) async throws
            }
            """,
            [DiagnosticSpec(message: "'create' has more than one @Body; a request has one body", line: 5, column: 5)]
        )
    }

    @Test func variadicParameter() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET("/posts")
                func posts(tags: String...) async throws -> [Post]
            }
            """,
            [
                DiagnosticSpec(
                    message: "variadic parameter 'tags' cannot be sent; declare it as an array",
                    line: 4, column: 28,
                    fixIts: [FixItSpec(message: "Declare 'tags' as [String]")]
                )
            ],
            fixedSource: """
                @Service
                protocol Blog {
                    @GET("/posts")
                    func posts(tags: [String]) async throws -> [Post]
                }
                """
        )
    }

    @Test func propertiesAreNotEndpoints() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                var name: String { get }
            }
            """,
            [
                DiagnosticSpec(
                    message: "a @Service protocol declares endpoints as 'async throws' functions; Trellis cannot implement a property (declare it in another protocol, or make it an endpoint)",
                    line: 3, column: 5
                )
            ]
        )
    }

    @Test func methodMacroOutsideAService() {
        assertDiagnostics(
            """
            protocol Blog {
                @GET("/posts")
                func posts() async throws -> [Post]
            }
            """,
            [DiagnosticSpec(message: "@GET only takes effect on a function of a protocol marked @Service", line: 2, column: 5)]
        )
    }

    @Test func requiresAccessTokenOutsideAService() {
        assertDiagnostics(
            """
            protocol Blog {
                @RequiresAccessToken
                func me() async throws -> User
            }
            """,
            [DiagnosticSpec(message: "@RequiresAccessToken only takes effect on a function of a protocol marked @Service", line: 2, column: 5)]
        )
    }

    @Test func tokenLabelOutsideAService() {
        assertDiagnostics(
            """
            @TokenLabel("blog")
            protocol Blog {
            }
            """,
            [DiagnosticSpec(message: "@TokenLabel only takes effect on a protocol marked @Service", line: 1, column: 1)]
        )
    }

    @Test func tokenLabelMustBeALiteral() {
        assertDiagnostics(
            """
            @Service
            @TokenLabel("blog-\\(version)")
            protocol Blog {
            }
            """,
            [DiagnosticSpec(message: "@TokenLabel takes the label as a string literal without interpolation", line: 2, column: 1)]
        )
    }

    @Test func tokenLabelMustNotBeEmpty() {
        assertDiagnostics(
            """
            @Service
            @TokenLabel(" ")
            protocol Blog {
            }
            """,
            [DiagnosticSpec(message: "@TokenLabel needs a non-empty label; remove it to use the default \"TrellisToken\"", line: 2, column: 13)]
        )
    }

    @Test func anInoutParameterIsOneDiagnosticWithAFixIt() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET("/posts/{id}")
                func post(id: inout Int) async throws -> Post
            }
            """,
            [
                DiagnosticSpec(
                    message: "'id' cannot be 'inout': an endpoint sends its parameters and gives nothing back through them",
                    line: 4, column: 19,
                    fixIts: [FixItSpec(message: "Remove 'inout'")]
                )
            ],
            fixedSource: """
                @Service
                protocol Blog {
                    @GET("/posts/{id}")
                    func post(id: Int) async throws -> Post
                }
                """
        )
    }

    @Test func aClosureParameterIsOneDiagnostic() {
        assertDiagnostics(
            """
            @Service
            protocol Blog {
                @GET("/posts")
                func posts(onPage: @escaping @Sendable (Int) -> Void) async throws -> [Post]
            }
            """,
            [DiagnosticSpec(message: "'onPage' is a closure, which cannot be sent in a request; pass a value instead", line: 4, column: 24)]
        )
    }

    /// A function the macro cannot implement gets a stub with the signature as declared, so the
    /// diagnostic at the declaration is the only error: a stub declared `async throws` would
    /// not satisfy a requirement that is not, and add "does not conform to protocol".
    @Test func theStubOfAFunctionThatIsNotAsyncKeepsItsSignature() {
        assertMacroExpansion(
            """
            @Service
            protocol Blog {
                @GET("/posts")
                func posts() -> [Post]
            }
            """,
            expandedSource: """
            protocol Blog {
                func posts() -> [Post]
            }

            final class BlogService: Blog, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func posts() -> [Post] {
                    fatalError("Trellis could not implement 'posts'; see the error reported at its declaration")
                }
            }
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "'posts' must be declared 'async throws': it sends a request over the network",
                    line: 4, column: 15,
                    fixIts: [FixItSpec(message: "Declare 'posts' as 'async throws'")]
                )
            ],
            macroSpecs: trellisMacros,
            failureHandler: { Issue.record(Comment(rawValue: $0.message)) }
        )
    }

    @Test func brokenFunctionsStillGiveACompilingStub() {
        assertMacroExpansion(
            """
            @Service
            protocol Blog {
                @GET("/posts/{id}")
                func posts() async throws -> [Post]
            }
            """,
            expandedSource: """
            protocol Blog {
                func posts() async throws -> [Post]
            }

            final class BlogService: Blog, Trellis.TrellisService {
                let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                static let tokenLabel = Trellis.AccessTokenRequirement.defaultLabel

                /// A service that sends through `client`.
                init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }

                func posts() async throws -> [Post] {
                    fatalError("Trellis could not implement 'posts'; see the error reported at its declaration")
                }
            }
            """,
            diagnostics: [DiagnosticSpec(message: "the path placeholder {id} has no matching parameter in 'posts'", line: 3, column: 10)],
            macroSpecs: trellisMacros,
            failureHandler: { Issue.record(Comment(rawValue: $0.message)) }
        )
    }

    @Test func aDownloadMustReturnAFileOrATask() {
        assertDiagnostics(
            """
            @Service
            protocol Files {
                @GET("/a") @Download
                func fetch() async throws -> Data
            }
            """,
            [DiagnosticSpec(
                message: "@Download writes the body to a file; 'fetch' must return URL, DownloadedFile or DownloadTask, not Data",
                line: 4, column: 31
            )]
        )
    }

    @Test func aWebSocketMustReturnAConnection() {
        assertDiagnostics(
            """
            @Service
            protocol Chat {
                @WebSocket("/chat")
                func chat() async throws -> Data
            }
            """,
            [DiagnosticSpec(
                message: "@WebSocket opens a conversation; 'chat' must return WebSocketConnection, not Data",
                line: 4, column: 30
            )]
        )
    }

    @Test func aConnectionNeedsTheWebSocketMacro() {
        assertDiagnostics(
            """
            @Service
            protocol Chat {
                @GET("/chat")
                func chat() async throws -> WebSocketConnection
            }
            """,
            [DiagnosticSpec(
                message: "'chat' returns WebSocketConnection; declare it with @WebSocket(\"/chat\") instead of @GET",
                line: 3, column: 5
            )]
        )
    }

    @Test func anEventStreamIsReadWithGet() {
        assertDiagnostics(
            """
            @Service
            protocol Feed {
                @POST("/events")
                func events() async throws -> EventStream<Quote>
            }
            """,
            [DiagnosticSpec(
                message: "'events' returns an EventStream, which is read with GET; use @GET instead of @POST",
                line: 3, column: 5
            )]
        )
    }

    @Test func jsonLinesSayWhatEachLineHolds() {
        assertDiagnostics(
            """
            @Service
            protocol Models {
                @POST("/api/generate")
                func generate() async throws -> JSONLines
            }
            """,
            [DiagnosticSpec(
                message: "'generate' returns JSONLines without saying what each line holds; write JSONLines<Value>",
                line: 4, column: 34
            )]
        )
    }

    @Test func aConversationIsNotADownload() {
        assertDiagnostics(
            """
            @Service
            protocol Feed {
                @GET("/events") @Download
                func events() async throws -> EventStream<Quote>
            }
            """,
            [
                DiagnosticSpec(
                    message: "@Download writes the body to a file; 'events' must return URL, DownloadedFile or DownloadTask, not EventStream<Quote>",
                    line: 4, column: 32
                ),
            ]
        )
    }

    @Test func aFileUploadNeedsABody() {
        assertDiagnostics(
            """
            @Service
            protocol Files {
                @POST("/a") @FileUpload
                func upload(image: Data) async throws -> Data
            }
            """,
            [DiagnosticSpec(
                message: "@FileUpload sends the parameter named by @Body as the file; add @Body(\"parameter\") to 'upload'",
                line: 3, column: 17
            )]
        )
    }

    @Test func aFileUploadIsNotAURLEncodedForm() {
        assertDiagnostics(
            """
            @Service
            protocol Files {
                @POST("/a") @FileUpload @FormURLEncoded @Body("image")
                func upload(image: Data) async throws -> Data
            }
            """,
            [DiagnosticSpec(
                message: "'upload' cannot be both @FileUpload (multipart/form-data) and @FormURLEncoded; keep one",
                line: 3, column: 17
            )]
        )
    }

    @Test func retryTakesAnIntegerLiteral() {
        assertDiagnostics(
            """
            @Service
            protocol Feed {
                @GET("/a") @Retry(maximumRetries: count)
                func feed() async throws -> Data
            }
            """,
            [DiagnosticSpec(message: "@Retry takes the number of retries as an integer literal, as in @Retry(maximumRetries: 3)", line: 3, column: 16)]
        )
    }

    @Test func retrysFlagIsABooleanLiteral() {
        assertDiagnostics(
            """
            @Service
            protocol Feed {
                @GET("/a") @Retry(maximumRetries: 2, retriesNonIdempotentMethods: flag)
                func feed() async throws -> Data
            }
            """,
            [DiagnosticSpec(message: "retriesNonIdempotentMethods takes true or false", line: 3, column: 71)]
        )
    }
}

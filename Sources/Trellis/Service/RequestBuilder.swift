public import Foundation
public import HTTPTypes

/// Gathers the parts of one endpoint call (path, query, headers, body) into a ``Request``.
///
/// The code `@Service` generates is a few calls to this type. It is public only because that
/// code is expanded in your module; the leading underscore keeps it out of code completion and
/// the documentation. Build requests by hand with ``Request``.
public struct _RequestBuilder {
    /// The request method.
    public var method: HTTPRequest.Method
    /// The percent-encoded path relative to the client's base URL, starting with `/`.
    public var path: String
    /// The endpoint's template, for logs and metrics.
    public var pathTemplate: String?
    /// The percent-encoded query, without the leading `?`.
    public private(set) var encodedQuery: String
    /// The header fields.
    public var headerFields: HTTPFields = [:]
    /// The body.
    public var body: RequestBody?
    /// The timeout for this call, overriding the client's.
    public var timeout: Duration?
    /// Whether the call carries the service's access token (`@RequiresAccessToken`).
    public var requiresAccessToken = false
    /// `@Retry(maximumRetries:)`: the retries allowed for this endpoint, replacing the client policy's
    /// count (its waits and statuses stay).
    public var maximumRetries: Int?
    /// `@Retry(maximumRetries:retriesNonIdempotentMethods:)`: whether this endpoint is retried even
    /// though its method is not idempotent.
    public var retriesNonIdempotentMethods: Bool?
    /// `@CachePolicy(policy)`: how this endpoint uses the client's ``HTTPCache``.
    public var cachePolicy: CachePolicy?
    /// `@CompressedBody`: whether the body is sent gzipped.
    public var compressesBody = false
    /// `@IdempotencyKey`: the key the call sends on every attempt.
    public var idempotencyKey: IdempotencyKey?

    private var formFields: [(name: String, value: String)]?
    private let encoder: JSONEncoder

    /// Starts a request.
    ///
    /// - Parameters:
    ///   - path: the percent-encoded path (build dynamic segments with ``pathSegment(_:name:)``).
    ///   - query: a static, already encoded query such as `sort=new`.
    ///   - template: the endpoint's path template, kept for logs.
    ///   - encoder: the encoder for JSON bodies.
    public init(
        method: HTTPRequest.Method,
        path: String,
        query: String = "",
        template: String? = nil,
        encoder: JSONEncoder = JSONEncoder()
    ) {
        self.method = method
        self.path = path.hasPrefix("/") ? path : "/" + path
        self.encodedQuery = query
        self.pathTemplate = template
        self.encoder = encoder
    }

    // MARK: Path

    /// One path segment for `value`, percent-encoded so that it cannot change the path's
    /// structure: `"../admin"` becomes `..%2Fadmin`, a single segment.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` naming the parameter when the value is
    ///   `nil`, empty, `.` or `..`, since each would send the request to a different path.
    public static func pathSegment<Value: ParameterValue>(_ value: Value?, name: String) throws -> String {
        try segment(value?.parameterValue, name: name)
    }

    /// One path segment for a `RawRepresentable` value, using its raw value.
    public static func pathSegment<Value: RawRepresentable>(_ value: Value?, name: String) throws -> String
    where Value.RawValue: ParameterValue {
        try segment(value?.rawValue.parameterValue, name: name)
    }

    private static func segment(_ text: String?, name: String) throws -> String {
        guard let text else {
            throw TrellisError.invalidRequest(.init(.pathParameter(name), "path parameter \"\(name)\" is nil"))
        }
        guard !text.isEmpty else {
            throw TrellisError.invalidRequest(.init(.pathParameter(name), "path parameter \"\(name)\" is empty"))
        }
        // Percent-encoded or not, a dot segment is resolved away by URL normalisation on the
        // way (RFC 3986 section 6.2.2.2 decodes %2E first), which changes the path.
        guard text != ".", text != ".." else {
            throw TrellisError.invalidRequest(.init(
                .pathParameter(name), "path parameter \"\(name)\" is \"\(text)\", a dot segment that would change the path"
            ))
        }
        return PercentEncoding.pathSegment(text)
    }

    // MARK: Query

    /// Adds a query item; `nil` adds nothing.
    public mutating func query<Value: ParameterValue>(_ name: String, _ value: Value?) {
        guard let value else { return }
        appendQuery(name, value.parameterValue)
    }

    /// Adds a query item with a raw value; `nil` adds nothing.
    public mutating func query<Value: RawRepresentable>(_ name: String, _ value: Value?)
    where Value.RawValue: ParameterValue {
        guard let value else { return }
        appendQuery(name, value.rawValue.parameterValue)
    }

    /// Adds one query item per element, repeating the name (`tags=a&tags=b`); `nil` adds
    /// nothing.
    public mutating func query<Values: Sequence>(_ name: String, _ values: Values?)
    where Values.Element: ParameterValue {
        guard let values else { return }
        for value in values { appendQuery(name, value.parameterValue) }
    }

    /// Adds one query item per element, with raw values.
    public mutating func query<Values: Sequence>(_ name: String, _ values: Values?)
    where Values.Element: RawRepresentable, Values.Element.RawValue: ParameterValue {
        guard let values else { return }
        for value in values { appendQuery(name, value.rawValue.parameterValue) }
    }

    /// Adds query items given at the call site; an item with a `nil` value is sent as a bare
    /// name (`?flag`).
    /// What a query parameter of any other type meets: an error at the parameter, naming
    /// the types a query holds.
    @available(
        *, unavailable,
        message: "a query parameter is a String, a number, a Bool, a Date, a UUID, a type conforming to ParameterValue, an enum with such raw values, an optional or an array of these; use one, or send this value in the body"
    )
    public mutating func query<Value>(_ name: String, _ value: Value?) {
        fatalError("unavailable")
    }

    public mutating func queryItems(_ items: [URLQueryItem]) {
        for item in items {
            let name = PercentEncoding.queryComponent(item.name)
            if !encodedQuery.isEmpty { encodedQuery += "&" }
            if let value = item.value {
                encodedQuery += name + "=" + PercentEncoding.queryComponent(value)
            } else {
                encodedQuery += name
            }
        }
    }

    private mutating func appendQuery(_ name: String, _ value: String) {
        if !encodedQuery.isEmpty { encodedQuery += "&" }
        encodedQuery += PercentEncoding.queryComponent(name) + "=" + PercentEncoding.queryComponent(value)
    }

    // MARK: Headers

    /// Sets a header from a parameter; `nil` sets nothing.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` naming the header when its value holds
    ///   CR, LF or NUL.
    public mutating func header<Value: ParameterValue>(_ name: String, _ value: Value?) throws {
        guard let value else { return }
        headerFields[try Request.fieldName(name)] = try Request.checkedValue(value.parameterValue, for: name)
    }

    /// Sets a header from a raw-representable parameter; `nil` sets nothing.
    public mutating func header<Value: RawRepresentable>(_ name: String, _ value: Value?) throws
    where Value.RawValue: ParameterValue {
        try header(name, value?.rawValue)
    }

    // MARK: Body

    /// Sends `value` as JSON, encoded with the client's encoder; `nil` sends no body.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when the value cannot be encoded.
    public mutating func body<Value: Encodable>(_ value: Value?) throws {
        guard let value else { return }
        do {
            body = RequestBody(try encoder.encode(value), contentType: "application/json")
        } catch {
            throw TrellisError.invalidRequest(.init(.body, "the body could not be encoded as JSON: \(error)"))
        }
    }

    /// Sends the bytes as they are (`application/octet-stream` unless a header says otherwise).
    public mutating func body(_ data: Data?) throws {
        guard let data else { return }
        body = RequestBody(data)
    }

    /// Sends the text in UTF-8 (`text/plain; charset=utf-8` unless a header says otherwise).
    public mutating func body(_ text: String?) throws {
        guard let text else { return }
        body = RequestBody(text)
    }

    /// Sends a body built elsewhere.
    public mutating func body(_ body: RequestBody?) throws {
        guard let body else { return }
        self.body = body
    }

    /// Sends a `multipart/form-data` form, its files streamed from disk.
    public mutating func body(_ form: MultipartForm?) throws {
        guard let form else { return }
        body = form.makeBody()
    }

    /// Sends `data` as the one file of a `multipart/form-data` form (`@FileUpload`).
    ///
    /// - Parameter parameter: the parameter's name, used as field and file name when
    ///   `description` is `nil`.
    public mutating func fileUpload(_ data: Data?, parameter: String, description: PayloadDescription?) throws {
        guard let data else { return }
        var form = MultipartForm()
        let description = description ?? PayloadDescription(name: parameter, fileName: parameter)
        form.addData(description.name, data, fileName: description.fileName, mimeType: description.mimeType)
        body = form.makeBody()
    }

    /// Sends `file`'s bytes as the one file of a `multipart/form-data` form (`@FileUpload` of an
    /// ``UploadableFile``).
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` naming the parameter when the file cannot
    ///   give its bytes.
    public mutating func fileUpload<File: UploadableFile>(_ file: File?, parameter: String, description: PayloadDescription?) throws {
        guard let file else { return }
        let data: Data
        do {
            data = try file.uploadData()
        } catch {
            throw TrellisError.invalidRequest(InvalidRequest(.body, "the file of '\(parameter)' could not give its bytes: \(error)"))
        }
        let fileName = description?.fileName ?? file.uploadFileName ?? parameter
        var form = MultipartForm()
        form.addData(description?.name ?? parameter, data, fileName: fileName, mimeType: description?.mimeType ?? file.uploadMIMEType)
        body = form.makeBody()
    }

    /// Sends the file at `file` as the one file of a `multipart/form-data` form
    /// (`@FileUpload`), streamed from disk.
    ///
    /// - Parameter parameter: the field name when `description` is `nil`; the file name is then
    ///   the file's own.
    /// - Throws: ``TrellisError/fileFailed(_:)`` when there is no readable file at `file`.
    public mutating func fileUpload(_ file: URL?, parameter: String, description: PayloadDescription?) throws {
        guard let file else { return }
        var form = MultipartForm()
        try form.addFile(
            description?.name ?? parameter,
            fileAt: file,
            fileName: description?.fileName,
            mimeType: description?.mimeType
        )
        body = form.makeBody()
    }

    /// Sends `value` as an `application/x-www-form-urlencoded` form: each property a field,
    /// arrays repeating their name, nested values as `outer[inner]`.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when the value cannot be encoded.
    public mutating func formBody<Value: Encodable>(_ value: Value?) throws {
        guard let value else { return }
        do {
            for field in try FormEncoder().fields(of: value) {
                appendFormField(field.name, field.value)
            }
        } catch {
            throw TrellisError.invalidRequest(.init(.body, "the body could not be encoded as a form: \(error)"))
        }
    }

    /// Makes the body a form even before any field is added, so that a form whose fields are
    /// all `nil` is still sent (empty) as a form.
    public mutating func startForm() {
        if formFields == nil { formFields = [] }
    }

    /// Adds a form field; `nil` adds nothing.
    /// What a form field of any other type meets: an error at the parameter, naming the types
    /// a form field holds.
    @available(
        *, unavailable,
        message: "a form field is a String, a number, a Bool, a Date, a UUID, a type conforming to ParameterValue, an enum with such raw values, an optional or an array of these"
    )
    public mutating func formField<Value>(_ name: String, _ value: Value?) {
        fatalError("unavailable")
    }

    public mutating func formField<Value: ParameterValue>(_ name: String, _ value: Value?) {
        guard let value else { return }
        appendFormField(name, value.parameterValue)
    }

    /// Adds a form field with a raw value; `nil` adds nothing.
    public mutating func formField<Value: RawRepresentable>(_ name: String, _ value: Value?)
    where Value.RawValue: ParameterValue {
        formField(name, value?.rawValue)
    }

    /// Adds one form field per element, repeating the name.
    public mutating func formField<Values: Sequence>(_ name: String, _ values: Values?)
    where Values.Element: ParameterValue {
        guard let values else { return }
        for value in values { appendFormField(name, value.parameterValue) }
    }

    /// Adds one form field per element, with raw values.
    public mutating func formField<Values: Sequence>(_ name: String, _ values: Values?)
    where Values.Element: RawRepresentable, Values.Element.RawValue: ParameterValue {
        guard let values else { return }
        for value in values { appendFormField(name, value.rawValue.parameterValue) }
    }

    private mutating func appendFormField(_ name: String, _ value: String) {
        startForm()
        formFields?.append((name, value))
    }

    // MARK: Building

    /// The finished request for a client: its base URL joined with the path and query, its
    /// headers, and a `Content-Type` for the body when none was given.
    ///
    /// - Throws: ``TrellisError/invalidRequest(_:)`` when the client's base URL is not absolute.
    public func makeRequest(for client: Client) throws -> Request {
        var request = try makeRequest(baseURL: client.base.get())
        if maximumRetries != nil || retriesNonIdempotentMethods != nil {
            var policy = client.retryPolicy
            if let maximumRetries { policy.maximumRetries = max(0, maximumRetries) }
            if let retriesNonIdempotentMethods { policy.retriesNonIdempotentMethods = retriesNonIdempotentMethods }
            request.retryPolicy = policy
        }
        if let cachePolicy { request.cachePolicy = cachePolicy }
        if compressesBody { request.compressesBody = true }
        request.idempotencyKey = idempotencyKey
        return request
    }

    func makeRequest(baseURL base: BaseURL) throws -> Request {
        var fullPath = base.path + path
        if !encodedQuery.isEmpty {
            fullPath += "?" + encodedQuery
        }
        var fields = headerFields
        var requestBody = body
        if let formFields {
            let encoded = formFields.map {
                PercentEncoding.formComponent($0.name) + "=" + PercentEncoding.formComponent($0.value)
            }
            requestBody = RequestBody(encoded.joined(separator: "&"), contentType: "application/x-www-form-urlencoded")
        }
        if let contentType = requestBody?.defaultContentType, !fields.contains(.contentType) {
            fields.append(HTTPField(name: .contentType, value: contentType))
        }
        return Request(
            head: HTTPRequest(method: method, scheme: base.scheme, authority: base.authority, path: fullPath, headerFields: fields),
            body: requestBody,
            timeout: timeout,
            pathTemplate: pathTemplate
        )
    }
}

/// A client's base URL taken apart once, so that each request only concatenates strings.
struct BaseURL: Sendable {
    let scheme: String
    let authority: String
    /// The base path without a trailing slash (`/v1`, or empty).
    let path: String

    static func parse(_ url: URL) -> Result<BaseURL, TrellisError> {
        do {
            // A service whose endpoints are WebSockets may name its server ws:// or wss://; its
            // requests (the upgrades among them) go to the matching http:// or https:// origin.
            let target = try RequestTarget(url, acceptingWebSocketSchemes: true)
            if url.query(percentEncoded: true) != nil || url.fragment != nil {
                return .failure(.invalidRequest(.init(.url, "the base URL \"\(url.absoluteString)\" has a query or fragment")))
            }
            var path = url.path(percentEncoded: true)
            while path.hasSuffix("/") { path.removeLast() }
            return .success(BaseURL(scheme: target.scheme, authority: target.authority, path: path))
        } catch let error as TrellisError {
            return .failure(error)
        } catch {
            return .failure(.invalidRequest(.init(.url, "\(error)")))
        }
    }
}

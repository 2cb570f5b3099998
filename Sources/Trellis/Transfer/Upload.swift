public import Foundation

/// How a task makes its value from the response: decoded as JSON (`Decodable`), or made by
/// the type's own `parseData(_:)` (``Parsable``). The task methods and initializers come in
/// one overload per kind of type, each picking its reading, and share one body.
struct BodyReading<Value: Sendable>: Sendable {
    let read: @Sendable (Client, Request) async throws -> Value
}

extension BodyReading where Value: Decodable {
    static var decoded: Self { Self { client, request in try await client.value(for: request, as: Value.self) } }
}

extension BodyReading where Value: Parsable {
    /// Made by `parseData(_:)`, also for a type that is `Decodable` too: adopting `Parsable`
    /// asks for it, as ``Client/value(for:as:)`` does.
    static var parsed: Self { Self { client, request in try await client.value(for: request, as: Value.self) } }
}

extension Client {
    /// Sends `body` with `request` and decodes the response as `type`, as a task whose progress
    /// counts the bytes of `body` as the transport takes them.
    ///
    /// `Content-Type` comes from the body when the request has none. A data, file or form body
    /// is sent again if a token refresh or redirect needs it; a one-shot stream is not.
    public func uploadTask<Value: Decodable & Sendable>(
        for request: Request,
        from body: RequestBody,
        as type: Value.Type = Value.self
    ) -> UploadTask<Value> {
        uploadTask(for: request, from: body, reading: .decoded)
    }

    /// Sends `body` with `request` and makes a ``Parsable`` value of the response.
    public func uploadTask<Value: Parsable & Sendable>(
        for request: Request,
        from body: RequestBody,
        as type: Value.Type = Value.self
    ) -> UploadTask<Value> {
        uploadTask(for: request, from: body, reading: .parsed)
    }

    /// A type both `Decodable` and ``Parsable`` is made by `parseData(_:)`.
    public func uploadTask<Value: Decodable & Parsable & Sendable>(
        for request: Request,
        from body: RequestBody,
        as type: Value.Type = Value.self
    ) -> UploadTask<Value> {
        uploadTask(for: request, from: body, reading: .parsed)
    }

    func uploadTask<Value: Sendable>(for request: Request, from body: RequestBody, reading: BodyReading<Value>) -> UploadTask<Value> {
        UploadTask { reporter in
            reporter.begin(completed: 0, total: body.length)
            var request = request
            // A replay (token refresh, 307) sends the body again: progress holds at its
            // highest rather than count the bytes twice or go back.
            request.body = body.observingChunks { reporter.advance(toAtLeast: $0) }
            return try await reading.read(self, request)
        }
    }

    /// Uploads the file at `fileURL` as the body of `request`, streamed from disk.
    ///
    /// - Throws: ``TrellisError/fileFailed(_:)`` at once when there is no readable file.
    public func uploadTask<Value: Decodable & Sendable>(
        for request: Request,
        fromFile fileURL: URL,
        as type: Value.Type = Value.self
    ) throws -> UploadTask<Value> {
        uploadTask(for: request, from: try RequestBody(fileAt: fileURL), as: type)
    }

    /// Uploads `form` as `multipart/form-data`, its files streamed from disk.
    public func multipartUploadTask<Value: Decodable & Sendable>(
        for request: Request,
        form: MultipartForm,
        as type: Value.Type = Value.self
    ) -> MultipartUploadTask<Value> {
        multipartUploadTask(for: request, form: form, reading: .decoded)
    }

    func multipartUploadTask<Value: Sendable>(for request: Request, form: MultipartForm, reading: BodyReading<Value>) -> MultipartUploadTask<Value> {
        var request = request
        request.headerFields[.contentType] = form.contentType
        return uploadTask(for: request, from: form.makeBody(), reading: reading)
    }

    /// Sends `request` and decodes its body as `type`, as a task whose progress counts the
    /// response bytes as they arrive.
    public func dataTask<Value: Decodable & Sendable>(
        for request: Request,
        as type: Value.Type = Value.self
    ) -> DataTask<Value> {
        dataTask(for: request, reading: .decoded)
    }

    /// Sends `request` and makes a ``Parsable`` value of its body (an image, XML), as a task
    /// with download progress.
    public func dataTask<Value: Parsable & Sendable>(
        for request: Request,
        as type: Value.Type = Value.self
    ) -> DataTask<Value> {
        dataTask(for: request, reading: .parsed)
    }

    /// A type both `Decodable` and ``Parsable`` is made by `parseData(_:)`.
    public func dataTask<Value: Decodable & Parsable & Sendable>(
        for request: Request,
        as type: Value.Type = Value.self
    ) -> DataTask<Value> {
        dataTask(for: request, reading: .parsed)
    }

    func dataTask<Value: Sendable>(for request: Request, reading: BodyReading<Value>) -> DataTask<Value> {
        DataTask { reporter in
            try await reading.read(self.adding(middlewares: [ReceivedBytes(reporter: reporter)]), request)
        }
    }
}

/// Counts a response's body bytes as they are read, for a ``DataTask``'s progress.
struct ReceivedBytes: Middleware {
    let reporter: ProgressReporter

    /// Close to the wire, where the body still arrives chunk by chunk.
    var scope: MiddlewareScope { .hop }

    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        let response = try await next(request)
        let body = response.body
        reporter.begin(completed: 0, total: body.expectedLength)
        let counted = ResponseBody(expectedLength: body.expectedLength) { [reporter] in
            var inner = body.makeAsyncIterator()
            return ChunkIterator {
                let chunk = try await inner.next()
                if let chunk { reporter.advance(by: chunk.readableBytes) }
                return chunk
            }
        }
        return response.withBody(counted)
    }
}

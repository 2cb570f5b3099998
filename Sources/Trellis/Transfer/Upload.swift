public import Foundation

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
        UploadTask { reporter in
            reporter.begin(completed: 0, total: body.length)
            var request = request
            // A replay (token refresh, 307) sends the body again: progress holds at its
            // highest rather than count the bytes twice or go back.
            request.body = body.observingChunks { reporter.advance(toAtLeast: $0) }
            return try await self.value(for: request, as: type)
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
        var request = request
        request.headerFields[.contentType] = form.contentType
        return uploadTask(for: request, from: form.makeBody(), as: type)
    }

    /// Sends `request` and decodes its body as `type`, as a task whose progress counts the
    /// response bytes as they arrive.
    public func dataTask<Value: Decodable & Sendable>(
        for request: Request,
        as type: Value.Type = Value.self
    ) -> DataTask<Value> {
        DataTask { reporter in
            try await self.adding(middlewares: [ReceivedBytes(reporter: reporter)]).value(for: request, as: type)
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

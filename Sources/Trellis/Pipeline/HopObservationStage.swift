import HTTPTypes
import Tracing

/// On every hop of an observed call, right before the transport: the trace context injected
/// into the hop's header fields (W3C `traceparent` when the tracer propagates that way), and
/// the hop's send, response head and body end told to the monitors, and the hop recorded by
/// any ``HTTPArchiveMonitor``. Passed over for a call nothing observes.
struct HopObservationStage: Stage {
    /// Whether the transport hands over bodies decoded from their `Content-Encoding`, which
    /// a HAR entry must say.
    let transportDecodes: Bool

    func isNeeded(for request: Request, _ call: CallContext) -> Bool {
        call.observation != nil
    }

    func intercept(_ request: Request, _ call: CallContext, next: Next) async throws -> Response<ResponseBody> {
        guard let observation = call.observation else { return try await next(request, call) }
        var request = request
        if let propagator = observation.propagator {
            var fields = request.headerFields
            propagator.inject(ServiceContext.current ?? .topLevel, into: &fields, using: HTTPFieldsInjector())
            request.headerFields = fields
        }
        let hop = observation.hopStarted(request)
        let response: Response<ResponseBody>
        do {
            response = try await Self.recording(request, in: observation.archiveRecorders, transportDecodes: transportDecodes) {
                try await next($0, call)
            }
        } catch {
            observation.hopFailed(error, for: request, hop: hop)
            throw error
        }
        observation.responseHead(response.head, for: request, hop: hop)
        guard !observation.monitors.isEmpty else { return response }
        return response.withBody(Self.watching(response.body, observation: observation, request: request, hop: hop))
    }

    /// The exchange `send` makes, recorded by each of `recorders` (most calls have none).
    private static func recording(
        _ request: Request,
        in recorders: [HTTPArchiveRecorder],
        transportDecodes: Bool,
        send: @escaping (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        guard let recorder = recorders.first else { return try await send(request) }
        return try await recorder.record(request, bodyDecodedByTransport: transportDecodes) { sent in
            try await recording(sent, in: Array(recorders.dropFirst()), transportDecodes: transportDecodes, send: send)
        }
    }

    /// `body`, telling the monitors when it has been read to its end or has failed.
    private static func watching(_ body: ResponseBody, observation: CallObservation, request: Request, hop: Int) -> ResponseBody {
        if case .bytes(let buffer) = body.storage {
            observation.bodyFinished(byteCount: buffer.readableBytes, error: nil, for: request, hop: hop)
            return body
        }
        return ResponseBody(expectedLength: body.expectedLength) {
            var chunks = body.makeAsyncIterator()
            var count = 0
            var finished = false
            return ChunkIterator {
                guard !finished else { return nil }
                do {
                    guard let chunk = try await chunks.next() else {
                        finished = true
                        observation.bodyFinished(byteCount: count, error: nil, for: request, hop: hop)
                        return nil
                    }
                    count += chunk.readableBytes
                    return chunk
                } catch {
                    finished = true
                    observation.bodyFinished(byteCount: count, error: error, for: request, hop: hop)
                    throw error
                }
            }
        }
    }
}

/// Writes trace context into a request's header fields.
struct HTTPFieldsInjector: Injector {
    func inject(_ value: String, forKey key: String, into fields: inout HTTPFields) {
        guard let name = HTTPField.Name(key) else { return }
        fields[name] = value
    }
}

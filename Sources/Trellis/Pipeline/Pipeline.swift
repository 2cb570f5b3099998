import Logging

/// A client's pipeline: every stage a request passes on its way to the transport, in order.
///
/// ``stages(for:)`` is the one place that lists them; the README's "How a request travels"
/// follows it. Stages outside ``RedirectStage`` run once per call; the stages inside it run
/// on every hop (each redirect, and each retry attempt since retries sit outside redirects).
final class Pipeline: Sendable {
    /// Outermost first; the transport follows the last.
    var stages: [any Middleware] { entries.map(\.stage) }
    /// The stages, each behind one reference: reading a stage out of an array of existentials
    /// copies it (through its value witnesses) every time.
    private let entries: [Entry]
    let transport: any Transport

    /// A stage, and the stage again when it can tell whether a request needs it at all (a
    /// stage with nothing to do for a request is passed over without a call: every call
    /// crosses the pipeline, and each stage entered costs an async frame) or when it works in
    /// line (see ``InlineStage``).
    ///
    /// Those two are kept in boxes of their concrete stage type: calling a stage through a
    /// struct existential copies the stage (through its value witnesses) on every call.
    private final class Entry: Sendable {
        let stage: any Middleware
        let optional: (any NeedsCheck)?
        let inline: (any InlineWork)?

        init(_ stage: any Middleware) {
            self.stage = stage
            self.optional = (stage as? any OptionalStage).map { Self.box($0) }
            self.inline = (stage as? any InlineStage).map { Self.box($0) }
        }

        private static func box<Stage: OptionalStage>(_ stage: Stage) -> any NeedsCheck { OptionalBox(stage: stage) }
        private static func box<Stage: InlineStage>(_ stage: Stage) -> any InlineWork { InlineBox(stage: stage) }

        func isPassedOver(for request: Request) -> Bool {
            guard let optional else { return false }
            return !optional.isNeeded(for: request)
        }
    }

    private protocol NeedsCheck: AnyObject, Sendable {
        func isNeeded(for request: Request) -> Bool
    }

    private protocol InlineWork: AnyObject, Sendable {
        func prepare(_ request: inout Request) throws
        func finish(_ response: Response<ResponseBody>, for request: Request) throws -> Response<ResponseBody>
    }

    private final class OptionalBox<Stage: OptionalStage>: NeedsCheck {
        let stage: Stage
        init(stage: Stage) { self.stage = stage }
        func isNeeded(for request: Request) -> Bool { stage.isNeeded(for: request) }
    }

    private final class InlineBox<Stage: InlineStage>: InlineWork {
        let stage: Stage
        init(stage: Stage) { self.stage = stage }
        func prepare(_ request: inout Request) throws { try stage.prepare(&request) }
        func finish(_ response: Response<ResponseBody>, for request: Request) throws -> Response<ResponseBody> {
            try stage.finish(response, for: request)
        }
    }

    /// What a pipeline is made from: a client's settings.
    struct Settings {
        var middlewares: [any Middleware]
        var configuration: Client.Configuration
        var authorizer: AccessTokenAuthorizer
        var client: ClientReference
        var pinningConflict: TrellisError?
        var transport: any Transport
    }

    init(_ settings: Settings) {
        self.entries = Self.stages(for: settings).map(Entry.init)
        self.transport = settings.transport
    }

    /// The pipeline, in order.
    static func stages(for settings: Settings) -> [any Middleware] {
        let configuration = settings.configuration
        let callMiddlewares = settings.middlewares.filter { $0.scope == .call }
        let hopMiddlewares = settings.middlewares.filter { $0.scope == .hop }
        var stages: [any Middleware] = []
        // Once per call: the call's span and metrics around everything, the caller's
        // middlewares (the client's, then a service's), then the checks before and after, and
        // the retries with the call's deadline.
        stages.append(ObservationStage(settings: configuration.observability))
        stages += callMiddlewares
        stages.append(PreconditionStage(preconditions: configuration.validation.preconditions))
        stages.append(ValidationStage(
            validations: configuration.validation.validations,
            acceptedStatuses: configuration.validation.acceptedStatuses
        ))
        stages.append(RetryStage(policy: configuration.retry, timeout: configuration.timeouts.request, logger: configuration.logger))
        stages.append(RedirectStage(policy: configuration.redirects))
        // On every hop, for the URL of that hop.
        stages += hopMiddlewares
        stages.append(AccessTokenStage(authorizer: settings.authorizer, client: settings.client))
        stages.append(DefaultHeadersStage(defaultHeaders: configuration.defaultHeaders))
        if let jar = configuration.cookies {
            stages.append(CookieStage(jar: jar, logger: configuration.logger))
        }
        stages.append(CompressionStage(
            settings: configuration.compression,
            transportDecodes: (settings.transport as? any ContentDecodingTransport)?.decodesContentEncoding ?? false
        ))
        if let cache = configuration.cache {
            stages.append(CacheStage(cache: cache))
        }
        if configuration.security.plainHTTP != .allowed || settings.pinningConflict != nil {
            stages.append(OriginPolicyStage(plainHTTP: configuration.security.plainHTTP, pinningConflict: settings.pinningConflict))
        }
        stages.append(HopObservationStage())
        if configuration.logger.logLevel <= .debug {
            stages.append(LoggingStage(logger: configuration.logger))
        }
        stages.append(IdleTimeoutStage(idleTimeout: configuration.timeouts.idle))
        stages.append(DeadlineStage(transport: settings.transport as? any DeadlineEnforcingTransport))
        return stages
    }

    /// Sends `request` down the stages to the transport, or to `terminal` instead (the
    /// WebSocket upgrade, which needs a connection of its own).
    func send(
        _ request: Request,
        terminal: (@Sendable (Request) async throws -> Response<ResponseBody>)? = nil
    ) async throws -> Response<ResponseBody> {
        try await run(request, at: 0, terminal: terminal)
    }

    /// Runs the stages from `start` on: the ones a request does not need are passed over, and
    /// a run of inline stages is applied here, each preparing the request in order and
    /// finishing the response in reverse order, around the next stage that needs a frame of
    /// its own (or the transport).
    private func run(
        _ request: Request,
        at start: Int,
        terminal: (@Sendable (Request) async throws -> Response<ResponseBody>)?
    ) async throws -> Response<ResponseBody> {
        var index = start
        while index < entries.count, entries[index].isPassedOver(for: request) {
            index += 1
        }
        guard index < entries.count, entries[index].inline != nil else {
            // Most runs (the call's, each attempt's) have no inline stage: the request goes on
            // as it came, uncopied.
            return try await forward(request, to: index, terminal: terminal)
        }
        var request = request
        let first = index
        // Bit n: the stage at first + n prepared the request. Inline stages are the client's
        // own, far fewer than 64; a longer run simply ends early.
        var prepared: UInt64 = 0
        while index < entries.count {
            let entry = entries[index]
            // The first of the run was found needed above, for this same request.
            if index != first, entry.isPassedOver(for: request) {
                index += 1
                continue
            }
            guard let stage = entry.inline, index - first < UInt64.bitWidth else { break }
            try stage.prepare(&request)
            prepared |= 1 << UInt64(index - first)
            index += 1
        }
        var response = try await forward(request, to: index, terminal: terminal)
        while prepared != 0 {
            let offset = UInt64.bitWidth - 1 - prepared.leadingZeroBitCount
            prepared &= ~(1 << UInt64(offset))
            response = try entries[first + offset].inline!.finish(response, for: request)
        }
        return response
    }

    /// `request` into the stage at `index`, or past the last stage to the transport.
    @inline(__always)
    private func forward(
        _ request: Request,
        to index: Int,
        terminal: (@Sendable (Request) async throws -> Response<ResponseBody>)?
    ) async throws -> Response<ResponseBody> {
        guard index < entries.count else {
            try Task.checkCancellation()
            if let terminal { return try await terminal(request) }
            return try await transport.send(request)
        }
        return try await entries[index].stage.intercept(request) { next in
            try await self.run(next, at: index + 1, terminal: terminal)
        }
    }
}

/// A stage whose work on either side of a hop is synchronous: adjusting the request before it
/// goes, and the response when it comes back. The pipeline applies such stages in line, without
/// an async frame each: every hop crosses several of them, and a frame is what entering a stage
/// costs. As a ``Middleware`` (alone, in a test) it does the same around `next`.
protocol InlineStage: Middleware {
    /// The request on its way out; throwing ends the hop before anything is sent.
    func prepare(_ request: inout Request) throws
    /// The response on its way back, for `request` as it was sent (prepared by this stage
    /// and by the inline stages after it).
    func finish(_ response: Response<ResponseBody>, for request: Request) throws -> Response<ResponseBody>
}

extension InlineStage {
    func intercept(
        _ request: Request,
        next: @Sendable (Request) async throws -> Response<ResponseBody>
    ) async throws -> Response<ResponseBody> {
        var request = request
        try prepare(&request)
        return try finish(try await next(request), for: request)
    }

    func finish(_ response: Response<ResponseBody>, for request: Request) throws -> Response<ResponseBody> {
        response
    }
}

/// A stage that some requests do not need: the pipeline passes over it for those.
protocol OptionalStage: Middleware {
    /// Whether `request` has anything for this stage to do; called before each hop.
    func isNeeded(for request: Request) -> Bool
}

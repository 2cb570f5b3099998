import Logging

/// A client's pipeline: every stage a request passes on its way to the transport, in order.
///
/// ``stages(for:)`` is the one place that lists them; the README's "How a request travels"
/// follows it. Stages outside ``RedirectStage`` run once per call; the stages inside it run
/// on every hop (each redirect, and each retry attempt since retries sit outside redirects).
final class Pipeline: Sendable {
    /// Outermost first; the transport follows the last.
    var stages: [any Middleware] { cells.map(\.middleware) }
    /// Each stage in a cell of its concrete type, which keeps them alive.
    private let cells: [Cell]
    /// The same cells, unretained: every call, on whichever core, reads them, and retaining a
    /// cell to read it writes its reference count, which then has to move between the cores'
    /// caches on every call (measured in `Benchmarks/`, "Shared state and two cores").
    /// `Unmanaged._withUnsafeGuaranteedRef` reads a cell without retaining it.
    private let unretained: ContiguousArray<Unmanaged<Cell>>
    let transport: any Transport

    /// A stage, in a class of its concrete stage type, so that calling it neither copies the
    /// stage (as calling through a struct existential does, through its value witnesses) nor
    /// needs a cast. ``isOptional`` and ``isInline`` say which of the other methods it has:
    /// a stage that can tell whether a request needs it at all is passed over without a call
    /// (every call crosses the pipeline, and each stage entered costs an async frame), and an
    /// inline one works without a frame of its own (see ``InlineStage``).
    ///
    /// `@unchecked` because the compiler checks `Sendable` for final classes only: every
    /// stored property here and in the subclasses is a `let` of a `Sendable` type.
    private class Cell: @unchecked Sendable {
        let isOptional: Bool
        let isInline: Bool

        init(isOptional: Bool, isInline: Bool) {
            self.isOptional = isOptional
            self.isInline = isInline
        }

        var middleware: any Middleware { fatalError("a subclass gives its stage") }
        func isNeeded(for request: Request) -> Bool { true }
        func prepare(_ request: inout Request) throws {}
        func finish(_ response: Response<ResponseBody>, for request: Request) throws -> Response<ResponseBody> { response }
        func intercept(
            _ request: Request,
            next: @Sendable (Request) async throws -> Response<ResponseBody>
        ) async throws -> Response<ResponseBody> {
            fatalError("a subclass runs its stage")
        }

        static func holding(_ stage: any Middleware) -> Cell {
            switch stage {
            case let stage as any OptionalStage & InlineStage: optionalInline(stage)
            case let stage as any OptionalStage: optional(stage)
            case let stage as any InlineStage: inline(stage)
            default: plain(stage)
            }
        }

        // Generic functions open the existentials above; a generic class's initializer does not.
        private static func optionalInline<Stage: OptionalStage & InlineStage>(_ stage: Stage) -> Cell { OptionalInlineCell(stage) }
        private static func optional<Stage: OptionalStage>(_ stage: Stage) -> Cell { OptionalCell(stage) }
        private static func inline<Stage: InlineStage>(_ stage: Stage) -> Cell { InlineCell(stage) }
        private static func plain<Stage: Middleware>(_ stage: Stage) -> Cell { StageCell(stage) }
    }

    private class StageCell<Stage: Middleware>: Cell, @unchecked Sendable {
        let stage: Stage

        init(_ stage: Stage, isOptional: Bool = false, isInline: Bool = false) {
            self.stage = stage
            super.init(isOptional: isOptional, isInline: isInline)
        }

        override var middleware: any Middleware { stage }

        override func intercept(
            _ request: Request,
            next: @Sendable (Request) async throws -> Response<ResponseBody>
        ) async throws -> Response<ResponseBody> {
            try await stage.intercept(request, next: next)
        }
    }

    private final class OptionalCell<Stage: OptionalStage>: StageCell<Stage>, @unchecked Sendable {
        init(_ stage: Stage) { super.init(stage, isOptional: true) }
        override func isNeeded(for request: Request) -> Bool { stage.isNeeded(for: request) }
    }

    private class InlineCell<Stage: InlineStage>: StageCell<Stage>, @unchecked Sendable {
        init(_ stage: Stage, isOptional: Bool = false) { super.init(stage, isOptional: isOptional, isInline: true) }
        override func prepare(_ request: inout Request) throws { try stage.prepare(&request) }
        override func finish(_ response: Response<ResponseBody>, for request: Request) throws -> Response<ResponseBody> {
            try stage.finish(response, for: request)
        }
    }

    private final class OptionalInlineCell<Stage: OptionalStage & InlineStage>: InlineCell<Stage>, @unchecked Sendable {
        init(_ stage: Stage) { super.init(stage, isOptional: true) }
        override func isNeeded(for request: Request) -> Bool { stage.isNeeded(for: request) }
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
        let cells = Self.stages(for: settings).map(Cell.holding)
        self.cells = cells
        self.unretained = ContiguousArray(cells.map { Unmanaged.passUnretained($0) })
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
        stages.append(RedirectStage(
            policy: configuration.redirects,
            secretQueryNames: Set(settings.middlewares.compactMap { ($0 as? APIKey)?.queryName })
        ))
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

    /// Whether the stage at `index` has nothing to do for `request`.
    @inline(__always)
    private func isPassedOver(_ index: Int, for request: Request) -> Bool {
        unretained[index]._withUnsafeGuaranteedRef { $0.isOptional && !$0.isNeeded(for: request) }
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
        let count = unretained.count
        var index = start
        while index < count, isPassedOver(index, for: request) {
            index += 1
        }
        guard index < count, unretained[index]._withUnsafeGuaranteedRef(\.isInline) else {
            // Most runs (the call's, each attempt's) have no inline stage: the request goes on
            // as it came, uncopied.
            return try await forward(request, to: index, terminal: terminal)
        }
        var request = request
        let first = index
        // Bit n: the stage at first + n prepared the request. Inline stages are the client's
        // own, far fewer than 64; a longer run simply ends early.
        var prepared: UInt64 = 0
        while index < count {
            // The first of the run was found needed above, for this same request.
            if index != first, isPassedOver(index, for: request) {
                index += 1
                continue
            }
            guard index - first < UInt64.bitWidth, unretained[index]._withUnsafeGuaranteedRef(\.isInline) else { break }
            try unretained[index]._withUnsafeGuaranteedRef { try $0.prepare(&request) }
            prepared |= 1 << UInt64(index - first)
            index += 1
        }
        var response = try await forward(request, to: index, terminal: terminal)
        while prepared != 0 {
            let offset = UInt64.bitWidth - 1 - prepared.leadingZeroBitCount
            prepared &= ~(1 << UInt64(offset))
            response = try unretained[first + offset]._withUnsafeGuaranteedRef { [response] in try $0.finish(response, for: request) }
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
        guard index < cells.count else {
            try Task.checkCancellation()
            if let terminal { return try await terminal(request) }
            return try await transport.send(request)
        }
        return try await cells[index].intercept(request) { next in
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

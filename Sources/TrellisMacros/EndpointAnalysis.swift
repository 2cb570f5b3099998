import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// Reading a service protocol's function into an ``Endpoint``, with a diagnostic at each node
/// that causes a problem.
extension Endpoint {
    /// The error for an endpoint declared `static` or `class`: an endpoint is called on a
    /// service, which holds the client that sends it.
    private static func staticProblem(_ function: FunctionDeclSyntax) -> Diagnostic? {
        let isStatic = { (modifier: DeclModifierSyntax) in modifier.name.tokenKind == .keyword(.static) || modifier.name.tokenKind == .keyword(.class) }
        guard let modifier = function.modifiers.first(where: isStatic) else { return nil }
        var fixed = function
        fixed.modifiers = function.modifiers.filter { !isStatic($0) }
        if fixed.modifiers.isEmpty { fixed.funcKeyword.leadingTrivia = modifier.leadingTrivia }
        let keyword = modifier.name.text
        return Diagnostic(
            node: Syntax(modifier),
            message: TrellisDiagnostic(
                "staticEndpoint",
                "'\(function.name.text)' is declared '\(keyword)': an endpoint is called on a service, which holds the client that sends it; remove '\(keyword)'"
            ),
            fixIts: [FixIt(message: TrellisFixIt("Remove '\(keyword)'"), changes: [.replace(oldNode: Syntax(function), newNode: Syntax(fixed))])]
        )
    }

    static func analyze(_ function: FunctionDeclSyntax, diagnose: ((Diagnostic) -> Void)?) -> Endpoint? {
        var failed = false
        func report(_ node: some SyntaxProtocol, _ id: String, _ message: String, fixIts: [FixIt] = []) {
            failed = true
            diagnose?(Diagnostic(node: Syntax(node), message: TrellisDiagnostic(id, message), fixIts: fixIts))
        }

        let attributes = function.attributes.compactMap { $0.as(AttributeSyntax.self) }
        let methodAttributes = attributes.filter { methodMacros[attributeName($0)] != nil }
        let name = function.name.text

        // HTTP method
        guard let methodAttribute = methodAttributes.first else {
            report(
                function.name, "missingMethod",
                "'\(name)' needs an HTTP method macro such as @GET(\"/path\") or @POST(\"/path\")"
            )
            return nil
        }
        for extra in methodAttributes.dropFirst() {
            let remaining = function.attributes.filter { $0.as(AttributeSyntax.self) != extra }
            report(
                extra, "multipleMethods",
                "'\(name)' has more than one HTTP method macro; keep one of @\(methodAttributes.map(attributeName).joined(separator: ", @"))",
                fixIts: [FixIt(message: TrellisFixIt("Remove @\(attributeName(extra))"), changes: [.replace(oldNode: Syntax(function.attributes), newNode: Syntax(remaining))])]
            )
        }

        // async throws
        let effects = function.signature.effectSpecifiers
        let throwsClause = effects?.throwsClause
        if effects?.asyncSpecifier == nil || throwsClause == nil || throwsClause?.throwsSpecifier.tokenKind != .keyword(.throws)
            || throwsClause?.type != nil
        {
            var fixed = function.signature
            fixed.parameterClause.trailingTrivia = .space
            fixed.effectSpecifiers = FunctionEffectSpecifiersSyntax(
                asyncSpecifier: .keyword(.async, trailingTrivia: .space),
                throwsClause: ThrowsClauseSyntax(throwsSpecifier: .keyword(.throws, trailingTrivia: fixed.returnClause == nil ? [] : .space))
            )
            report(
                function.signature, "notAsyncThrows",
                "'\(name)' must be declared 'async throws': it sends a request over the network",
                fixIts: [FixIt(message: TrellisFixIt("Declare '\(name)' as 'async throws'"), changes: [.replace(oldNode: Syntax(function.signature), newNode: Syntax(fixed))])]
            )
        }

        // Path
        let method = attributeName(methodAttribute)
        guard let pathArgument = methodAttribute.arguments?.as(LabeledExprListSyntax.self)?.first,
            let literal = pathArgument.expression.as(StringLiteralExprSyntax.self),
            let templateText = literal.representedLiteralValue
        else {
            report(methodAttribute, "pathNotLiteral", "the path of @\(method) must be a string literal without interpolation")
            return nil
        }
        let template: PathTemplate
        switch PathTemplate.parse(templateText) {
        case .success(let parsed): template = parsed
        case .failure(let problem):
            report(literal, "invalidPath", "\"\(templateText)\" is not a valid relative URL: \(problem.message)")
            return nil
        }

        // Parameters
        var parameters: [Parameter] = []
        for parameter in function.signature.parameterClause.parameters {
            let first = parameter.firstName.text
            let second = parameter.secondName?.text
            let shown = second ?? first
            if let ellipsis = parameter.ellipsis {
                // `tags: String...` becomes `tags: [String]`, which the query encodes the same way.
                var fixed = parameter
                fixed.ellipsis = nil
                fixed.type = TypeSyntax(ArrayTypeSyntax(element: parameter.type.trimmed)).with(\.trailingTrivia, parameter.type.trailingTrivia)
                report(
                    ellipsis, "variadic",
                    "variadic parameter '\(shown)' cannot be sent; declare it as an array",
                    fixIts: [FixIt(message: TrellisFixIt("Declare '\(shown)' as [\(parameter.type.trimmedDescription)]"), changes: [.replace(oldNode: Syntax(parameter), newNode: Syntax(fixed))])]
                )
            }
            if let attributed = parameter.type.as(AttributedTypeSyntax.self),
                let inoutSpecifier = attributed.specifiers.first(where: { $0.as(SimpleTypeSpecifierSyntax.self)?.specifier.tokenKind == .keyword(.inout) })
            {
                var fixed = attributed
                fixed.specifiers = attributed.specifiers.filter { $0.as(SimpleTypeSpecifierSyntax.self)?.specifier.tokenKind != .keyword(.inout) }
                let replacement: TypeSyntax = fixed.specifiers.isEmpty && fixed.attributes.isEmpty ? fixed.baseType : TypeSyntax(fixed)
                report(
                    inoutSpecifier, "inoutParameter",
                    "'\(shown)' cannot be 'inout': an endpoint sends its parameters and gives nothing back through them",
                    fixIts: [FixIt(message: TrellisFixIt("Remove 'inout'"), changes: [.replace(oldNode: Syntax(parameter.type), newNode: Syntax(replacement))])]
                )
            } else if Self.isFunctionType(parameter.type) {
                report(
                    parameter.type, "closureParameter",
                    "'\(shown)' is a closure, which cannot be sent in a request; pass a value instead"
                )
            }
            parameters.append(
                Parameter(label: first == "_" ? nil : first, name: second ?? first, type: parameter.type, syntax: parameter)
            )
        }
        func parameter(named name: String) -> Parameter? {
            parameters.first { $0.name == name } ?? parameters.first { $0.label == name }
        }

        // Body
        var body: Parameter?
        let isForm = attributes.contains { attributeName($0) == "FormURLEncoded" }
        for attribute in attributes where attributeName(attribute) == "Body" {
            guard let argument = stringArgument(attribute, at: 0) else {
                report(attribute, "bodyNotLiteral", "@Body takes the name of a parameter as a string literal")
                continue
            }
            guard let found = parameter(named: argument.value) else {
                var fixIts: [FixIt] = []
                if let suggestion = Similarity.closest(to: argument.value, in: parameters.map(\.name)) {
                    fixIts.append(replaceLiteral(argument.node, with: suggestion, message: "Use the parameter '\(suggestion)'"))
                }
                report(argument.node, "bodyMissingParameter", "@Body names '\(argument.value)', but '\(name)' has no parameter of that name", fixIts: fixIts)
                continue
            }
            if body != nil {
                report(attribute, "multipleBodies", "'\(name)' has more than one @Body; a request has one body")
            }
            body = found
        }

        // Headers
        var headers: [(String, Parameter)] = []
        var staticHeaders: [(String, String)] = []
        for attribute in attributes {
            switch attributeName(attribute) {
            case "Header":
                guard let headerName = stringArgument(attribute, at: 0), let parameterName = stringArgument(attribute, at: 1) else {
                    report(attribute, "headerNotLiteral", "@Header takes a header name and a parameter name, both string literals")
                    continue
                }
                if !isToken(headerName.value) {
                    report(headerName.node, "invalidHeaderName", "\"\(headerName.value)\" is not a valid HTTP header name")
                }
                guard let found = parameter(named: parameterName.value) else {
                    var fixIts: [FixIt] = []
                    if let suggestion = Similarity.closest(to: parameterName.value, in: parameters.map(\.name)) {
                        fixIts.append(replaceLiteral(parameterName.node, with: suggestion, message: "Use the parameter '\(suggestion)'"))
                    }
                    report(parameterName.node, "headerMissingParameter", "@Header names '\(parameterName.value)', but '\(name)' has no parameter of that name", fixIts: fixIts)
                    continue
                }
                headers.append((headerName.value, found))
            case "Headers":
                guard let dictionary = attribute.arguments?.as(LabeledExprListSyntax.self)?.first?.expression.as(DictionaryExprSyntax.self) else {
                    report(attribute, "headersNotLiteral", "@Headers takes a dictionary literal of header names and values")
                    continue
                }
                guard case .elements(let elements) = dictionary.content else { continue }
                for element in elements {
                    guard let key = element.key.as(StringLiteralExprSyntax.self)?.representedLiteralValue,
                        let value = element.value.as(StringLiteralExprSyntax.self)?.representedLiteralValue
                    else {
                        report(element, "headersNotLiteral", "@Headers names and values must be string literals")
                        continue
                    }
                    if !isToken(key) {
                        report(element.key, "invalidHeaderName", "\"\(key)\" is not a valid HTTP header name")
                    } else if value.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
                        report(element.value, "invalidHeaderValue", "the value of header \"\(key)\" contains CR, LF or NUL")
                    } else {
                        staticHeaders.append((key, value))
                    }
                }
            default:
                break
            }
        }

        // Path placeholders
        var pathParameters: [String: Parameter] = [:]
        for placeholder in template.placeholders {
            guard let found = parameter(named: placeholder.name) else {
                let unbound = parameters.filter { candidate in
                    !template.placeholders.contains { $0.name == candidate.name || $0.name == candidate.label }
                }
                var fixIts: [FixIt] = []
                if let suggestion = Similarity.closest(to: placeholder.name, in: unbound.map(\.name)) {
                    let corrected = templateText.replacing( "{\(placeholder.name)", with: "{\(suggestion)")
                    fixIts.append(replaceLiteral(literal, with: corrected, message: "Use the parameter '\(suggestion)'"))
                }
                report(
                    literal, "unboundPlaceholder",
                    "the path placeholder {\(placeholder.name)} has no matching parameter in '\(name)'",
                    fixIts: fixIts
                )
                continue
            }
            if let body, body.name == found.name {
                report(
                    attributes.first { attributeName($0) == "Body" } ?? methodAttribute, "pathAndBody",
                    "'\(found.name)' is bound to the path placeholder {\(placeholder.name)} and named by @Body; a parameter can only be one of them"
                )
            }
            pathParameters[placeholder.name] = found
        }

        // Transfers
        var download: DownloadKind?
        if let attribute = attributes.first(where: { attributeName($0) == "Download" }) {
            let returned = function.signature.returnClause?.type.trimmedDescription ?? "Void"
            switch returned {
            case "URL", "Foundation.URL": download = .url
            case "DownloadedFile", "Trellis.DownloadedFile": download = .file
            case "DownloadTask", "Trellis.DownloadTask": download = .task
            default:
                report(
                    function.signature.returnClause.map(Syntax.init) ?? Syntax(attribute), "downloadReturnType",
                    "@Download writes the body to a file; '\(name)' must return URL, DownloadedFile or DownloadTask, not \(returned)"
                )
            }
        }
        let isFileUpload = attributes.contains { attributeName($0) == "FileUpload" }
        if isFileUpload, let attribute = attributes.first(where: { attributeName($0) == "FileUpload" }) {
            if body == nil {
                report(attribute, "fileUploadWithoutBody", "@FileUpload sends the parameter named by @Body as the file; add @Body(\"parameter\") to '\(name)'")
            }
            if isForm {
                report(attribute, "fileUploadWithForm", "'\(name)' cannot be both @FileUpload (multipart/form-data) and @FormURLEncoded; keep one")
            }
        }

        // Retries
        var retry: (String, String?)?
        if let attribute = attributes.first(where: { attributeName($0) == "Retry" }) {
            let arguments = attribute.arguments?.as(LabeledExprListSyntax.self).map(Array.init) ?? []
            // `max:` is the earlier spelling, kept working beside RetryPolicy's own name.
            let maximum = arguments.first { $0.label?.text == "maximumRetries" || $0.label?.text == "max" }?
                .expression.as(IntegerLiteralExprSyntax.self)
            let nonIdempotent = arguments.first { $0.label?.text == "retriesNonIdempotentMethods" }?.expression
            if let maximum {
                retry = (maximum.literal.text, nonIdempotent?.trimmedDescription)
            } else {
                report(attribute, "retryNotLiteral", "@Retry takes the number of retries as an integer literal, as in @Retry(maximumRetries: 3)")
            }
            if let nonIdempotent, !nonIdempotent.is(BooleanLiteralExprSyntax.self) {
                report(nonIdempotent, "retryFlagNotLiteral", "retriesNonIdempotentMethods takes true or false")
            }
        }

        // Idempotency key
        var idempotencyKey: IdempotencyKeySource?
        if let attribute = attributes.first(where: { attributeName($0) == "IdempotencyKey" }) {
            if attribute.arguments == nil || (attribute.arguments?.as(LabeledExprListSyntax.self)?.isEmpty ?? false) {
                idempotencyKey = .perCall
            } else if let parameterName = stringArgument(attribute, at: 0) {
                if let found = parameter(named: parameterName.value) {
                    idempotencyKey = .parameter(found)
                } else {
                    var fixIts: [FixIt] = []
                    if let suggestion = Similarity.closest(to: parameterName.value, in: parameters.map(\.name)) {
                        fixIts.append(replaceLiteral(parameterName.node, with: suggestion, message: "Use the parameter '\(suggestion)'"))
                    }
                    report(parameterName.node, "idempotencyKeyMissingParameter", "@IdempotencyKey names '\(parameterName.value)', but '\(name)' has no parameter of that name", fixIts: fixIts)
                }
            } else {
                report(attribute, "idempotencyKeyNotLiteral", "@IdempotencyKey takes nothing (a key per call) or a parameter name as a string literal")
            }
        }

        // Timeout
        var timeout: String?
        if let attribute = attributes.first(where: { attributeName($0) == "Timeout" }) {
            let arguments = attribute.arguments?.as(LabeledExprListSyntax.self).map(Array.init) ?? []
            if let duration = arguments.first, arguments.count == 1, duration.label == nil {
                timeout = duration.expression.trimmedDescription
            } else {
                report(attribute, "timeoutArgument", "@Timeout takes one duration, as in @Timeout(.seconds(5))")
            }
        }

        // Cache policy
        var cachePolicy: String?
        if let attribute = attributes.first(where: { attributeName($0) == "CachePolicy" }) {
            let arguments = attribute.arguments?.as(LabeledExprListSyntax.self).map(Array.init) ?? []
            if let policy = arguments.first, arguments.count == 1, policy.label == nil {
                cachePolicy = policy.expression.trimmedDescription
            } else {
                report(attribute, "cachePolicyArgument", "@CachePolicy takes one policy, as in @CachePolicy(.reload)")
            }
        }

        // Conversations
        var stream: StreamKind?
        let returnType = function.signature.returnClause?.type
        let returnedName = returnType.map(baseTypeName) ?? "Void"
        let returnsConnection = ["WebSocketConnection", "Trellis.WebSocketConnection"].contains(returnedName)
        if method == "WebSocket" {
            if returnsConnection {
                stream = .webSocket
            } else {
                report(
                    function.signature.returnClause.map(Syntax.init) ?? Syntax(methodAttribute), "webSocketReturnType",
                    "@WebSocket opens a conversation; '\(name)' must return WebSocketConnection, not \(returnType?.trimmedDescription ?? "Void")"
                )
            }
        } else if returnsConnection {
            report(
                methodAttribute, "webSocketWithoutMacro",
                "'\(name)' returns WebSocketConnection; declare it with @WebSocket(\"\(templateText)\") instead of @\(method)"
            )
        } else if ["EventStream", "Trellis.EventStream"].contains(returnedName), let returnType {
            let element = genericArguments(of: returnType).first ?? "ServerSentEvent"
            stream = ["ServerSentEvent", "Trellis.ServerSentEvent"].contains(element) ? .rawEvents : .decodedEvents(element)
            if method != "GET" {
                report(methodAttribute, "eventStreamMethod", "'\(name)' returns an EventStream, which is read with GET; use @GET instead of @\(method)")
            }
        } else if ["JSONLines", "Trellis.JSONLines"].contains(returnedName), let returnType {
            // Any method: model servers stream the answer to a POST.
            if let element = genericArguments(of: returnType).first {
                stream = .jsonLines(element)
            } else {
                report(
                    function.signature.returnClause.map(Syntax.init) ?? Syntax(methodAttribute), "jsonLinesElement",
                    "'\(name)' returns JSONLines without saying what each line holds; write JSONLines<Value>"
                )
            }
        }

        let bound = Set(
            pathParameters.values.map(\.name) + headers.map(\.1.name) + [body?.name, idempotencyKey?.parameterName].compactMap { $0 }
        )
        let queryParameters = parameters.filter { !bound.contains($0.name) }

        if let problem = staticProblem(function) {
            diagnose?(problem)
            return nil
        }

        if failed { return nil }
        return Endpoint(
            function: function,
            method: method,
            templateText: templateText,
            template: template,
            parameters: parameters,
            pathParameters: pathParameters,
            body: body,
            isForm: isForm,
            headers: headers,
            staticHeaders: staticHeaders,
            queryParameters: queryParameters,
            returnKind: returnKind(of: function),
            requiresAccessToken: attributes.contains { attributeName($0) == "RequiresAccessToken" },
            download: download,
            isFileUpload: isFileUpload,
            isSnowdropSpelling: pathArgument.label?.text == "url",
            retry: retry,
            timeout: timeout,
            cachePolicy: cachePolicy,
            compressesBody: attributes.contains { attributeName($0) == "CompressedBody" },
            idempotencyKey: idempotencyKey,
            stream: stream
        )
    }
}

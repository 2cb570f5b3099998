import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// One function of a service protocol, understood: its HTTP method and path, and where each
/// parameter goes.
struct Endpoint {
    struct Parameter {
        let label: String?
        let name: String
        let type: TypeSyntax
        let syntax: FunctionParameterSyntax

        /// How a call passes this argument: `name: name` or just `name`.
        var argument: String { label.map { "\($0): \(name)" } ?? name }
        /// The key of its query item or form field: the label, or the name when unlabeled.
        var key: String { label ?? name }
        var typeText: String { type.trimmedDescription }
        var isOptional: Bool {
            type.is(OptionalTypeSyntax.self) || type.is(ImplicitlyUnwrappedOptionalTypeSyntax.self)
                || typeText.hasPrefix("Optional<")
        }
        var isStringLike: Bool {
            let base = typeText.replacing( "?", with: "")
            return ["String", "Substring", "Swift.String", "Optional<String>"].contains(base)
        }
    }

    enum ReturnKind {
        case void
        case responseVoid
        case response(String)
        case value(String)
    }

    let function: FunctionDeclSyntax
    let method: String
    let templateText: String
    let template: PathTemplate
    let parameters: [Parameter]
    let pathParameters: [String: Parameter]
    let body: Parameter?
    let isForm: Bool
    let headers: [(name: String, parameter: Parameter)]
    let staticHeaders: [(name: String, value: String)]
    let queryParameters: [Parameter]
    let returnKind: ReturnKind
    let requiresAccessToken: Bool
    let download: DownloadKind?
    let isFileUpload: Bool
    /// Declared in Snowdrop's spelling, `@GET(url: "…")`: its methods also take Snowdrop's
    /// first names for the extra arguments, `_queryItems:` and `_payloadDescription:`.
    let isSnowdropSpelling: Bool
    /// `@Retry(maximumRetries:retriesNonIdempotentMethods:)`, as source text.
    let retry: (maximum: String, nonIdempotent: String?)?
    /// `@Timeout(duration)`: the duration expression, as source text.
    let timeout: String?
    /// `@CachePolicy(policy)`: the policy expression, as source text.
    let cachePolicy: String?
    /// `@CompressedBody`.
    let compressesBody: Bool
    /// A conversation rather than one response: `@WebSocket`, or a function returning an
    /// `EventStream` or `JSONLines`.
    let stream: StreamKind?

    enum StreamKind {
        case webSocket
        /// Server-sent events as they come.
        case rawEvents
        /// Each event's data decoded as this type.
        case decodedEvents(String)
        /// Each line of a JSON Lines body decoded as this type.
        case jsonLines(String)
    }

    /// What a `@Download` function returns.
    enum DownloadKind {
        case url
        case file
        case task
    }

    static let methodMacros: [String: String] = [
        "GET": ".get", "POST": ".post", "PUT": ".put", "DELETE": ".delete", "PATCH": ".patch",
        "HEAD": ".head", "OPTIONS": ".options", "QUERY": ".query", "TRACE": ".trace", "CONNECT": ".connect",
        // The upgrade request of a WebSocket is a GET.
        "WebSocket": ".get",
    ]

    /// Whether `type` is a function type, however it is wrapped (`@escaping`, `@Sendable`,
    /// parentheses, an optional).
    static func isFunctionType(_ type: TypeSyntax) -> Bool {
        if type.is(FunctionTypeSyntax.self) { return true }
        if let attributed = type.as(AttributedTypeSyntax.self) { return isFunctionType(attributed.baseType) }
        if let optional = type.as(OptionalTypeSyntax.self) { return isFunctionType(optional.wrappedType) }
        if let implicit = type.as(ImplicitlyUnwrappedOptionalTypeSyntax.self) { return isFunctionType(implicit.wrappedType) }
        if let tuple = type.as(TupleTypeSyntax.self), tuple.elements.count == 1, let only = tuple.elements.first {
            return isFunctionType(only.type)
        }
        return false
    }

    static func attributeName(_ attribute: AttributeSyntax) -> String {
        let text = attribute.attributeName.trimmedDescription
        return text.split(separator: ".").last.map(String.init) ?? text
    }

    /// Reads a function, reporting every problem at the node that causes it. Returns `nil`
    /// when the function cannot be implemented.
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

        let bound = Set(pathParameters.values.map(\.name) + headers.map(\.1.name) + [body?.name].compactMap { $0 })
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
            stream: stream
        )
    }

    /// `Name` of `Name`, `Module.Name` or `Name<Arguments>`.
    private static func baseTypeName(_ type: TypeSyntax) -> String {
        if let identifier = type.as(IdentifierTypeSyntax.self) { return identifier.name.text }
        if let member = type.as(MemberTypeSyntax.self) { return member.baseType.trimmedDescription + "." + member.name.text }
        return type.trimmedDescription
    }

    private static func genericArguments(of type: TypeSyntax) -> [String] {
        let clause = type.as(IdentifierTypeSyntax.self)?.genericArgumentClause ?? type.as(MemberTypeSyntax.self)?.genericArgumentClause
        return clause?.arguments.map { $0.argument.trimmedDescription } ?? []
    }

    private static func returnKind(of function: FunctionDeclSyntax) -> ReturnKind {
        guard let type = function.signature.returnClause?.type else { return .void }
        let text = type.trimmedDescription
        if isVoid(text) { return .void }
        let generic: GenericArgumentClauseSyntax?
        let baseName: String
        if let identifier = type.as(IdentifierTypeSyntax.self) {
            baseName = identifier.name.text
            generic = identifier.genericArgumentClause
        } else if let member = type.as(MemberTypeSyntax.self) {
            baseName = member.baseType.trimmedDescription + "." + member.name.text
            generic = member.genericArgumentClause
        } else {
            return .value(text)
        }
        if baseName == "Response" || baseName == "Trellis.Response", let argument = generic?.arguments.first,
            generic?.arguments.count == 1
        {
            let inner = argument.argument.trimmedDescription
            return isVoid(inner) ? .responseVoid : .response(inner)
        }
        return .value(text)
    }

    private static func isVoid(_ text: String) -> Bool {
        ["Void", "()", "Swift.Void"].contains(text.replacing( " ", with: ""))
    }

    private static func stringArgument(_ attribute: AttributeSyntax, at index: Int) -> (value: String, node: StringLiteralExprSyntax)? {
        guard let arguments = attribute.arguments?.as(LabeledExprListSyntax.self), arguments.count > index else { return nil }
        let expression = arguments[arguments.index(arguments.startIndex, offsetBy: index)].expression
        guard let literal = expression.as(StringLiteralExprSyntax.self), let value = literal.representedLiteralValue else {
            return nil
        }
        return (value, literal)
    }

    private static func replaceLiteral(_ literal: StringLiteralExprSyntax, with text: String, message: String) -> FixIt {
        let replacement = StringLiteralExprSyntax(content: text).with(\.leadingTrivia, literal.leadingTrivia)
            .with(\.trailingTrivia, literal.trailingTrivia)
        return FixIt(message: TrellisFixIt(message), changes: [.replace(oldNode: Syntax(literal), newNode: Syntax(replacement))])
    }

    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(Character(scalar)) || "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar))
        }
    }
}

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
    /// `@IdempotencyKey`: a key drawn per call, or the value of a parameter.
    let idempotencyKey: IdempotencyKeySource?

    enum IdempotencyKeySource {
        case perCall
        case parameter(Parameter)

        var parameterName: String? {
            if case .parameter(let parameter) = self { parameter.name } else { nil }
        }
    }
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
    /// `Name` of `Name`, `Module.Name` or `Name<Arguments>`.
    static func baseTypeName(_ type: TypeSyntax) -> String {
        if let identifier = type.as(IdentifierTypeSyntax.self) { return identifier.name.text }
        if let member = type.as(MemberTypeSyntax.self) { return member.baseType.trimmedDescription + "." + member.name.text }
        return type.trimmedDescription
    }

    static func genericArguments(of type: TypeSyntax) -> [String] {
        let clause = type.as(IdentifierTypeSyntax.self)?.genericArgumentClause ?? type.as(MemberTypeSyntax.self)?.genericArgumentClause
        return clause?.arguments.map { $0.argument.trimmedDescription } ?? []
    }

    static func returnKind(of function: FunctionDeclSyntax) -> ReturnKind {
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

    static func isVoid(_ text: String) -> Bool {
        ["Void", "()", "Swift.Void"].contains(text.replacing( " ", with: ""))
    }

    static func stringArgument(_ attribute: AttributeSyntax, at index: Int) -> (value: String, node: StringLiteralExprSyntax)? {
        guard let arguments = attribute.arguments?.as(LabeledExprListSyntax.self), arguments.count > index else { return nil }
        let expression = arguments[arguments.index(arguments.startIndex, offsetBy: index)].expression
        guard let literal = expression.as(StringLiteralExprSyntax.self), let value = literal.representedLiteralValue else {
            return nil
        }
        return (value, literal)
    }

    static func replaceLiteral(_ literal: StringLiteralExprSyntax, with text: String, message: String) -> FixIt {
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

import Foundation
import SwiftDiagnostics
public import SwiftSyntax
import SwiftSyntaxBuilder
public import SwiftSyntaxMacros

/// `@Service`: writes the client class for a protocol, and an extension with the overloads
/// that leave out arguments whose path placeholder has a default.
public struct ServiceMacro: PeerMacro, ExtensionMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let service = declaration.as(ProtocolDeclSyntax.self) else {
            context.diagnose(Diagnostic(
                node: Syntax(node),
                message: TrellisDiagnostic("notProtocol", "@Service applies to a protocol; declare the API as 'protocol' and Trellis writes the class")
            ))
            return []
        }
        let access = accessModifier(of: service)
        let tokenLabel = TokenLabelMacro.label(of: service, diagnose: { context.diagnose($0) })
        let baseURL = Self.baseURL(of: node, diagnose: { context.diagnose($0) })
        let className = service.name.text.hasSuffix("Service") ? service.name.text + "Impl" : service.name.text + "Service"
        var members: [String] = []
        for member in service.memberBlock.members {
            if let function = member.decl.as(FunctionDeclSyntax.self) {
                if let endpoint = Endpoint.analyze(function, diagnose: { context.diagnose($0) }) {
                    members.append(contentsOf: implementation(of: endpoint, access: access, context: context))
                } else {
                    members.append(unavailableStub(for: function, access: access))
                }
            } else if let variable = member.decl.as(VariableDeclSyntax.self) {
                context.diagnose(Diagnostic(
                    node: Syntax(variable.bindingSpecifier),
                    message: TrellisDiagnostic(
                        "propertyRequirement",
                        "a @Service protocol declares endpoints as 'async throws' functions; Trellis cannot implement a property (declare it in another protocol, or make it an endpoint)"
                    )
                ))
                // A stub, so that the class still conforms and this is the only error.
                members.append(unavailableStub(for: variable, access: access))
            } else if !member.decl.is(AssociatedTypeDeclSyntax.self) {
                context.diagnose(Diagnostic(
                    node: Syntax(member.decl),
                    message: TrellisDiagnostic("unsupportedMember", "a @Service protocol declares endpoints as functions; Trellis cannot implement this member")
                ))
            }
        }
        // The URL was checked above, so the generated force-unwrap cannot fail.
        let urlInitializer = baseURL.map { url in
            "\n    /// A service for \(url) (`@Service(url:)`) over the platform's default transport.\n"
                + "    \(access)convenience init() {\n"
                + "        self.init(baseURL: Foundation.URL(string: \(literal(url)))!)\n"
                + "    }\n"
        } ?? ""
        let classDecl: DeclSyntax = """
            \(raw: access)final class \(raw: className): \(raw: service.name.text), Trellis.TrellisService {
                \(raw: access)let _serviceCore: Trellis._ServiceCore

                /// The label the service's access token is stored under.
                \(raw: access)static let tokenLabel = \(raw: tokenLabel.map(literal) ?? "Trellis.AccessTokenRequirement.defaultLabel")

                /// A service that sends through `client`.
                \(raw: access)init(client: Trellis.Client) {
                    self._serviceCore = Trellis._ServiceCore(client: client, tokenLabel: Self.tokenLabel)
                }

                /// A service for `baseURL` over the platform's default transport.
                \(raw: access)convenience init(baseURL: Foundation.URL) {
                    self.init(client: Trellis.Client(baseURL: baseURL))
                }
            \(raw: urlInitializer)
            \(raw: members.joined(separator: "\n\n"))
            }
            """
        return [classDecl]
    }

    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        guard let service = declaration.as(ProtocolDeclSyntax.self) else { return [] }
        let access = accessModifier(of: service)
        var overloads: [String] = []
        for member in service.memberBlock.members {
            guard let function = member.decl.as(FunctionDeclSyntax.self),
                let endpoint = Endpoint.analyze(function, diagnose: nil)
            else { continue }
            overloads.append(contentsOf: defaultArgumentOverloads(of: endpoint, access: access))
        }
        guard !overloads.isEmpty else { return [] }
        let decl: DeclSyntax = """
            extension \(raw: type.trimmedDescription) {
            \(raw: overloads.joined(separator: "\n\n"))
            }
            """
        return [decl.cast(ExtensionDeclSyntax.self)]
    }

    // MARK: Generation

    /// The URL of `@Service(url: "https://…")`, checked here so that the generated `init()`
    /// cannot fail at run time: an absolute http, https, ws or wss URL with a host.
    private static func baseURL(of node: AttributeSyntax, diagnose: (Diagnostic) -> Void) -> String? {
        guard let argument = node.arguments?.as(LabeledExprListSyntax.self)?.first(where: { $0.label?.text == "url" }) else {
            return nil
        }
        guard let literal = argument.expression.as(StringLiteralExprSyntax.self), literal.segments.count == 1,
            let segment = literal.segments.first?.as(StringSegmentSyntax.self)
        else {
            diagnose(Diagnostic(
                node: Syntax(argument.expression),
                message: TrellisDiagnostic("serviceURLNotLiteral", "@Service(url:) takes a string literal, so the URL can be checked when the service compiles")
            ))
            return nil
        }
        let text = segment.content.text
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https", "ws", "wss"].contains(scheme),
            let host = url.host, !host.isEmpty
        else {
            diagnose(Diagnostic(
                node: Syntax(literal),
                message: TrellisDiagnostic("serviceURLInvalid", "'\(text)' is not an absolute http, https, ws or wss URL with a host")
            ))
            return nil
        }
        return text
    }

    private static func accessModifier(of service: ProtocolDeclSyntax) -> String {
        for modifier in service.modifiers {
            switch modifier.name.tokenKind {
            case .keyword(.public), .keyword(.open): return "public "
            case .keyword(.package): return "package "
            case .keyword(.fileprivate), .keyword(.private): return "fileprivate "
            default: continue
            }
        }
        return ""
    }

    /// `name<T>(a: A, b: B)` with extra parameters appended.
    private static func signature(of function: FunctionDeclSyntax, appending extra: [String] = [], dropping dropped: Set<String> = []) -> String {
        var parameters = function.signature.parameterClause.parameters
            .filter { !dropped.contains(($0.secondName ?? $0.firstName).text) }
            .map { $0.with(\.trailingComma, nil).trimmedDescription }
        parameters.append(contentsOf: extra)
        let generics = function.genericParameterClause?.trimmedDescription ?? ""
        let returnClause = function.signature.returnClause.map { " " + $0.trimmedDescription } ?? ""
        let whereClause = function.genericWhereClause.map { " " + $0.trimmedDescription } ?? ""
        return "func \(function.name.text)\(generics)(\(parameters.joined(separator: ", "))) async throws\(returnClause)\(whereClause)"
    }

    private static func call(_ function: FunctionDeclSyntax, arguments: [String]) -> String {
        "\(function.name.text)(\(arguments.joined(separator: ", ")))"
    }

    private static func implementation(of endpoint: Endpoint, access: String, context: some MacroExpansionContext) -> [String] {
        let function = endpoint.function
        let arguments = endpoint.parameters.map(\.argument)
        let returnKeyword = isVoid(endpoint.returnKind) ? "" : "return "
        // Every endpoint takes query items added at the call site, `queryItems:` (and an upload
        // its part's description, `payloadDescription:`); the method with all of them does the
        // work (its own names for them underscored, apart from the endpoint's parameters), and
        // the others pass it empty ones. An endpoint declared in Snowdrop's spelling also takes
        // the names of Snowdrop's first README, `_queryItems:` and `_payloadDescription:`.
        var forwardings: [String] = []
        func forwarding(_ extra: [String], passing passed: [String]) {
            forwardings.append("""
                    \(access)\(signature(of: function, appending: extra)) {
                        \(returnKeyword)try await self.\(call(function, arguments: arguments + passed))
                    }
                """)
        }
        if endpoint.isFileUpload {
            forwarding([], passing: ["payloadDescription: nil", "queryItems: []"])
            forwarding(["payloadDescription: Trellis.PayloadDescription"], passing: ["payloadDescription: payloadDescription", "queryItems: []"])
            if endpoint.isSnowdropSpelling {
                forwarding(["_payloadDescription: Trellis.PayloadDescription"], passing: ["payloadDescription: _payloadDescription", "queryItems: []"])
                forwarding(
                    ["_payloadDescription: Trellis.PayloadDescription?", "_queryItems: [Trellis.QueryItem]"],
                    passing: ["payloadDescription: _payloadDescription", "queryItems: _queryItems"]
                )
            }
        } else {
            forwarding([], passing: ["queryItems: []"])
            if endpoint.isSnowdropSpelling {
                forwarding(["_queryItems: [Trellis.QueryItem]"], passing: ["queryItems: _queryItems"])
            }
        }

        var lines: [String] = []
        var pathExpression = ""
        for part in endpoint.template.parts {
            switch part {
            case .literal(let text):
                pathExpression += text
            case .placeholder(let name, _):
                let parameter = endpoint.pathParameters[name]!
                pathExpression += "\\(Trellis._RequestBuilder.pathSegment(\(parameter.name), name: \"\(name)\"))"
            }
        }
        let throwingPath = !endpoint.pathParameters.isEmpty
        lines.append(
            "var __request = \(throwingPath ? "try " : "")self._serviceCore.request(\(Endpoint.methodMacros[endpoint.method]!), path: \"\(pathExpression)\", query: \"\(endpoint.template.query)\", template: \(literal(endpoint.templateText)))"
        )
        for (name, value) in endpoint.staticHeaders {
            lines.append("try __request.header(\(literal(name)), \(literal(value)))")
        }
        for (name, parameter) in endpoint.headers {
            lines.append("try __request.header(\(literal(name)), \(parameter.name))")
        }
        if let body = endpoint.body {
            if endpoint.isFileUpload {
                lines.append("try __request.fileUpload(\(body.name), parameter: \(literal(body.key)), description: _payloadDescription)")
            } else {
                lines.append(endpoint.isForm ? "try __request.formBody(\(body.name))" : "try __request.body(\(body.name))")
            }
        }
        let formFields = endpoint.isForm && endpoint.body == nil
        if formFields { lines.append("__request.startForm()") }
        for parameter in endpoint.queryParameters {
            lines += atDeclaration("__request.\(formFields ? "formField" : "query")(\(literal(parameter.key)), \(parameter.name))", of: parameter.syntax, in: context)
        }
        lines.append("__request.queryItems(_queryItems)")
        if endpoint.requiresAccessToken { lines.append("__request.requiresAccessToken = true") }
        if let retry = endpoint.retry {
            lines.append("__request.maximumRetries = \(retry.maximum)")
            if let flag = retry.nonIdempotent { lines.append("__request.retriesNonIdempotentMethods = \(flag)") }
        }
        if let timeout = endpoint.timeout { lines.append("__request.timeout = \(timeout)") }
        if let cachePolicy = endpoint.cachePolicy { lines.append("__request.cachePolicy = \(cachePolicy)") }
        if endpoint.compressesBody { lines.append("__request.compressesBody = true") }
        switch endpoint.idempotencyKey {
        case .parameter(let parameter): lines.append("__request.idempotencyKey = IdempotencyKey(String(describing: \(parameter.name)))")
        case .perCall: lines.append("__request.idempotencyKey = .generated")
        case nil: break
        }
        switch (endpoint.download, endpoint.returnKind) {
        case _ where endpoint.stream != nil:
            switch endpoint.stream {
            case .webSocket: lines.append("return try await self._serviceCore.webSocket(__request)")
            case .rawEvents: lines.append("return try self._serviceCore.events(__request)")
            case .decodedEvents(let type): lines.append("return try self._serviceCore.events(__request, as: \(type).self)")
            case .jsonLines(let type): lines.append("return try self._serviceCore.jsonLines(__request, as: \(type).self)")
            case nil: break
            }
        case (.url, _):
            lines.append("return try await self._serviceCore.download(__request).url")
        case (.file, _):
            lines.append("return try await self._serviceCore.download(__request)")
        case (.task, _):
            lines.append("return try self._serviceCore.downloadTask(__request)")
        case (nil, .void):
            lines.append("try await self._serviceCore.perform(__request)")
        case (nil, .responseVoid):
            lines.append("return try await self._serviceCore.response(__request)")
        case (nil, .response(let type)):
            lines += atDeclaration("return try await self._serviceCore.response(__request, as: \(type).self)", of: function.signature.returnClause.map(Syntax.init) ?? Syntax(function.signature), in: context)
        case (nil, .value(let type)):
            lines += atDeclaration("return try await self._serviceCore.value(__request, as: \(type).self)", of: function.signature.returnClause.map(Syntax.init) ?? Syntax(function.signature), in: context)
        }
        let full = """
                \(access)\(signature(of: function, appending: (endpoint.isFileUpload ? ["payloadDescription _payloadDescription: Trellis.PayloadDescription?"] : []) + ["queryItems _queryItems: [Trellis.QueryItem]"])) {
                    \(lines.joined(separator: "\n        "))
                }
            """
        return forwardings + [full]
    }

    private static func defaultArgumentOverloads(of endpoint: Endpoint, access: String) -> [String] {
        let defaults = endpoint.template.placeholders.compactMap { placeholder -> (Endpoint.Parameter, String)? in
            guard let value = placeholder.defaultValue, let parameter = endpoint.pathParameters[placeholder.name] else { return nil }
            return (parameter, parameter.isStringLike ? literal(value) : value)
        }
        guard !defaults.isEmpty, defaults.count <= 4 else { return [] }
        var overloads: [String] = []
        let returnKeyword = isVoid(endpoint.returnKind) ? "" : "return "
        for mask in 1..<(1 << defaults.count) {
            let omitted = defaults.indices.filter { mask & (1 << $0) != 0 }.map { defaults[$0] }
            let omittedNames = Set(omitted.map(\.0.name))
            let arguments = endpoint.parameters.map { parameter -> String in
                guard let value = omitted.first(where: { $0.0.name == parameter.name })?.1 else { return parameter.argument }
                return parameter.label.map { "\($0): \(value)" } ?? value
            }
            overloads.append("""
                    \(access)\(signature(of: endpoint.function, dropping: omittedNames)) {
                        \(returnKeyword)try await self.\(call(endpoint.function, arguments: arguments))
                    }
                """)
        }
        return overloads
    }

    /// Keeps the class compiling when a function has an error, so the compiler shows that
    /// error alone rather than a cascade of conformance failures.
    /// What stands in for a function the macro reported an error for: the requirement exactly
    /// as declared, so that the one diagnostic at the declaration is the only error (a stub
    /// with another signature would add "does not conform to protocol").
    /// `line`, marked as written at `node` in the user's file: a type error in it (a return
    /// type that is neither `Decodable` nor `Parsable`, a query parameter of a type no query
    /// holds) is then reported at the user's declaration, with the message of the unavailable
    /// overload it falls to, rather than inside the expansion.
    private static func atDeclaration(_ line: String, of node: some SyntaxProtocol, in context: some MacroExpansionContext) -> [String] {
        guard let location = context.location(of: node, at: .afterLeadingTrivia, filePathMode: .filePath) else { return [line] }
        return ["#sourceLocation(file: \(location.file), line: \(location.line))", line, "#sourceLocation()"]
    }

    /// A body for a requirement Trellis reported an error on, so that the class still
    /// conforms and that error is the only one. A `static` requirement stays `static`.
    private static func unavailableStub(for function: FunctionDeclSyntax, access: String) -> String {
        let declared = function.with(\.attributes, []).with(\.modifiers, []).with(\.body, nil).trimmedDescription
        return """
                \(access)\(staticPrefix(function.modifiers))\(declared) {
                    fatalError("Trellis could not implement '\(function.name.text)'; see the error reported at its declaration")
                }
            """
    }

    private static func unavailableStub(for variable: VariableDeclSyntax, access: String) -> String {
        variable.bindings.compactMap { binding -> String? in
            guard let type = binding.typeAnnotation?.type.trimmedDescription else { return nil }
            let name = binding.pattern.trimmedDescription
            let failure = "fatalError(\"Trellis could not implement '\(name)'; see the error reported at its declaration\")"
            let settable = binding.accessorBlock?.description.contains("set") ?? false
            let accessors = settable ? "get { \(failure) }\n        set {}" : failure
            return """
                    \(access)\(staticPrefix(variable.modifiers))var \(name): \(type) {
                        \(accessors)
                    }
                """
        }.joined(separator: "\n\n")
    }

    private static func staticPrefix(_ modifiers: DeclModifierListSyntax) -> String {
        modifiers.contains { $0.name.tokenKind == .keyword(.static) || $0.name.tokenKind == .keyword(.class) } ? "static " : ""
    }

    private static func isVoid(_ kind: Endpoint.ReturnKind) -> Bool {
        if case .void = kind { return true }
        return false
    }

    static func literal(_ text: String) -> String {
        StringLiteralExprSyntax(content: text).description
    }
}

import SwiftDiagnostics
public import SwiftSyntax
import SwiftSyntaxBuilder
public import SwiftSyntaxMacros

/// `@GET`, `@POST`, …: markers read by `@Service`. On their own they check only that they
/// sit in a `@Service` protocol, where they take effect.
public struct HTTPMethodMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        let enclosing = context.lexicalContext.first?.as(ProtocolDeclSyntax.self)
        let isInService = enclosing?.attributes.contains { attribute in
            attribute.as(AttributeSyntax.self).map { Endpoint.attributeName($0) == "Service" } ?? false
        } ?? false
        let name = Endpoint.attributeName(node)
        if !isInService {
            context.diagnose(Diagnostic(
                node: Syntax(node),
                message: TrellisDiagnostic(
                    "outsideService",
                    "@\(name) only takes effect on a function of a protocol marked @Service"
                )
            ))
        }
        return []
    }
}

/// `@Body`, `@Header`, `@Headers`, `@FormURLEncoded`: markers read by `@Service`.
public struct MarkerMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}

/// `@TokenLabel("name")`: read by `@Service`, which reports a label that is not a non-empty
/// string literal. On its own it checks that it sits on a `@Service` protocol.
public struct TokenLabelMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        let isService = declaration.as(ProtocolDeclSyntax.self)?.attributes.contains { attribute in
            attribute.as(AttributeSyntax.self).map { Endpoint.attributeName($0) == "Service" } ?? false
        } ?? false
        if !isService {
            context.diagnose(Diagnostic(
                node: Syntax(node),
                message: TrellisDiagnostic("tokenLabelOutsideService", "@TokenLabel only takes effect on a protocol marked @Service")
            ))
        }
        return []
    }

    /// The label of a service protocol's `@TokenLabel`, or `nil` for the default.
    static func label(of service: ProtocolDeclSyntax, diagnose: (Diagnostic) -> Void) -> String? {
        for attribute in service.attributes {
            guard let attribute = attribute.as(AttributeSyntax.self), Endpoint.attributeName(attribute) == "TokenLabel" else { continue }
            let argument = attribute.arguments?.as(LabeledExprListSyntax.self)?.first?.expression
            guard let literal = argument?.as(StringLiteralExprSyntax.self), let value = literal.representedLiteralValue else {
                diagnose(Diagnostic(
                    node: Syntax(attribute),
                    message: TrellisDiagnostic("tokenLabelNotLiteral", "@TokenLabel takes the label as a string literal without interpolation")
                ))
                return nil
            }
            guard !value.allSatisfy(\.isWhitespace) else {
                diagnose(Diagnostic(
                    node: Syntax(literal),
                    message: TrellisDiagnostic("emptyTokenLabel", "@TokenLabel needs a non-empty label; remove it to use the default \"TrellisToken\"")
                ))
                return nil
            }
            return value
        }
        return nil
    }
}


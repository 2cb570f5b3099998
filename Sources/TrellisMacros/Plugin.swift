import SwiftCompilerPlugin
import SwiftSyntaxMacros

@main
struct TrellisMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [
        ServiceMacro.self,
        HTTPMethodMacro.self,
        MarkerMacro.self,
        TokenLabelMacro.self,
    ]
}

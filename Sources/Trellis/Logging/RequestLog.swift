import Foundation
import HTTPTypes

/// How requests and responses are written to logs: credentials never appear.
enum RequestLog {
    /// Header fields whose values are secrets.
    static let redactedFields: Set<HTTPField.Name> = [
        .authorization, .cookie, .setCookie, .proxyAuthorization,
        HTTPField.Name("X-API-Key")!, HTTPField.Name("API-Key")!, HTTPField.Name("X-Auth-Token")!,
    ]

    /// Query parameters whose values are secrets (API keys, OAuth tokens in URLs).
    static let redactedQueryNames: Set<String> = ["api_key", "apikey", "api-key", "key", "access_token", "token"]

    static let redacted = "<redacted>"

    /// A field's value as logs show it: redacted when its name is a known secret, or when
    /// whoever set it marked it sensitive (`indexingStrategy = .disallow`, as ``APIKey`` does
    /// for a header name of your choosing).
    static func value(of field: HTTPField) -> String {
        redactedFields.contains(field.name) || field.indexingStrategy == .disallow ? redacted : field.value
    }

    /// `GET https://host/path?token=<redacted>`: how logs and errors name a request.
    static func summary(_ request: Request) -> String {
        "\(request.method) \(redactedURL(request))"
    }

    /// The URL with any user info and secret query values removed: the known names and any
    /// the request marks secret (``APIKey`` in a query parameter of your choosing).
    static func redactedURL(_ request: Request) -> String {
        var authority = Substring(request.head.authority ?? "")
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let path = redactedPath(request.head.path ?? "/", also: request.redactedQueryNames)
        return (request.head.scheme ?? "https") + "://" + authority + path
    }

    /// Any absolute URL (a redirect's target, say) with user info and secret query values
    /// removed.
    static func redactedURL(_ url: String, also names: Set<String> = []) -> String {
        guard let schemeEnd = url.range(of: "://") else { return redactedPath(url, also: names) }
        let rest = url[schemeEnd.upperBound...]
        let pathStart = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        var authority = rest[..<pathStart]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var path = rest[pathStart...]
        if let hash = path.firstIndex(of: "#") { path = path[..<hash] }
        return url[..<schemeEnd.upperBound] + authority + redactedPath(String(path), also: names)
    }

    private static func redactedPath(_ path: String, also names: Set<String>) -> String {
        guard let question = path.firstIndex(of: "?") else { return path }
        let items = path[path.index(after: question)...].split(separator: "&", omittingEmptySubsequences: false).map { item in
            let name = String(item[..<(item.firstIndex(of: "=") ?? item.endIndex)])
            let decoded = name.removingPercentEncoding ?? name
            guard redactedQueryNames.contains(decoded.lowercased()) || names.contains(decoded) else { return String(item) }
            return name + "=" + redacted
        }
        return path[...question] + items.joined(separator: "&")
    }

    static func describe(_ request: Request) -> String {
        var text = "→ \(request.method) \(redactedURL(request))"
        for field in request.headerFields {
            text += "\n  \(field.name): \(value(of: field))"
        }
        if let length = request.body?.length {
            text += "\n  (body: \(length) bytes)"
        } else if request.body != nil {
            text += "\n  (body: streamed)"
        }
        return text
    }

    static func describe(_ response: HTTPResponse, for request: Request, after elapsed: Duration) -> String {
        var text = "← \(response.status.code) \(response.status.reasonPhrase) \(request.method) \(redactedURL(request)) in \(elapsed)"
        for field in response.headerFields {
            text += "\n  \(field.name): \(value(of: field, answering: request))"
        }
        return text
    }

    /// A response field's value as logs show it. A server may echo what it was sent: a URL
    /// field is redacted as the request's URL is, and a field named as one the request marked
    /// sensitive is redacted whole.
    static func value(of field: HTTPField, answering request: Request) -> String {
        if field.name == .location || field.name == .contentLocation {
            return redactedURL(field.value, also: request.redactedQueryNames)
        }
        if request.headerFields.contains(where: { $0.name == field.name && $0.indexingStrategy == .disallow }) {
            return redacted
        }
        return value(of: field)
    }
}

extension Request {
    /// The request as a `curl` command line, for pasting into a terminal or a bug report,
    /// with credentials redacted and without its body (which may hold a password or a refresh
    /// token): ``cURLDescription(includingBody:)`` adds it when you ask.
    public var cURLDescription: String {
        cURLDescription(includingBody: false)
    }

    /// The request as a `curl` command line with credentials redacted; with `includingBody`, a
    /// body held in memory is shown as text when it is UTF-8 (a streamed body never is).
    public func cURLDescription(includingBody: Bool) -> String {
        var parts = ["curl"]
        if method == .head {
            parts.append("--head")
        } else if method != .get {
            parts.append("-X \(method.rawValue)")
        }
        for field in headerFields {
            parts.append("-H " + Self.shellQuoted("\(field.name): \(RequestLog.value(of: field))"))
        }
        if !includingBody, let body {
            parts.append("--data-binary @- # body left out: \(body.length.map { "\($0) bytes" } ?? "streamed")")
        }
        if includingBody, let bytes = body?.bytes {
            let text = String(decoding: bytes.readableBytesView, as: UTF8.self)
            if text.utf8.elementsEqual(bytes.readableBytesView) {
                parts.append("--data-binary " + Self.shellQuoted(text))
            } else {
                parts.append("--data-binary @- # \(bytes.readableBytes) bytes of binary data")
            }
        }
        parts.append(Self.shellQuoted(RequestLog.redactedURL(self)))
        return parts.joined(separator: " \\\n  ")
    }

    private static func shellQuoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

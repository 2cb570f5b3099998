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

    static func value(of field: HTTPField) -> String {
        redactedFields.contains(field.name) ? redacted : field.value
    }

    /// The URL with any user info and secret query values removed.
    static func redactedURL(_ request: Request) -> String {
        var authority = Substring(request.head.authority ?? "")
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        return (request.head.scheme ?? "https") + "://" + authority + redactedPath(request.head.path ?? "/")
    }

    private static func redactedPath(_ path: String) -> String {
        guard let question = path.firstIndex(of: "?") else { return path }
        let items = path[path.index(after: question)...].split(separator: "&", omittingEmptySubsequences: false).map { item in
            guard let equals = item.firstIndex(of: "="),
                redactedQueryNames.contains(item[..<equals].removingPercentEncoding?.lowercased() ?? "")
            else { return String(item) }
            return item[...equals] + redacted
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
            text += "\n  \(field.name): \(value(of: field))"
        }
        return text
    }
}

extension Request {
    /// The request as a `curl` command line, with `Authorization`, `Cookie` and
    /// `Proxy-Authorization` values redacted, for pasting into a terminal or a bug report.
    ///
    /// A body held in memory is shown as text when it is UTF-8, a streamed body is not shown.
    public var cURLDescription: String {
        var parts = ["curl"]
        if method == .head {
            parts.append("--head")
        } else if method != .get {
            parts.append("-X \(method.rawValue)")
        }
        for field in headerFields {
            parts.append("-H " + Self.shellQuoted("\(field.name): \(RequestLog.value(of: field))"))
        }
        if let bytes = body?.bytes {
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

public import Foundation
public import HTTPTypes

extension HTTPArchive {
    /// What a recording leaves out, so that it can be committed to a repository.
    ///
    /// The rules of the client's logs always apply: the values of `Authorization`, `Cookie`,
    /// `Set-Cookie`, `Proxy-Authorization`, `X-API-Key`, `API-Key`, `X-Auth-Token`, of any
    /// field marked sensitive (an ``APIKey``'s header of any name), and of the query parameters
    /// `api_key`, `apikey`, `api-key`, `key`, `access_token`, `token` and an ``APIKey``'s
    /// parameter are recorded as `<redacted>`. A redaction adds names of your own, and the
    /// fields of JSON and form bodies whose values are secrets:
    ///
    /// ```swift
    /// var redaction = HTTPArchive.Redaction()
    /// redaction.headerNames.insert(HTTPField.Name("X-Tenant-Secret")!)
    /// redaction.bodyFieldNames.insert("pin")
    /// ```
    public struct Redaction: Sendable, Equatable {
        /// Header fields whose values are recorded as `<redacted>`, besides the standard ones.
        public var headerNames: Set<HTTPField.Name>
        /// Query parameters whose values are recorded as `<redacted>`, besides the standard
        /// ones.
        public var queryNames: Set<String>
        /// Names of the fields, at any depth, of JSON bodies and of form bodies
        /// (`application/x-www-form-urlencoded`) whose values are recorded as `<redacted>`:
        /// passwords and the tokens of an OAuth exchange, unless you change them. Compared
        /// without regard to case.
        public var bodyFieldNames: Set<String>

        /// The standard rules, with OAuth's and passwords' body fields.
        public init(
            headerNames: Set<HTTPField.Name> = [],
            queryNames: Set<String> = [],
            bodyFieldNames: Set<String> = ["password", "client_secret", "access_token", "refresh_token", "id_token"]
        ) {
            self.headerNames = headerNames
            self.queryNames = queryNames
            self.bodyFieldNames = bodyFieldNames
        }

        static let redacted = RequestLog.redacted

        func value(of field: HTTPField) -> String {
            headerNames.contains(field.name) ? Self.redacted : RequestLog.value(of: field)
        }

        func value(of field: HTTPField, answering request: Trellis.Request) -> String {
            headerNames.contains(field.name) ? Self.redacted : RequestLog.value(of: field, answering: request)
        }

        func url(of request: Trellis.Request) -> String {
            var request = request
            request.redactedQueryNames.formUnion(queryNames)
            return RequestLog.redactedURL(request)
        }

        /// `body` with the values of ``bodyFieldNames`` redacted, when it is JSON or a form
        /// that holds any; else `body` as it is. The values taken out are added to `secrets`.
        func body(_ body: Data, mimeType: String, secrets: inout [String]) -> Data {
            guard !bodyFieldNames.isEmpty else { return body }
            // Lowercased here, not when set: a name inserted later counts in any case too.
            let names = Set(bodyFieldNames.map { $0.lowercased() })
            let type = mimeType.lowercased()
            if type.contains("json") {
                guard let value = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) else { return body }
                var changed = false
                let redacted = redactingJSON(value, names: names, changed: &changed, secrets: &secrets)
                guard changed, let data = try? JSONSerialization.data(withJSONObject: redacted, options: [.fragmentsAllowed, .sortedKeys, .withoutEscapingSlashes]) else { return body }
                return data
            }
            if type.hasPrefix("application/x-www-form-urlencoded") {
                let text = String(decoding: body, as: UTF8.self)
                var changed = false
                let pairs = text.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
                    let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
                    let decoded = (String(name).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(name)).lowercased()
                    guard names.contains(decoded) else { return String(pair) }
                    changed = true
                    if let value = pair.split(separator: "=", maxSplits: 1).dropFirst().first {
                        secrets.append(String(value))
                        secrets.append(String(value).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "")
                    }
                    return name + "=" + Self.redacted
                }
                return changed ? Data(pairs.joined(separator: "&").utf8) : body
            }
            return body
        }

        private func redactingJSON(_ value: Any, names: Set<String>, changed: inout Bool, secrets: inout [String]) -> Any {
            if let object = value as? [String: Any] {
                var result = [String: Any]()
                for (key, inner) in object {
                    if names.contains(key.lowercased()), !(inner is [String: Any]), !(inner is [Any]) {
                        result[key] = Self.redacted
                        changed = true
                        if let text = inner as? String { secrets.append(text) }
                    } else {
                        result[key] = redactingJSON(inner, names: names, changed: &changed, secrets: &secrets)
                    }
                }
                return result
            }
            if let array = value as? [Any] {
                return array.map { redactingJSON($0, names: names, changed: &changed, secrets: &secrets) }
            }
            return value
        }

        /// The secret values `request` carries in the fields and query parameters this
        /// redaction takes out: a server may echo them anywhere in its answer.
        func secrets(in request: Trellis.Request) -> [String] {
            var found: [String] = []
            for field in request.headerFields where value(of: field) == Self.redacted {
                found.append(field.value)
                // `Basic dXNlcjpw…`: the credential alone, which an echo may show apart.
                if let space = field.value.firstIndex(of: " ") { found.append(String(field.value[field.value.index(after: space)...])) }
                if field.name == .cookie {
                    found += field.value.split(separator: ";").compactMap { $0.split(separator: "=", maxSplits: 1).dropFirst().first.map(String.init) }
                }
            }
            let full = request.urlString
            let shown = url(of: request)
            if full != shown {
                let items = { (url: String) in HTTPArchive.queryItems(of: url) }
                for (real, redacted) in zip(items(full), items(shown)) where real.value != redacted.value {
                    found.append(real.value)
                    if let raw = real.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) { found.append(raw) }
                }
            }
            return found
        }

        /// `text` with every one of `secrets` (and its form escaped in JSON) replaced by
        /// `<redacted>`; secrets shorter than 4 characters are left, since replacing them would
        /// mangle the text without hiding anything.
        static func scrubbing(_ text: String, of secrets: [String]) -> String {
            var text = text
            for secret in Set(secrets).filter({ $0.count >= 4 }).sorted(by: { $0.count > $1.count }) {
                text = text.replacingOccurrences(of: secret, with: redacted)
                let escaped = secret.replacingOccurrences(of: "/", with: "\\/")
                if escaped != secret { text = text.replacingOccurrences(of: escaped, with: redacted) }
            }
            return text
        }
    }
}

extension HTTPArchive.Request {
    /// `request` as an archive records it, redacted by `redaction`, with `body` (the bytes
    /// sent, or as many as were kept) when it had one.
    ///
    /// A replay compares a live request in this form with the recorded ones, so that a
    /// secret in either is never compared.
    public init(_ request: Request, body: Data?, bodySize: Int? = nil, redaction: HTTPArchive.Redaction) {
        var secrets: [String] = []
        self.init(request, body: body, bodySize: bodySize, redaction: redaction, secrets: &secrets)
    }

    /// The same, adding the secret values taken out of the body to `secrets`.
    init(_ request: Request, body: Data?, bodySize: Int?, redaction: HTTPArchive.Redaction, secrets: inout [String]) {
        let url = redaction.url(of: request)
        self.init(
            method: request.method.rawValue,
            url: url,
            httpVersion: HTTPArchive.unknownVersion,
            cookies: HTTPArchive.cookies(sent: request.headerFields),
            headers: request.headerFields.map { HTTPArchive.NameValue(name: $0.name.rawName, value: redaction.value(of: $0)) },
            queryString: HTTPArchive.queryItems(of: url),
            postData: nil,
            headersSize: -1,
            bodySize: bodySize ?? body?.count ?? (request.body == nil ? 0 : -1),
            comment: nil
        )
        if let body {
            let mimeType = request.headerFields[.contentType] ?? request.body?.defaultContentType ?? "application/octet-stream"
            let redacted = redaction.body(body, mimeType: mimeType, secrets: &secrets)
            let (text, encoding) = HTTPArchive.text(of: redacted, contentEncoded: request.headerFields[.contentEncoding] != nil)
            postData = HTTPArchive.PostData(mimeType: mimeType, text: text, encoding: encoding)
        }
    }
}

extension HTTPArchive {
    /// What an archive says of a protocol version a transport does not report.
    static let unknownVersion = "unknown"

    /// A body as HAR text: UTF-8 as it is, anything else (a compressed body) in base64.
    static func text(of body: Data, contentEncoded: Bool) -> (text: String, encoding: String?) {
        if !contentEncoded, let text = String(data: body, encoding: .utf8) { return (text, nil) }
        return (body.base64EncodedString(), "base64")
    }

    /// The items of `url`'s query, as they are written (decoded for reading).
    static func queryItems(of url: String) -> [NameValue] {
        guard let question = url.firstIndex(of: "?") else { return [] }
        return url[url.index(after: question)...].split(separator: "&").map { item in
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text) }
            return NameValue(name: decode(parts[0]), value: parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    /// The cookies a request's `Cookie` fields send, by name, their values redacted.
    static func cookies(sent fields: HTTPFields) -> [Cookie] {
        fields[values: .cookie].flatMap { $0.split(separator: ";") }.compactMap { pair in
            let name = pair.split(separator: "=", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            return name.isEmpty ? nil : Cookie(name: name, value: RequestLog.redacted)
        }
    }

    /// The cookies a response's `Set-Cookie` fields set, by name, their values redacted.
    static func cookies(set fields: HTTPFields) -> [Cookie] {
        fields[values: .setCookie].compactMap { line in
            let name = line.split(separator: ";", maxSplits: 1).first?.split(separator: "=", maxSplits: 1).first
                .map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            return name.isEmpty ? nil : Cookie(name: name, value: RequestLog.redacted)
        }
    }
}

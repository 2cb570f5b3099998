import AsyncHTTPClient
import HTTPTypes
import NIOHTTP1

/// AsyncHTTPClient's response heads as swift-http-types heads.
extension AsyncHTTPClientTransport {
    static func responseHead(status: HTTPResponseStatus, headers: HTTPHeaders) -> HTTPResponse {
        var fields = HTTPFields()
        fields.reserveCapacity(headers.count)
        for (name, value) in headers {
            if let fieldName = Self.commonFieldName(name) ?? HTTPField.Name(name) {
                fields.append(HTTPField(name: fieldName, value: value))
            }
        }
        return HTTPResponse(status: .init(code: Int(status.code), reasonPhrase: status.reasonPhrase), headerFields: fields)
    }

    /// The name of a field most responses carry, spelled as HTTPTypes spells it, without
    /// checking and lowercasing it again: every response's head is converted, and those two
    /// steps were half of the conversion's time (measured in `Benchmarks/`). The result is the
    /// name `HTTPField.Name(name)` would make.
    static func commonFieldName(_ name: String) -> HTTPField.Name? {
        switch name {
        case "Content-Type": .contentType
        case "Content-Length": .contentLength
        case "Date": .date
        case "Server": .server
        case "Connection": .connection
        case "Cache-Control": .cacheControl
        case "ETag": .eTag
        case "Last-Modified": .lastModified
        case "Vary": .vary
        case "Content-Encoding": .contentEncoding
        case "Transfer-Encoding": .transferEncoding
        case "Set-Cookie": .setCookie
        case "Location": .location
        default: nil
        }
    }
}

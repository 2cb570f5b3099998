import AsyncHTTPClient
import HTTPTypes
import NIOHTTP1

/// AsyncHTTPClient's response heads as swift-http-types heads.
extension AsyncHTTPClientTransport {
    static func responseHead(status: HTTPResponseStatus, headers: HTTPHeaders) -> HTTPResponse {
        var fields = HTTPFields()
        fields.reserveCapacity(headers.count)
        for (name, value) in headers {
            if let fieldName = HTTPField.Name(name) {
                fields.append(HTTPField(name: fieldName, value: value))
            }
        }
        return HTTPResponse(status: .init(code: Int(status.code), reasonPhrase: status.reasonPhrase), headerFields: fields)
    }
}

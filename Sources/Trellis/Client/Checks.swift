public import Foundation

/// A check made before a request is sent (Yggdrasil's preconditions): if it throws, nothing is
/// sent and the call fails with ``TrellisError/preconditionFailed(_:)``.
///
/// ```swift
/// let online = RequestPrecondition("network is reachable") { _ in
///     guard await reachability.isOnline else { throw Offline() }
/// }
/// let client = Client(baseURL: url) { $0.validation.preconditions = [online] }
/// ```
public struct RequestPrecondition: Sendable {
    /// What the check is, for the error.
    public let name: String
    let check: @Sendable (Request) async throws -> Void

    /// A check named `name` (the name errors and logs give), run before the request is sent;
    /// throwing stops the call with ``TrellisError/preconditionFailed(_:)``.
    public init(_ name: String, _ check: @escaping @Sendable (Request) async throws -> Void) {
        self.name = name
        self.check = check
    }
}

/// A check of a buffered response after the status check (Yggdrasil's response validations):
/// if it throws, the call fails with ``TrellisError/validationFailed(_:)`` instead of
/// returning or decoding the response.
///
/// ```swift
/// let json = ResponseValidation("the body is JSON") { response, _ in
///     guard response.headerFields[.contentType]?.hasPrefix("application/json") == true else {
///         throw NotJSON()
///     }
/// }
/// ```
public struct ResponseValidation: Sendable {
    /// What the check is, for the error.
    public let name: String
    let check: @Sendable (Response<Data>, Request) throws -> Void

    /// A check named `name`, run on the final buffered response after its status is accepted;
    /// throwing fails the call with ``TrellisError/validationFailed(_:)``.
    public init(_ name: String, _ check: @escaping @Sendable (Response<Data>, Request) throws -> Void) {
        self.name = name
        self.check = check
    }
}

/// A precondition or validation that did not hold.
public struct RequestCheckFailure: Sendable, CustomStringConvertible {
    /// The check's name.
    public let name: String
    /// The method and URL of the request, for messages and logs.
    public let request: String
    /// The response's status, for a failed validation.
    public let status: Int?
    /// What the check threw.
    public let underlying: any Error

    public var description: String {
        let status = status.map { " (status \($0))" } ?? ""
        return "\(name) did not hold for \(request)\(status): \(underlying)"
    }
}

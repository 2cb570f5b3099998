import Trellis

/// The transports every integration test runs over.
enum TransportKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case asyncHTTPClient
    case urlSession

    var testDescription: String { rawValue }

    var transport: any Transport {
        switch self {
        case .asyncHTTPClient: AsyncHTTPClientTransport.shared
        case .urlSession: Self.sharedURLSession
        }
    }

    private static let sharedURLSession = URLSessionTransport()
}

import Testing

import Trellis

/// The transports every integration test runs over.
enum TransportKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case asyncHTTPClient
    case urlSession

    var testDescription: String { rawValue }

    var transport: any Transport {
        switch self {
        case .asyncHTTPClient: AsyncHTTPClientTransport.shared
        // A session per use: tests run in parallel, and one test's 200 concurrent calls
        // queued in a shared session would delay another test's request past its timeout.
        case .urlSession: URLSessionTransport()
        }
    }
}

import Testing

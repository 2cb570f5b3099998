import Foundation
import HTTPTypes
import HTTPTypesFoundation
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Routes the session's callbacks to the exchange of each task.
final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let exchanges = NIOLockedValueBox([Int: URLSessionExchange]())
    private let pinning: CertificatePinning?
    /// The connectivity settings the challenges apply, if any.
    private let connectivity: URLSessionConnectivity?

    init(pinning: CertificatePinning?, connectivity: URLSessionConnectivity?) {
        self.pinning = pinning
        self.connectivity = connectivity
    }

    func register(_ exchange: URLSessionExchange) {
        exchanges.withLockedValue { $0[exchange.task.taskIdentifier] = exchange }
    }

    private func exchange(for task: URLSessionTask) -> URLSessionExchange? {
        exchanges.withLockedValue { $0[task.taskIdentifier] }
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        exchange(for: dataTask)?.received(response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        exchange(for: dataTask)?.received(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let exchange = exchanges.withLockedValue { $0.removeValue(forKey: task.taskIdentifier) }
        exchange?.completed(with: error)
    }

    /// The client follows redirects itself (``RedirectPolicy``), so the 3xx response is
    /// delivered as it is.
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    /// Trellis does its own authentication, so a 401 must reach the caller as a response.
    ///
    /// On Apple platforms default handling does that. FoundationNetworking never proceeds
    /// from default handling without a stored credential (the 401 stays pending forever) and
    /// cancels the task for any other answer; there the challenge's failure response is
    /// delivered as the response (its body is lost), then the task is cancelled.
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(Darwin)
        let space = challenge.protectionSpace
        if let connectivity {
            let (disposition, credential, refusal) = connectivity.answer(challenge, pinning: pinning)
            if let refusal { exchange(for: task)?.refused(refusal) }
            completionHandler(disposition, credential)
            return
        }
        if space.authenticationMethod == NSURLAuthenticationMethodServerTrust, let trust = space.serverTrust,
            let pins = pinning?.pins(for: space.host)
        {
            if let reason = ServerTrustPinning.mismatch(of: trust, pins: pins) {
                exchange(for: task)?.refused(.pins(reason))
                completionHandler(.cancelAuthenticationChallenge, nil)
            } else {
                completionHandler(.useCredential, URLCredential(trust: trust))
            }
            return
        }
        completionHandler(.performDefaultHandling, nil)
        #else
        if let response = challenge.failureResponse, let exchange = exchange(for: task) {
            exchange.received(response)
            exchange.finishBody()
        }
        completionHandler(.cancelAuthenticationChallenge, nil)
        #endif
    }
}

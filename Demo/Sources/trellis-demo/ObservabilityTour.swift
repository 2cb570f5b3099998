// The tour's observability step: an event monitor sees each hop of a call that is redirected,
// the way a tracer or a metrics backend would through the same stages.
import Foundation
import HTTPTypes
import Trellis

/// Prints what the client does on the wire, call by call.
struct WirePrinter: ClientEventMonitor {
    func requestWillBeSent(_ request: Trellis.Request, hop: Int) {
        print("  hop \(hop): \(request.method) \(request.head.path ?? "")")
    }

    func responseHeadReceived(_ response: HTTPResponse, for request: Trellis.Request, hop: Int) {
        print("  hop \(hop): \(response.status.code)")
    }

    func redirectFollowed(from request: Trellis.Request, to redirected: Trellis.Request, status: HTTPResponse.Status) {
        print("  redirect to \(redirected.head.path ?? "")")
    }

    func callFinished(_ call: CallSummary) {
        print("  \(call.endpoint): \(call.status.map { String($0.code) } ?? "failed") after \(call.hops) hops")
    }
}

func observabilityTour(_ baseURL: URL) async throws {
    step("Observability: an event monitor sees each hop (a tracer and metrics use the same stages)")
    let client = Client(baseURL: baseURL) { $0.observability.eventMonitors = [WirePrinter()] }
    var request = try Trellis.Request(method: .get, url: baseURL.appending(path: "latest"))
    request.pathTemplate = "/latest"
    let post = try await client.value(for: request, as: Post.self)
    print("  the latest post is \"\(post.title)\"")
}

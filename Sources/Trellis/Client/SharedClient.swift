import Foundation

extension Client {
    /// The client of calls made without one, as Yggdrasil's tasks are
    /// (`DataTask<Data>(url:)`): the defaults, over the platform's default transport, and no
    /// base URL of use, so only absolute URLs can be sent through it and no access token is
    /// ever added. It never changes; make your own client for anything else.
    public static let shared = Client(baseURL: URL(string: "trellis-shared-client:")!)
}

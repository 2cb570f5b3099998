public import Foundation

extension URL {
    /// The base URL of a server listening on the Unix domain socket at `socketPath`, with
    /// `path` under it: `http+unix://` and the socket's path percent-encoded as the host, as
    /// AsyncHTTPClient spells it (`https+unix://` with `tls`).
    ///
    /// ```swift
    /// let docker = DockerService(baseURL: .unixSocket("/var/run/docker.sock"))
    /// let version = try await docker.ping()        // GET /_ping over the socket
    /// ```
    ///
    /// Requests to such a URL need ``AsyncHTTPClientTransport`` (the default on Linux, and
    /// the transport of any client with connectivity settings); URLSession cannot reach a
    /// socket. A proxy never applies to them.
    public static func unixSocket(_ socketPath: String, path: String = "", tls: Bool = false) -> URL {
        var allowed = CharacterSet.urlHostAllowed
        allowed.remove(charactersIn: "/:%")
        let host = socketPath.addingPercentEncoding(withAllowedCharacters: allowed) ?? socketPath
        let tail = path.isEmpty || path.hasPrefix("/") ? path : "/" + path
        let scheme = tls ? "https+unix" : "http+unix"
        if let url = URL(string: "\(scheme)://\(host)\(tail)") { return url }
        // A path with characters a URL cannot hold (a lone `%`) has them all encoded.
        let encoded = tail.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? ""
        return URL(string: "\(scheme)://\(host)\(encoded)") ?? URL(string: "\(scheme)://\(host)/")!
    }
}

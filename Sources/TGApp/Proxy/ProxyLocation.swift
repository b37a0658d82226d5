import Foundation

/// An API's `Location` that points at the API itself (its configured origin, under its base
/// path) names a URL the app cannot call with its TokenGate token, and leaks the API's address:
/// it becomes TokenGate's URL for the same resource. Any other `Location` passes unchanged.
///
/// One immutable object per API, made once: every cached call captures it (one reference).
final class ProxyLocation: Sendable {
    /// The API's scheme and host, lower-cased, and its port (the scheme's default when none).
    let scheme: String
    let host: String
    let port: Int
    /// The base URL's path without its trailing `/`.
    let basePath: String
    /// `<public base URL>/api/<name>`.
    let gatewayBase: String

    init?(baseURL: String, name: String, publicBaseURL: String) {
        guard let url = URLComponents(string: baseURL), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else {
            return nil
        }
        self.scheme = scheme
        self.host = host
        port = url.port ?? Self.defaultPort(scheme)
        basePath = url.percentEncodedPath.hasSuffix("/") ? String(url.percentEncodedPath.dropLast()) : url.percentEncodedPath
        gatewayBase = (publicBaseURL.hasSuffix("/") ? String(publicBaseURL.dropLast()) : publicBaseURL) + "/api/" + name
    }

    /// TokenGate's URL for `location`, or nil when it does not point under the API's base URL.
    /// A network-path reference (`//host:port/path`) names the API as well when its host and port
    /// are the API's (the port defaulting to that of the API's scheme).
    func rewrite(_ location: String) -> String? {
        guard let url = URLComponents(string: location),
            let scheme = url.scheme?.lowercased() ?? (location.hasPrefix("//") ? self.scheme : nil), let host = url.host?.lowercased(),
            url.user == nil, url.password == nil, scheme == self.scheme, host == self.host,
            (url.port ?? Self.defaultPort(scheme)) == port
        else { return nil }
        let path = url.percentEncodedPath
        guard path == basePath || path.hasPrefix(basePath + "/") || (basePath.isEmpty && path.isEmpty) else { return nil }
        var rewritten = gatewayBase + path.dropFirst(basePath.count)
        if let query = url.percentEncodedQuery { rewritten += "?" + query }
        if let fragment = url.percentEncodedFragment { rewritten += "#" + fragment }
        return rewritten
    }

    private static func defaultPort(_ scheme: String) -> Int { scheme == "https" ? 443 : 80 }
}

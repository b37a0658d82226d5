import Foundation
import HTTPTypes
import TGBase
public import TGEventLoop
import TGHTTPClient
import TGHTTPServer

/// One API reachable through `/api/{name}/…` (docs/proxy.md): where its calls go, what they may
/// be, how its answers are passed back, and its HTTP clients: one per event loop of the server, so
/// that a call goes out on the loop of the app's connection and its answer comes back there.
public final class ProxyUpstream: Sendable {
    /// What the proxy needs of an API's configuration.
    public struct Settings: Sendable {
        public var name: String
        public var baseURL: String
        /// Methods forwarded (upper case); others answer 405.
        public var methods: [String]
        /// Paths forwarded (segment prefixes of the path after `/api/{name}`); others answer 403.
        public var pathPrefixes: [String]
        /// Header fields added to every forwarded request (replacing the app's).
        public var headers: [String: String]
        /// The longest the exchange may go quiet (the head after the request, the body between
        /// bytes, an upload between chunks).
        public var timeoutSeconds: Int
        public var connectTimeoutSeconds: Int
        /// Connections to this API at once, across every loop of this instance.
        public var maxConnections: Int
        public var caFile: String?
        /// Whether links to the API in its answers become TokenGate's (``ProxyLinkRewrite``).
        public var rewriteLinks: Bool
        public var rewriteMaxBodyBytes: Int
        /// Whether apps may open WebSocket connections to it (``WebSocketRelay``).
        public var webSocket: Bool
        /// The `Origin`s a WebSocket handshake may come with (exact, case-insensitive); one
        /// without an `Origin` (a native app's) is taken.
        public var webSocketOrigins: [String]
        /// A WebSocket with no byte either way for this long is closed (1001); 0: never.
        public var webSocketIdleSeconds: Int

        public init(
            name: String,
            baseURL: String,
            methods: [String],
            pathPrefixes: [String],
            headers: [String: String],
            timeoutSeconds: Int,
            connectTimeoutSeconds: Int,
            maxConnections: Int,
            caFile: String?,
            rewriteLinks: Bool,
            rewriteMaxBodyBytes: Int,
            webSocket: Bool = false,
            webSocketOrigins: [String] = [],
            webSocketIdleSeconds: Int = 0
        ) {
            self.name = name
            self.baseURL = baseURL
            self.methods = methods
            self.pathPrefixes = pathPrefixes
            self.headers = headers
            self.timeoutSeconds = timeoutSeconds
            self.connectTimeoutSeconds = connectTimeoutSeconds
            self.maxConnections = maxConnections
            self.caFile = caFile
            self.rewriteLinks = rewriteLinks
            self.rewriteMaxBodyBytes = rewriteMaxBodyBytes
            self.webSocket = webSocket
            self.webSocketOrigins = webSocketOrigins
            self.webSocketIdleSeconds = webSocketIdleSeconds
        }
    }

    public let settings: Settings
    /// Where the upstream token of a call comes from.
    let credentials: any ProxyCredentials
    /// One client per event loop of the server, by loop index.
    let clients: [HTTPClient]
    let scheme: String
    let authority: String
    /// The base URL's path without its trailing `/`.
    let basePath: String
    /// The configured `headers`, parsed (their names), and as header lines.
    let extraFields: HTTPFields
    let extraLines: HeaderLines
    /// The configured `methods`, parsed (checked on every call without building strings).
    let methods: [HTTPRequest.Method]
    /// The configured `path_prefixes` without their trailing `/` (``ProxyTarget/bare(_:)``).
    let barePrefixes: [String]
    /// How the API's own `Location`s become TokenGate's.
    let location: ProxyLocation?
    /// With `rewrite_links`: how the links in its answers become TokenGate's.
    let linkRewrite: ProxyLinkRewrite?

    /// nil when the base URL has no scheme or host (check-config refuses such a configuration).
    /// `loops`: the server's event loops, each of which gets a client of its own with its share
    /// of ``Settings/maxConnections`` (``connectionShares(_:loops:)``).
    public init?(
        _ settings: Settings,
        loops: [EventLoop],
        credentials: any ProxyCredentials,
        publicBaseURL: String,
        linkMetrics: ProxyLinkRewrite.Metrics? = nil
    ) {
        guard let url = URLComponents(string: settings.baseURL), let scheme = url.scheme, let host = url.host else { return nil }
        self.settings = settings
        self.credentials = credentials
        self.scheme = scheme.lowercased()
        authority = url.port.map { "\(url.percentEncodedHost ?? host):\($0)" } ?? (url.percentEncodedHost ?? host)
        basePath = url.percentEncodedPath.hasSuffix("/") ? String(url.percentEncodedPath.dropLast()) : url.percentEncodedPath
        extraFields = ProxyHeaders.extraFields(settings.headers)
        extraLines = ProxyHeaders.lines(extraFields)
        methods = settings.methods.compactMap { HTTPRequest.Method($0) }
        barePrefixes = settings.pathPrefixes.map(ProxyTarget.bare)
        let location = ProxyLocation(baseURL: settings.baseURL, name: settings.name, publicBaseURL: publicBaseURL)
        self.location = location
        linkRewrite =
            settings.rewriteLinks
            ? location.map { ProxyLinkRewrite(location: $0, maxBodyBytes: settings.rewriteMaxBodyBytes, metrics: linkMetrics) } : nil
        let shares = Self.connectionShares(settings.maxConnections, loops: loops.count)
        let allowPlainHTTP = self.scheme == "http" && Loopback.isLoopback(host: host)
        clients = zip(loops, shares).map { loop, share in
            var configuration = HTTPClient.Configuration()
            configuration.maxConnections = share
            configuration.maxConnectionsPerHost = share
            configuration.connectTimeout = .seconds(settings.connectTimeoutSeconds)
            configuration.caFile = settings.caFile
            // Redirects go back to the app, as the API gave them.
            configuration.followRedirects = false
            configuration.allowPlainHTTPToLoopbackForTesting = allowPlainHTTP
            return HTTPClient(configuration: configuration, loop: loop)
        }
    }

    /// `max_connections` split between `loops` clients: together exactly as many, each at least
    /// one (so with fewer connections than loops, one per loop).
    static func connectionShares(_ maxConnections: Int, loops: Int) -> [Int] {
        guard loops > 0 else { return [] }
        let base = maxConnections / loops
        let extra = maxConnections % loops
        return (0..<loops).map { max(1, base + ($0 < extra ? 1 : 0)) }
    }
}

extension TokenGateConfiguration {
    /// An API reachable through `/api/{name}/…` with the upstream access token of the caller's
    /// account (docs/proxy.md).
    public struct Upstream: Sendable, Codable {
        public var name: String
        /// Where calls go: `/api/{name}/me/photo` → `{base_url}/me/photo`. https (http only to
        /// loopback, for development).
        public var baseURL: String
        /// The provider whose tokens this API takes, and the scopes they must carry.
        public var provider: String
        public var scopes: [String]
        /// Methods forwarded; others answer 405.
        public var methods: [String]
        /// Paths forwarded (segment prefixes of the path after `/api/{name}`); others answer 403.
        public var pathPrefixes: [String]
        /// The longest the exchange may go quiet: the head is due this long after the request (or
        /// an upload's last byte), and the body may not stall longer (docs/proxy.md).
        public var timeoutSeconds: Int
        public var connectTimeoutSeconds: Int
        /// The largest request body forwarded (413 beyond).
        public var maxBodyBytes: Int
        /// Connections to this API at once; more requests wait for one.
        public var maxConnections: Int
        /// Header fields added to every forwarded request (replacing the app's).
        public var headers: [String: String]
        /// A CA bundle for an API with a private certificate authority.
        public var caFile: String?
        /// Whether apps may take this API's provider token themselves through token exchange
        /// (RFC 8693 on `/auth/token`). Off by default: the provider's tokens stay on the server.
        public var tokenExchange: Bool
        /// Whether absolute links to this API in its answers become TokenGate's `/api/{name}/…`
        /// URLs: in JSON bodies of at most ``rewriteMaxBodyBytes`` and in `Link` fields
        /// (docs/proxy.md, "Next links and other absolute URLs"). Off by default: answers pass
        /// byte for byte, as before the setting existed.
        public var rewriteLinks: Bool
        /// The largest JSON body whose links are rewritten (read whole first); a larger one
        /// streams unchanged.
        public var rewriteMaxBodyBytes: Int
        /// What a step-up sign-in for this API does with its tokens (docs/proxy.md, "Step-up"):
        /// `shared` (the default) makes the stronger sign-in's grant the account's; `separate`
        /// keeps its token for this API's calls until it expires and leaves the grant as it was.
        public var stepUpTokens: String
        /// Whether apps may open WebSocket connections to this API through `/api/{name}/…`
        /// (docs/proxy.md, "WebSocket"). Off by default.
        public var websocket: Bool
        /// The `Origin`s (`https://app.example.com`) a WebSocket handshake may carry; one without
        /// an `Origin` (a native app's) is always taken. Empty by default: no browser page may open one.
        public var websocketOrigins: [String]
        /// A WebSocket on which nothing moved either way for this long is closed (close code
        /// 1001); apps that keep quiet connections open send pings. 0: never.
        public var websocketIdleTimeoutSeconds: Int

        /// The values `step_up_tokens` takes.
        static let stepUpTokenModes = ["shared", "separate"]

        /// The largest `rewrite_max_body_bytes`: each call whose answer is rewritten holds its
        /// body in memory, up to this.
        static let rewriteMaxBodyBytesLimit = 16 << 20
        static let defaultMethods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

        enum CodingKeys: String, CodingKey, CaseIterable {
            case name, provider, scopes, methods, headers
            case baseURL = "base_url"
            case pathPrefixes = "path_prefixes"
            case timeoutSeconds = "timeout_seconds"
            case connectTimeoutSeconds = "connect_timeout_seconds"
            case maxBodyBytes = "max_body_bytes"
            case maxConnections = "max_connections"
            case caFile = "ca_file"
            case tokenExchange = "token_exchange"
            case rewriteLinks = "rewrite_links"
            case rewriteMaxBodyBytes = "rewrite_max_body_bytes"
            case stepUpTokens = "step_up_tokens"
            case websocket
            case websocketOrigins = "websocket_origins"
            case websocketIdleTimeoutSeconds = "websocket_idle_timeout_seconds"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            name = try c.decode(String.self, forKey: .name)
            baseURL = try c.value(.baseURL, default: "")
            provider = try c.value(.provider, default: "")
            scopes = try c.value(.scopes, default: [])
            methods = try c.value(.methods, default: Self.defaultMethods).map { $0.uppercased() }
            pathPrefixes = try c.value(.pathPrefixes, default: ["/"])
            timeoutSeconds = try c.value(.timeoutSeconds, default: 30, in: 1...)
            connectTimeoutSeconds = try c.value(.connectTimeoutSeconds, default: 5, in: 1...)
            maxBodyBytes = try c.value(.maxBodyBytes, default: 10 << 20, in: 1...)
            maxConnections = try c.value(.maxConnections, default: 1024, in: 1...)
            headers = try c.value(.headers, default: [:])
            caFile = try c.decodeIfPresent(String.self, forKey: .caFile)
            tokenExchange = try c.value(.tokenExchange, default: false)
            rewriteLinks = try c.value(.rewriteLinks, default: false)
            rewriteMaxBodyBytes = try c.value(
                .rewriteMaxBodyBytes,
                default: 1 << 20,
                in: 1...Self.rewriteMaxBodyBytesLimit,
                note: "16 MiB: a rewritten answer is held in memory"
            )
            stepUpTokens = try c.value(.stepUpTokens, default: "shared")
            websocket = try c.value(.websocket, default: false)
            websocketOrigins = try c.value(.websocketOrigins, default: [])
            websocketIdleTimeoutSeconds = try c.value(.websocketIdleTimeoutSeconds, default: 300, in: 0...)
        }
    }
}

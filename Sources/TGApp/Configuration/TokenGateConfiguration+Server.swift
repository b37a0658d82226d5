extension TokenGateConfiguration {
    /// Listening, proxies in front, and the limits protecting the server.
    public struct Server: Sendable, Codable {
        public var host: String
        public var port: Int
        /// The URL clients and providers reach TokenGate at (callback URLs are built from it).
        public var publicBaseURL: String
        /// Peers whose `X-Forwarded-*` / `Forwarded` headers are honoured (IPs or CIDRs).
        public var trustedProxies: [String]
        public var threads: Int?
        public var connectionLimit: Int
        /// Open connections at most from one client address (0: no limit). Trusted proxies are
        /// exempt: their connections carry many clients.
        public var maxConnectionsPerIP: Int
        /// A request body must arrive at this many bytes per second at least, over each 10 s
        /// window (a trickled body); 0: no minimum.
        public var minBodyBytesPerSecond: Int
        public var connectionTimeoutSeconds: Int
        /// A request head must arrive in full within this many seconds (slowloris); 0: no limit.
        public var requestHeadTimeoutSeconds: Int
        public var maxBodyBytes: Int
        public var requestTimeoutSeconds: Int
        public var drainTimeoutSeconds: Int
        /// Requests per client address and minute to `/auth/login`, `/auth/callback`, and
        /// `/auth/token` with `/auth/transfer` (0: no limit).
        public var loginRateLimitPerMinute: Int
        public var callbackRateLimitPerMinute: Int
        public var tokenRateLimitPerMinute: Int
        /// Requests per client address and minute to `/auth/backchannel-logout/{provider}` (0: no
        /// limit). The provider is the client: one address sends every logout of a mass sign-out.
        public var backChannelLogoutRateLimitPerMinute: Int
        /// Requests per client address and minute to `/auth/ssf/{provider}` (0: no limit).
        public var sharedSignalsRateLimitPerMinute: Int
        /// IPv6 clients are counted by their first this many bits, by the rate limits and by
        /// `max_connections_per_ip` (a subscriber is usually given a whole /64, so every address
        /// of its own is one client); 32 to 128. An IPv4-mapped address counts as its IPv4 address.
        public var ipv6PrefixLength: Int
        /// Where the rate limits' buckets live: `database`, shared by every instance
        /// (docs/scaling.md), or `memory`, this instance's own.
        public var rateLimitStore: RateLimitStoreKind

        public enum RateLimitStoreKind: String, Sendable, Codable {
            case database, memory
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case host, port, threads
            case publicBaseURL = "public_base_url"
            case trustedProxies = "trusted_proxies"
            case connectionLimit = "connection_limit"
            case maxConnectionsPerIP = "max_connections_per_ip"
            case minBodyBytesPerSecond = "min_body_bytes_per_second"
            case connectionTimeoutSeconds = "connection_timeout_seconds"
            case requestHeadTimeoutSeconds = "request_head_timeout_seconds"
            case maxBodyBytes = "max_body_bytes"
            case requestTimeoutSeconds = "request_timeout_seconds"
            case drainTimeoutSeconds = "drain_timeout_seconds"
            case loginRateLimitPerMinute = "login_rate_limit_per_minute"
            case callbackRateLimitPerMinute = "callback_rate_limit_per_minute"
            case tokenRateLimitPerMinute = "token_rate_limit_per_minute"
            case backChannelLogoutRateLimitPerMinute = "backchannel_logout_rate_limit_per_minute"
            case sharedSignalsRateLimitPerMinute = "shared_signals_rate_limit_per_minute"
            case rateLimitStore = "rate_limit_store"
            case ipv6PrefixLength = "ipv6_prefix_length"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            host = try c.value(.host, default: "127.0.0.1")
            port = try c.value(.port, default: 8080, in: 1...65535)
            publicBaseURL = try c.value(.publicBaseURL, default: "http://\(host.contains(":") ? "[\(host)]" : host):\(port)")
            trustedProxies = try c.value(.trustedProxies, default: [])
            threads = try c.valueIfPresent(.threads, in: 1...1024, note: "a thread each; more loops than CPUs only add switches")
            connectionLimit = try c.value(.connectionLimit, default: 4096, in: 1...)
            maxConnectionsPerIP = try c.value(.maxConnectionsPerIP, default: 256, in: 0..., zero: "no limit")
            minBodyBytesPerSecond = try c.value(.minBodyBytesPerSecond, default: 1024, in: 0..., zero: "no minimum")
            connectionTimeoutSeconds = try c.value(.connectionTimeoutSeconds, default: 15, in: 1...)
            requestHeadTimeoutSeconds = try c.value(
                .requestHeadTimeoutSeconds,
                default: 30,
                in: 0...Int.max,
                message: "must be 0 (no limit) or a number of seconds"
            )
            maxBodyBytes = try c.value(.maxBodyBytes, default: 1 << 20, in: 1...)
            requestTimeoutSeconds = try c.value(.requestTimeoutSeconds, default: 30, in: 1...)
            drainTimeoutSeconds = try c.value(.drainTimeoutSeconds, default: 10, in: 1...)
            loginRateLimitPerMinute = try c.value(.loginRateLimitPerMinute, default: 60, in: 0..., zero: "no limit")
            callbackRateLimitPerMinute = try c.value(.callbackRateLimitPerMinute, default: 60, in: 0..., zero: "no limit")
            tokenRateLimitPerMinute = try c.value(.tokenRateLimitPerMinute, default: 120, in: 0..., zero: "no limit")
            backChannelLogoutRateLimitPerMinute = try c.value(
                .backChannelLogoutRateLimitPerMinute,
                default: 600,
                in: 0...,
                zero: "no limit"
            )
            sharedSignalsRateLimitPerMinute = try c.value(.sharedSignalsRateLimitPerMinute, default: 600, in: 0..., zero: "no limit")
            rateLimitStore = try c.value(.rateLimitStore, default: .database)
            ipv6PrefixLength = try c.value(
                .ipv6PrefixLength,
                default: 64,
                in: 32...128,
                note: "the bits of an IPv6 address that make one client"
            )
        }
    }
}

extension TokenGateConfiguration {
    /// The admin listener (docs/operations.md, "The admin listener"): a second HTTP listener,
    /// always on, serving what the monitoring system reads and the public must not (`/metrics`, the
    /// readiness detail). Loopback by default; in a container it must be reachable by the scraper,
    /// so it binds the pod's address and a network policy keeps it private.
    public struct Admin: Sendable, Codable {
        /// IPv4 or IPv6 address literal to bind (default `127.0.0.1`).
        public var host: String
        /// TCP port (default 9090); 0 picks a free one (tests read it back).
        public var port: Int

        enum CodingKeys: String, CodingKey, CaseIterable {
            case host, port
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            host = try c.value(.host, default: "127.0.0.1")
            port = try c.value(.port, default: 9090, in: 0...65535, zero: "any free port")
        }
    }
}

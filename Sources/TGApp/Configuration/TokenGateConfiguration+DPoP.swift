extension TokenGateConfiguration {
    /// How DPoP proofs are checked (RFC 9449), for the apps with `clients[].dpop` on.
    public struct DPoP: Sendable, Codable {
        /// The `alg` values a proof may use.
        public var algorithms: [String]
        /// A proof's `iat` may be at most this old.
        public var proofMaxAgeSeconds: Int
        /// Every proof must carry a nonce TokenGate issued (`DPoP-Nonce`).
        public var requireNonce: Bool
        /// A nonce is issued anew this often and accepted for twice as long.
        public var nonceLifetimeSeconds: Int
        /// Proofs each instance remembers for its replay check; past it, new proofs are refused.
        public var replayCacheEntries: Int

        enum CodingKeys: String, CodingKey, CaseIterable {
            case algorithms
            case proofMaxAgeSeconds = "proof_max_age_seconds"
            case requireNonce = "require_nonce"
            case nonceLifetimeSeconds = "nonce_lifetime_seconds"
            case replayCacheEntries = "replay_cache_entries"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            algorithms = try c.value(.algorithms, default: ["ES256", "ES384", "EdDSA", "PS256", "RS256"])
            proofMaxAgeSeconds = try c.value(.proofMaxAgeSeconds, default: 60, in: 5...600)
            requireNonce = try c.value(.requireNonce, default: false)
            nonceLifetimeSeconds = try c.value(.nonceLifetimeSeconds, default: 300, in: 10...86400)
            replayCacheEntries = try c.value(.replayCacheEntries, default: 1_000_000, in: 1000...100_000_000)
        }
    }
}

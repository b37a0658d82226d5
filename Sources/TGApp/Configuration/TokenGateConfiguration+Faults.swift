extension TokenGateConfiguration {
    /// Who pays for a provider's faults (docs/proxy.md, "When the provider refuses the refresh"):
    /// the safety valve against a storm of rejections, and how long a rejected grant is kept.
    public struct Faults: Sendable, Codable {
        /// Distinct grants of one provider rejected within the window, with no success between,
        /// that make TokenGate believe the provider at fault instead (0: no valve).
        public var rejectionValveCount: Int
        public var rejectionValveWindowSeconds: Int
        /// A rejected grant's account is kept (stale, sessions suspended) this long before the
        /// sweeper removes it and revokes the grant.
        public var rejectedGrantGraceSeconds: Int
        /// How long a provider's client, seen accepted by an authenticated check, is believed so.
        public var clientCheckSeconds: Int

        enum CodingKeys: String, CodingKey, CaseIterable {
            case rejectionValveCount = "rejection_valve_count"
            case rejectionValveWindowSeconds = "rejection_valve_window_seconds"
            case rejectedGrantGraceSeconds = "rejected_grant_grace_seconds"
            case clientCheckSeconds = "client_check_seconds"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            rejectionValveCount = try c.value(.rejectionValveCount, default: 20, in: 0...100_000, zero: "off")
            rejectionValveWindowSeconds = try c.value(.rejectionValveWindowSeconds, default: 60, in: 1...3600)
            rejectedGrantGraceSeconds = try c.value(.rejectedGrantGraceSeconds, default: 86400, in: 0...(30 * 86400), note: "30 days")
            clientCheckSeconds = try c.value(.clientCheckSeconds, default: 60, in: 0...3600)
        }
    }
}

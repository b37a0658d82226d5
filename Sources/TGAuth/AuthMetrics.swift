public import CoreMetrics
import TGStore

/// What the domain counts (docs/operations.md, "Metrics"), through swift-metrics: the app gives the factory
/// (Prometheus in `serve`), tools and tests may leave it a no-op. Every label set is bounded:
/// provider names come from the configuration, outcomes and kinds from the lists below.
public struct AuthMetrics: Sendable {
    let factory: any MetricsFactory

    public init(factory: any MetricsFactory = NOOPMetricsHandler.instance) {
        self.factory = factory
    }

    /// How a refresh at the provider ended: `ok`, or the error's class (`fatal`: the grant is
    /// gone; `transient`: try again later; `failed`: an answer TokenGate could not use).
    func refreshed(provider: String, outcome: String) {
        Counter(label: "tokengate_upstream_refreshes_total", dimensions: [("provider", provider), ("outcome", outcome)], factory: factory)
            .increment()
    }

    /// An instance marked a provider failing as a whole (each failed attempt while it is):
    /// `client` (it refuses TokenGate's client) or `rejections` (the safety valve).
    func providerFault(_ provider: String, kind: ProviderFault.Kind) {
        Counter(label: "tokengate_provider_faults_total", dimensions: [("provider", provider), ("kind", kind.rawValue)], factory: factory)
            .increment()
        providerFailing(provider, true)
    }

    /// 1 while this instance last saw the provider failing as a whole, 0 once it answered again.
    func providerFailing(_ provider: String, _ failing: Bool) {
        Gauge(label: "tokengate_provider_failing", dimensions: [("provider", provider)], factory: factory).record(failing ? 1 : 0)
    }

    /// A caller that found a refresh for its account and scopes already running and waited for it.
    func joinedRefresh(provider: String) {
        Counter(label: "tokengate_upstream_refresh_waits_total", dimensions: [("provider", provider)], factory: factory).increment()
    }

    /// A transfer code's fate: `issued`, `redeemed`, `interaction_required` (redeemed, nothing
    /// restorable), `refused` (unknown, expired, wrong verifier or app), `replayed` (a redeemed
    /// code came back with its verifier within the replay grace: the same answer again) or `reused`
    /// (it came back after the grace: a security event).
    func transfer(_ outcome: String) {
        Counter(label: "tokengate_transfer_codes_total", dimensions: [("outcome", outcome)], factory: factory).increment()
    }

    /// A back-channel logout token, by outcome: `ended` (sessions or an account ended),
    /// `no_match` (valid, but nothing of it was signed in), `invalid`, `replayed` (its `jti` was
    /// used before), `unavailable` (the provider's keys could not be fetched).
    func backChannelLogout(provider: String, outcome: String) {
        Counter(label: "tokengate_backchannel_logouts_total", dimensions: [("provider", provider), ("outcome", outcome)], factory: factory)
            .increment()
    }

    /// A security event token a provider pushed, by outcome: `accepted`, `invalid`, `duplicate`
    /// (its `jti` was acted on before: acknowledged, not acted on again), `unauthenticated`,
    /// `unavailable` (the provider's keys could not be fetched).
    func securityEventToken(provider: String, outcome: String) {
        Counter(label: "tokengate_security_event_tokens_total", dimensions: [("provider", provider), ("outcome", outcome)], factory: factory)
            .increment()
    }

    /// An event of an accepted security event token, by type (``SecurityEventType/label`` or
    /// `unknown`) and outcome (``SecurityEventResult/events``).
    func securityEvent(provider: String, event: String, outcome: String) {
        Counter(
            label: "tokengate_security_events_total",
            dimensions: [("provider", provider), ("event", event), ("outcome", outcome)],
            factory: factory
        ).increment()
    }

    /// A DPoP proof accepted on this instance's memory alone: the shared record was unreachable.
    func dpopProofCheckedInMemoryOnly() {
        Counter(label: "tokengate_dpop_proofs_unshared_total", factory: factory).increment()
    }

    /// Rows a sweep removed, by kind.
    func swept(_ report: SweepReport) {
        let kinds = [
            ("pending_logins", report.pendingLogins), ("handoff_codes", report.handoffCodes), ("sessions", report.sessions),
            ("revoked_refresh_tokens", report.revokedRefreshTokens), ("accounts", report.accounts), ("devices", report.devices),
            ("upstream_revocations", report.upstreamRevocations), ("transfer_codes", report.transferCodes),
            ("logout_token_ids", report.logoutTokenIDs), ("rate_limit_buckets", report.rateLimitBuckets),
            ("dpop_proofs", report.dpopProofs), ("security_event_token_ids", report.securityEventTokenIDs),
        ]
        for (kind, count) in kinds {
            Counter(label: "tokengate_sweeper_removed_total", dimensions: [("kind", kind)], factory: factory).increment(by: count)
        }
        Counter(label: "tokengate_sweeps_total", factory: factory).increment()
    }
}

import Foundation
public import Logging
public import TGBase
public import TGOIDC
public import TGStore

/// The mobile auth flow over PostgreSQL: logins, handoff codes, devices, sessions, accounts and
/// their upstream grants. One per process, shared by all requests; every method is safe to call
/// from any number of requests and instances at once (the database arbitrates).
public final class AuthService: Sendable {
    /// Persistence, one store per aggregate (`TGStore`): the domain never sees SQL.
    public let store: Store
    public let vault: TokenVault
    public let providers: [String: OpenIDProvider]
    public let clients: [String: AppClient]
    public let settings: AuthSettings
    public let clock: WallClock
    public let logger: Logger
    /// TokenGate's own issuer identifier (its public base URL), sent as `iss` to the app.
    public let issuer: String
    /// The APIs whose tokens apps may ask for, by name (`resource=` of a token exchange).
    public let resources: [String: UpstreamResource]
    /// Sessions and upstream tokens this instance holds in memory.
    public let cache: CredentialCache
    let refreshes = SingleFlight<String, UpstreamAccessToken>()
    /// Grants this instance knows to be in their refresh backoff window.
    let refreshBackoff = BackoffWindows<UUID>()
    /// Providers this instance knows to be failing as a whole, until their next attempt.
    let providerBackoff = BackoffWindows<String>()
    /// When this instance last wrote a provider's success for the safety valve, and last saw
    /// its client accepted.
    let providerMarks = ProviderMarks()
    /// Upstream rotations this instance wrote lately, written again after a failover.
    let recentRotations = RecentRotations()
    /// Refresh outcomes, single-flight waits, sweeps.
    public let metrics: AuthMetrics
    /// Checks the DPoP proofs of apps whose tokens are key-bound (RFC 9449).
    public let dpop: DPoPVerifier
    /// The shared record of DPoP proofs, by group commit (``recordProof(_:)``).
    let proofRecords: GroupCommit<PendingProof, Bool>

    public init(
        store: Store,
        vault: TokenVault,
        providers: [OpenIDProvider],
        clients: [AppClient],
        settings: AuthSettings = AuthSettings(),
        issuer: String,
        resources: [UpstreamResource] = [],
        cache: CredentialCache = CredentialCache(),
        clock: WallClock = .system,
        metrics: AuthMetrics = AuthMetrics(),
        logger: Logger
    ) {
        self.store = store
        self.vault = vault
        self.providers = Dictionary(providers.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.clients = Dictionary(clients.map { ($0.clientID, $0) }, uniquingKeysWith: { first, _ in first })
        self.settings = settings
        self.issuer = issuer
        self.resources = Dictionary(resources.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.cache = cache
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
        dpop = DPoPVerifier(settings: settings.dpop, vault: vault, clock: clock)
        proofRecords = Self.proofRecorder(store)
    }
}

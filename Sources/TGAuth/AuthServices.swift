import Foundation
public import Logging
public import TGBase
public import TGOIDC
public import TGStore

/// The mobile auth flow's pieces, one per flow, each built with only what it uses and wired to
/// the ones it calls. Made in one place (`TokenGateApp.makeAuthServices`, the tests' fixtures);
/// a caller keeps the piece it serves, never this whole set. Every piece is safe to call from any
/// number of requests and instances at once (the database arbitrates).
public struct AuthServices: Sendable {
    /// Sessions by access token, and the accounts of a device.
    public let sessions: Sessions
    /// `GET /auth/login` and the provider's callback, up to the handoff code.
    public let logins: LoginFlow
    /// The token endpoint's grants: handoff codes, refresh tokens, token exchange.
    public let grants: TokenGrants
    /// Moving a device's accounts to a new device.
    public let transfers: TransferCodes
    /// Logouts, the provider's landing route after its logout page, back-channel logout.
    public let logouts: Logouts
    /// Upstream access tokens and the sessions of API calls, from memory or refreshed.
    public let upstream: UpstreamTokens
    /// DPoP proofs (RFC 9449): checks, the replay record, the keys tokens are bound to.
    public let dpop: DPoPBinding
    /// Removing accounts and revoking their grants at the provider.
    public let revocations: RevocationQueue
    /// Clears everything stale.
    public let sweeper: Sweeper
    /// Re-encrypts secrets at rest under the current key.
    public let keyRotation: KeyRotation
    /// Sessions and upstream tokens this instance holds in memory (the metrics' gauges).
    public let cache: CredentialCache
    /// The clock every piece reads (the app's rate limits read it too).
    public let clock: WallClock

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
        let providers = Dictionary(providers.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let clients = Dictionary(clients.map { ($0.clientID, $0) }, uniquingKeysWith: { first, _ in first })
        let resources = Dictionary(resources.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.cache = cache
        self.clock = clock
        sessions = Sessions(store: store, clock: clock)
        dpop = DPoPBinding(settings: settings.dpop, vault: vault, store: store, clients: clients, issuer: issuer, clock: clock, metrics: metrics)
        revocations = RevocationQueue(
            store: store,
            vault: vault,
            providers: providers,
            cache: cache,
            settings: settings,
            clock: clock,
            logger: logger
        )
        upstream = UpstreamTokens(
            store: store,
            vault: vault,
            providers: providers,
            resources: resources,
            settings: settings,
            cache: cache,
            sessions: sessions,
            clock: clock,
            metrics: metrics,
            logger: logger
        )
        logins = LoginFlow(
            store: store,
            vault: vault,
            providers: providers,
            clients: clients,
            settings: settings,
            issuer: issuer,
            upstream: upstream,
            clock: clock,
            logger: logger
        )
        grants = TokenGrants(
            store: store,
            vault: vault,
            clients: clients,
            resources: resources,
            settings: settings,
            dpop: dpop,
            upstream: upstream,
            revocations: revocations,
            clock: clock,
            logger: logger
        )
        transfers = TransferCodes(
            store: store,
            vault: vault,
            clients: clients,
            settings: settings,
            dpop: dpop,
            revocations: revocations,
            clock: clock,
            metrics: metrics,
            logger: logger
        )
        logouts = Logouts(
            store: store,
            vault: vault,
            providers: providers,
            clients: clients,
            settings: settings,
            issuer: issuer,
            sessions: sessions,
            revocations: revocations,
            clock: clock,
            metrics: metrics,
            logger: logger
        )
        sweeper = Sweeper(store: store, settings: settings, revocations: revocations, clock: clock, metrics: metrics, logger: logger)
        keyRotation = KeyRotation(store: store, vault: vault, batchSize: settings.batchSize, logger: logger)
    }
}

import Foundation
public import Logging
public import TGAuth
public import TGBase
import TGCrypto
public import TGEventLoop
public import TGHTTPClient
import TGHTTPServer
public import TGOIDC
public import TGPostgres
public import TGProxy
import TGStore

/// Builds TokenGate from its configuration: what `tokengate serve` runs and what tests start.
public enum TokenGateApp {
    /// The database pool the configuration describes.
    public static func makeDatabase(_ configuration: TokenGateConfiguration) -> PostgresClient {
        var settings = PostgresClient.Configuration(url: configuration.database.url?.value ?? "")
        settings.maxConnections = configuration.database.poolSize
        settings.acquireTimeout = .seconds(configuration.database.acquireTimeoutSeconds)
        settings.statementTimeout = .seconds(configuration.database.statementTimeoutSeconds)
        return PostgresClient(configuration: settings)
    }

    /// The OIDC client of each configured provider, sharing `httpClient` (by default one that
    /// speaks plain http only to a loopback provider the configuration names, as the validator
    /// allows for development; https everywhere else). Throws only for a configuration that did
    /// not pass validation.
    public static func makeProviders(_ configuration: TokenGateConfiguration, httpClient: HTTPClient? = nil) throws -> [OpenIDProvider] {
        let callback = configuration.server.publicBaseURL.trimmingSuffix("/") + "/auth/callback"
        let client = httpClient ?? HTTPClient(configuration: providerClientSettings(configuration))
        return try configuration.providers.map {
            OpenIDProvider(configuration: try $0.oidcConfiguration(callbackURL: callback), httpClient: client)
        }
    }

    static func providerClientSettings(_ configuration: TokenGateConfiguration) -> HTTPClient.Configuration {
        var settings = HTTPClient.Configuration()
        let urls = configuration.providers.flatMap { provider in
            [provider.issuer, provider.authority ?? ""]
                + [provider.endpoints?.authorization, provider.endpoints?.token, provider.endpoints?.revocation].compactMap { $0 }
        }
        settings.allowPlainHTTPToLoopbackForTesting = urls.contains { url in
            guard let components = URLComponents(string: url), components.scheme?.lowercased() == "http" else { return false }
            return Loopback.isLoopback(host: components.host ?? "")
        }
        return settings
    }

    /// The auth flow's pieces over `database` and `providers`, with the configured keys, apps and
    /// lifetimes (``makeVault(_:)``).
    public static func makeAuthServices(
        _ configuration: TokenGateConfiguration,
        database: PostgresClient,
        providers: [OpenIDProvider],
        logger: Logger,
        clock: WallClock = .system,
        metrics: AuthMetrics = AuthMetrics()
    ) throws -> AuthServices {
        let sessions = configuration.sessions
        var settings = AuthSettings()
        settings.accessTokenTTL = TimeInterval(sessions.accessTokenTTLSeconds)
        settings.sessionIdleTTL = TimeInterval(sessions.refreshTokenIdleTTLSeconds)
        settings.sessionAbsoluteTTL = TimeInterval(sessions.refreshTokenAbsoluteTTLSeconds)
        settings.handoffCodeTTL = TimeInterval(sessions.handoffCodeTTLSeconds)
        settings.pendingLoginTTL = TimeInterval(sessions.pendingLoginTTLSeconds)
        settings.refreshReplayGrace = TimeInterval(sessions.refreshReplayGraceSeconds)
        settings.deviceIdleTTL = TimeInterval(sessions.deviceIdleTTLSeconds)
        settings.transferCodeTTL = TimeInterval(sessions.transferCodeTTLSeconds)
        settings.transferCodesPerDevice = sessions.transferCodesPerDevice
        settings.rejectionValveCount = configuration.faults.rejectionValveCount
        settings.rejectionValveWindow = TimeInterval(configuration.faults.rejectionValveWindowSeconds)
        settings.rejectedGrantGrace = TimeInterval(configuration.faults.rejectedGrantGraceSeconds)
        settings.clientCheckLifetime = TimeInterval(configuration.faults.clientCheckSeconds)
        settings.dpop.algorithms = configuration.dpop.algorithms.compactMap(JWSAlgorithm.init(rawValue:))
        settings.dpop.proofMaxAge = TimeInterval(configuration.dpop.proofMaxAgeSeconds)
        settings.dpop.requireNonce = configuration.dpop.requireNonce
        settings.dpop.nonceLifetime = TimeInterval(configuration.dpop.nonceLifetimeSeconds)
        settings.dpop.replayCapacity = configuration.dpop.replayCacheEntries
        return AuthServices(
            store: Store(database: database),
            vault: try makeVault(configuration),
            providers: providers,
            clients: configuration.clients.map {
                AppClient(
                    clientID: $0.clientID,
                    redirectURIs: $0.redirectURIs,
                    providers: $0.providers,
                    postLogoutRedirectURIs: $0.postLogoutRedirectURIs,
                    dpop: DPoPMode(rawValue: $0.dpop) ?? .off
                )
            },
            settings: settings,
            issuer: publicBaseURL(configuration),
            resources: configuration.upstreams.map {
                UpstreamResource(
                    name: $0.name,
                    provider: $0.provider,
                    scopes: $0.scopes,
                    allowsTokenExchange: $0.tokenExchange,
                    keepsStepUpApart: $0.stepUpTokens == "separate"
                )
            },
            cache: CredentialCache(capacity: sessions.memoryCacheEntries),
            clock: clock,
            metrics: metrics,
            logger: logger
        )
    }

    /// The configured encryption keys, the current one sealing. Without configured keys
    /// (possible only when no app is registered) a random key is used.
    public static func makeVault(_ configuration: TokenGateConfiguration) throws -> TokenVault {
        let encryption = configuration.encryption
        var keys: [String: SymmetricKey] = [:]
        for key in encryption.keys {
            guard let bytes = ConfigurationValidator.decodeKey(key.secret.value) else { throw CryptoError.invalidKey }
            keys[key.id] = try SymmetricKey(bytes: bytes)
        }
        let ring =
            keys.isEmpty
            ? try KeyRing(currentKeyID: "ephemeral", keys: ["ephemeral": .generate()])
            : try KeyRing(currentKeyID: encryption.currentKeyID ?? "", keys: keys)
        return TokenVault(keyRing: ring)
    }

    /// TokenGate's issuer identifier (``publicBaseURL(_:)``).
    public static func issuer(_ configuration: TokenGateConfiguration) -> String { publicBaseURL(configuration) }

    /// The public base URL without a trailing slash: TokenGate's issuer identifier.
    static func publicBaseURL(_ configuration: TokenGateConfiguration) -> String {
        configuration.server.publicBaseURL.trimmingSuffix("/")
    }

    /// The public port's routes, bound to their dependencies.
    public static func makeRouter(
        _ configuration: TokenGateConfiguration,
        database: PostgresClient,
        providers: [OpenIDProvider] = [],
        auth: AuthServices? = nil,
        metrics: TokenGateMetrics? = nil,
        loops: EventLoopGroup? = nil,
        streams: OpenStreams = OpenStreams()
    ) -> Router {
        var router = Router()
        // `/metrics` and the readiness detail are the admin listener's (makeAdminRouter).
        let readiness = readiness(database: database, providers: providers, metrics: metrics)
        HealthRoutes.add(to: &router, version: tokenGateVersion, readiness: readiness, detail: false)
        APIDescriptionRoute.add(to: &router)
        AuthorizationServerMetadata.add(to: &router, issuer: publicBaseURL(configuration), dpopAlgorithms: configuration.dpop.algorithms)
        if let auth {
            // Shared by every instance through PostgreSQL unless configured per instance (docs/scaling.md).
            let server = configuration.server
            let shared = server.rateLimitStore == .database ? Store(database: database).rateLimits : nil
            func limiter(_ scope: String, _ perMinute: Int) -> RateLimiter {
                RateLimiter(
                    scope: scope,
                    perMinute: perMinute,
                    store: shared,
                    metrics: metrics,
                    ipv6PrefixLength: server.ipv6PrefixLength,
                    now: auth.clock.now
                )
            }
            let limits = AuthRoutes.Limits(
                login: limiter("login", server.loginRateLimitPerMinute),
                callback: limiter("callback", server.callbackRateLimitPerMinute),
                token: limiter("token", server.tokenRateLimitPerMinute),
                transfer: limiter("transfer", server.tokenRateLimitPerMinute)
            )
            AuthRoutes.add(
                to: &router,
                sessions: auth.sessions,
                logins: auth.logins,
                grants: auth.grants,
                transfers: auth.transfers,
                logouts: auth.logouts,
                dpop: auth.dpop,
                limits: limits
            )
            BackChannelLogoutRoute.add(
                to: &router,
                logouts: auth.logouts,
                rateLimit: limiter("backchannel_logout", server.backChannelLogoutRateLimitPerMinute),
                requestTimeout: .seconds(configuration.server.requestTimeoutSeconds)
            )
            SharedSignalsRoute.add(
                to: &router,
                logouts: auth.logouts,
                rateLimit: limiter("shared_signals", server.sharedSignalsRateLimitPerMinute),
                requestTimeout: .seconds(configuration.server.requestTimeoutSeconds)
            )
            if !configuration.upstreams.isEmpty {
                ProxyRoutes.add(
                    to: &router,
                    upstreams: configuration.upstreams,
                    loops: loops?.loops ?? [],
                    upstreamTokens: auth.upstream,
                    dpop: auth.dpop,
                    publicBaseURL: publicBaseURL(configuration),
                    metrics: metrics,
                    streams: streams
                )
            }
        }
        return router
    }

    /// The HTTP server with every route, not yet started. Its event loops (`server.threads`) also
    /// run the proxy's clients, one per API and loop; they stop after the server's shutdown.
    /// Also the application it serves (which tests drive in-process, ``Application/respond(to:)``).
    static func makeServer(
        _ configuration: TokenGateConfiguration,
        database: PostgresClient,
        providers: [OpenIDProvider] = [],
        auth: AuthServices? = nil,
        metrics: TokenGateMetrics? = nil,
        streams: OpenStreams = OpenStreams(),
        logger: Logger
    ) -> (server: HTTPServer, application: Application) {
        var settings = serverSettings(configuration, logger: logger)
        let loops = EventLoopGroup(count: settings.threads)
        let router = makeRouter(
            configuration,
            database: database,
            providers: providers,
            auth: auth,
            metrics: metrics,
            loops: loops,
            streams: streams
        )
        // The body limits and deadlines routes declared (an API's), read as each request's head arrives.
        let limits = router.limitsTable
        settings.limits = { method, path in limits.limits(method, path: path) }
        let application = Application(
            router: router,
            logger: logger,
            accessLog: configuration.log.accessLog,
            accessLines: bufferedAccessLog(configuration.log, logger: logger),
            trustedProxies: TrustedProxies(configuration.server.trustedProxies),
            metrics: metrics
        )
        let server = HTTPServer(configuration: settings, loops: loops, stopsLoops: true, handler: application.makeHandler())
        return (server, application)
    }

    static func serverSettings(_ configuration: TokenGateConfiguration, logger: Logger) -> HTTPServer.Configuration {
        var settings = HTTPServer.Configuration()
        let server = configuration.server
        settings.host = server.host
        settings.port = UInt16(clamping: server.port)
        settings.threads = eventLoopCount(configuration, cpus: .current())
        settings.connectionLimit = server.connectionLimit
        settings.perIPConnectionLimit = server.maxConnectionsPerIP
        settings.perIPConnectionIPv6PrefixLength = server.ipv6PrefixLength
        let trusted = TrustedProxies(server.trustedProxies)
        if !trusted.isEmpty { settings.perIPConnectionLimitExempt = { trusted.isTrusted($0) } }
        settings.minBodyRate = server.minBodyBytesPerSecond > 0 ? (server.minBodyBytesPerSecond, .seconds(10)) : nil
        settings.connectionTimeoutSeconds = server.connectionTimeoutSeconds
        settings.requestHeadTimeout = server.requestHeadTimeoutSeconds > 0 ? .seconds(server.requestHeadTimeoutSeconds) : nil
        settings.maxBodySize = server.maxBodyBytes
        settings.requestTimeout = .seconds(server.requestTimeoutSeconds)
        settings.drainTimeout = .seconds(server.drainTimeoutSeconds)
        // Only a gateway with a WebSocket API lets connections switch protocols.
        settings.allowsUpgrade = configuration.upstreams.contains { $0.websocket }
        settings.diagnosticsSink = { message in logger.debug("libmicrohttpd", metadata: ["detail": .string(message)]) }
        return settings
    }

    /// The access log buffered per loop as configured (`log.access_log_buffer_bytes`, `…_flush_seconds`),
    /// its flushing thread started; nil when unbuffered, off, or the logger does not print JSON lines.
    /// The server's owner stops it after the server drained (``ServerService``).
    static func bufferedAccessLog(_ log: TokenGateConfiguration.Log, logger: Logger) -> AccessLog? {
        guard log.accessLog, log.accessLogBufferBytes > 0, logger.logLevel <= .info,
            let json = logger.handler as? JSONLogHandler
        else { return nil }
        let settings = AccessLog.Settings(bufferSize: log.accessLogBufferBytes, flushInterval: .seconds(log.accessLogFlushSeconds))
        let accessLog = AccessLog(label: json.label, sink: json.sink, settings: settings)
        accessLog.start()
        return accessLog
    }

    /// A logger writing JSON lines at the configured level.
    public static func makeLogger(_ configuration: TokenGateConfiguration, sink: any LogSink = FileDescriptorLogSink()) -> Logger {
        let level = Logger.Level(rawValue: configuration.log.level) ?? .info
        return Logger(label: "tokengate") { label in JSONLogHandler(label: label, level: level, sink: sink) }
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

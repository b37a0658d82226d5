public import Logging
public import TGAuth
public import TGBase
public import TGHTTPServer
public import TGOIDC
public import TGPostgres
public import TGProxy

extension TokenGateApp {
    /// What one `serve` instance runs, wired together: the auth flow, one HTTP client per API,
    /// the public server and the admin listener (not started), sharing one metrics registry.
    public struct Assembly: Sendable {
        public let auth: AuthServices
        public let server: HTTPServer
        /// What ``server`` serves; tests also answer requests with it in-process
        /// (``Application/respond(to:)``).
        public let application: Application
        /// The admin listener: `/metrics`, `/readyz` with each check named, `/healthz`.
        public let admin: HTTPServer
        public let adminApplication: Application
        /// The readiness checks (``DependencyMonitor`` runs them between probes).
        public let readiness: HealthRoutes.Readiness
        public let metrics: TokenGateMetrics
        /// The proxy's streamed answers open now, by session (``StreamSessionWatcher`` ends them
        /// with their session).
        public let streams: OpenStreams
    }

    public static func assemble(
        _ configuration: TokenGateConfiguration,
        database: PostgresClient,
        providers: [OpenIDProvider],
        logger: Logger,
        clock: WallClock = .system
    ) throws -> Assembly {
        let metrics = TokenGateMetrics()
        let auth = try makeAuthServices(configuration, database: database, providers: providers, logger: logger, clock: clock, metrics: metrics.auth)
        let streams = OpenStreams()
        let (server, application) = makeServer(
            configuration,
            database: database,
            providers: providers,
            auth: auth,
            metrics: metrics,
            streams: streams,
            logger: logger
        )
        let (admin, adminApplication) = makeAdminServer(
            configuration,
            database: database,
            providers: providers,
            auth: auth,
            metrics: metrics,
            streams: streams,
            logger: logger
        )
        return Assembly(
            auth: auth,
            server: server,
            application: application,
            admin: admin,
            adminApplication: adminApplication,
            readiness: readiness(database: database, providers: providers, metrics: metrics),
            metrics: metrics,
            streams: streams
        )
    }
}

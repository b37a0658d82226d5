import Logging
public import TGAuth
import TGHTTPServer
public import TGOIDC
public import TGPostgres
public import TGProxy

/// The admin listener (docs/operations.md, "The admin listener"): a second, small HTTP server on
/// `admin.host`:`admin.port` for the monitoring system — `GET /metrics`, `GET /readyz` naming each
/// check, `GET /healthz`. The public port keeps `/healthz` and a `/readyz` that says only ready or
/// not, for orchestrators and load balancers.
extension TokenGateApp {
    /// The readiness checks of both listeners' `/readyz` and of ``DependencyMonitor``: the
    /// database answers a query, and every provider's metadata loaded (cached: once loaded, a
    /// check costs no request). Each run sets `tokengate_dependency_up` when `metrics` is given.
    static func readiness(database: PostgresClient, providers: [OpenIDProvider], metrics: TokenGateMetrics?) -> HealthRoutes.Readiness {
        var checks = [
            HealthRoutes.Check(name: "database") {
                (try? await database.query("SELECT 1 AS ok").first?.decode(Int.self, "ok")) == 1
            }
        ]
        for provider in providers {
            checks.append(HealthRoutes.Check(name: "provider:\(provider.name)") { (try? await provider.metadata()) != nil })
        }
        guard let metrics else { return HealthRoutes.Readiness(checks: checks) }
        return HealthRoutes.Readiness(checks: checks) { name, up in metrics.recordDependency(name, up: up) }
    }

    /// The admin listener's routes: `/metrics` (with `metrics`), `/readyz` with the result of each
    /// check, `/healthz`.
    public static func makeAdminRouter(
        database: PostgresClient,
        providers: [OpenIDProvider] = [],
        auth: AuthServices? = nil,
        metrics: TokenGateMetrics? = nil,
        streams: OpenStreams? = nil
    ) -> Router {
        var router = Router()
        metrics?.addRoute(to: &router, database: database, cache: auth?.cache, streams: streams)
        let readiness = readiness(database: database, providers: providers, metrics: metrics)
        HealthRoutes.add(to: &router, version: tokenGateVersion, readiness: readiness, detail: true)
        return router
    }

    /// The admin listener, not started, and the application it serves. Cheap: one event loop of
    /// its own (so it stops independently of the public server's loops), few connections, no
    /// request bodies. Its requests are neither counted in the request metrics nor access-logged:
    /// scrapes and probes every few seconds would drown the public traffic.
    static func makeAdminServer(
        _ configuration: TokenGateConfiguration,
        database: PostgresClient,
        providers: [OpenIDProvider],
        auth: AuthServices?,
        metrics: TokenGateMetrics?,
        streams: OpenStreams? = nil,
        logger: Logger
    ) -> (server: HTTPServer, application: Application) {
        let router = makeAdminRouter(database: database, providers: providers, auth: auth, metrics: metrics, streams: streams)
        let application = Application(router: router, logger: logger, accessLog: false)
        let server = HTTPServer(configuration: adminSettings(configuration, logger: logger), handler: application.makeHandler())
        return (server, application)
    }

    static func adminSettings(_ configuration: TokenGateConfiguration, logger: Logger) -> HTTPServer.Configuration {
        var settings = HTTPServer.Configuration()
        let server = configuration.server
        settings.host = configuration.admin.host
        settings.port = UInt16(clamping: configuration.admin.port)
        settings.threads = 1
        // Prometheus, an operator's curl, perhaps a sidecar: a handful of clients.
        settings.connectionLimit = 64
        settings.perIPConnectionLimit = 0
        settings.minBodyRate = server.minBodyBytesPerSecond > 0 ? (server.minBodyBytesPerSecond, .seconds(10)) : nil
        settings.connectionTimeoutSeconds = server.connectionTimeoutSeconds
        settings.requestHeadTimeout = server.requestHeadTimeoutSeconds > 0 ? .seconds(server.requestHeadTimeoutSeconds) : nil
        // Its routes take no body.
        settings.maxBodySize = 4096
        settings.requestTimeout = .seconds(server.requestTimeoutSeconds)
        // It stops after the public server drained (Gateway): what is left is a scrape or a probe.
        settings.drainTimeout = .seconds(min(2, server.drainTimeoutSeconds))
        settings.diagnosticsSink = { message in logger.debug("libmicrohttpd", metadata: ["listener": "admin", "detail": .string(message)]) }
        return settings
    }
}

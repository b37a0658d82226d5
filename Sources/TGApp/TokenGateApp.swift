public import Logging
public import TGHTTPClient
public import TGHTTPServer
public import TGOIDC
public import TGPostgres

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

    /// The OIDC client of each configured provider, sharing `httpClient`. Throws only for a
    /// configuration that did not pass validation.
    public static func makeProviders(_ configuration: TokenGateConfiguration, httpClient: HTTPClient = HTTPClient()) throws -> [OpenIDProvider] {
        let callback = configuration.server.publicBaseURL.trimmingSuffix("/") + "/auth/callback"
        return try configuration.providers.map {
            OpenIDProvider(configuration: try $0.oidcConfiguration(callbackURL: callback), httpClient: httpClient)
        }
    }

    /// The routes, bound to their dependencies.
    public static func makeRouter(
        _ configuration: TokenGateConfiguration,
        database: PostgresClient,
        providers: [OpenIDProvider] = []
    ) -> Router {
        var router = Router()
        var checks = [
            HealthRoutes.Check(name: "database") {
                (try? await database.query("SELECT 1 AS ok").first?.decode(Int.self, "ok")) == 1
            }
        ]
        // Ready only when every provider's metadata loaded (cached: a probe costs no request).
        for provider in providers {
            checks.append(HealthRoutes.Check(name: "provider:\(provider.name)") { (try? await provider.metadata()) != nil })
        }
        HealthRoutes.add(to: &router, version: tokenGateVersion, checks: checks)
        APIDescriptionRoute.add(to: &router)
        return router
    }

    /// The HTTP server with every route, not yet started.
    public static func makeServer(
        _ configuration: TokenGateConfiguration,
        database: PostgresClient,
        providers: [OpenIDProvider] = [],
        logger: Logger
    ) -> HTTPServer {
        let application = Application(
            router: makeRouter(configuration, database: database, providers: providers),
            logger: logger,
            accessLog: configuration.log.accessLog
        )
        return HTTPServer(configuration: serverSettings(configuration, logger: logger), handler: application.makeHandler())
    }

    static func serverSettings(_ configuration: TokenGateConfiguration, logger: Logger) -> HTTPServer.Configuration {
        var settings = HTTPServer.Configuration()
        let server = configuration.server
        settings.host = server.host
        settings.port = UInt16(clamping: server.port)
        if let threads = server.threads { settings.threads = threads }
        settings.connectionLimit = server.connectionLimit
        settings.connectionTimeoutSeconds = server.connectionTimeoutSeconds
        settings.requestHeadTimeout = server.requestHeadTimeoutSeconds > 0 ? .seconds(server.requestHeadTimeoutSeconds) : nil
        settings.maxBodySize = server.maxBodyBytes
        settings.requestTimeout = .seconds(server.requestTimeoutSeconds)
        settings.drainTimeout = .seconds(server.drainTimeoutSeconds)
        settings.diagnosticsSink = { message in logger.debug("libmicrohttpd", metadata: ["detail": .string(message)]) }
        return settings
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

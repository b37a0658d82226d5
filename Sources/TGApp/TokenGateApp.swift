public import Logging
public import TGHTTPServer
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

    /// The routes, bound to their dependencies.
    public static func makeRouter(_ configuration: TokenGateConfiguration, database: PostgresClient) -> Router {
        var router = Router()
        let readiness = HealthRoutes.Check(name: "database") {
            (try? await database.query("SELECT 1 AS ok").first?.decode(Int.self, "ok")) == 1
        }
        HealthRoutes.add(to: &router, version: tokenGateVersion, checks: [readiness])
        APIDescriptionRoute.add(to: &router)
        return router
    }

    /// The HTTP server with every route, not yet started.
    public static func makeServer(_ configuration: TokenGateConfiguration, database: PostgresClient, logger: Logger) -> HTTPServer {
        let application = Application(
            router: makeRouter(configuration, database: database),
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

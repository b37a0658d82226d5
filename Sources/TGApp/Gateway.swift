import Foundation
public import Logging
import ServiceLifecycle
import TGAuth
public import TGBase
import TGHTTPClient
import TGHTTPServer
public import TGOIDC
public import TGPostgres
import TGStore
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// One running TokenGate, started and stopped in one place for `serve` and for the test harness
/// alike: the schema check, the assembly (key ring, providers, routes, event loops, server), then
/// its parts as one swift-service-lifecycle group — the HTTP server, the sweeper (which also
/// drains the revocation queue), the cache-invalidation follower and, for `serve`, the signal
/// handler. A graceful shutdown (SIGTERM, SIGINT, or ``shutdown()``) stops them in reverse order:
/// the server drains first, then the workers stop.
public struct Gateway: Sendable {
    public let assembly: TokenGateApp.Assembly
    private let group: ServiceGroup

    /// The schema is not the one this binary was built for.
    public struct SchemaMismatch: Error, CustomStringConvertible {
        public let current: Int
        public let pending: Int
        public let databaseIsNewer: Bool

        public var description: String {
            databaseIsNewer
                ? "the database schema (version \(current)) is newer than this binary: deploy the newer binary"
                : "the database schema lacks \(pending) migration(s): run `tokengate migrate`"
        }
    }

    /// Checks the schema, assembles everything and binds the listening socket (so a port in use
    /// fails here, before anything runs). Nothing is served until ``run()``.
    /// `handlesSignals`: SIGTERM and SIGINT shut it down gracefully (`serve`); tests leave them.
    public static func start(
        _ configuration: TokenGateConfiguration,
        database: PostgresClient,
        providers: [OpenIDProvider],
        logger: Logger,
        clock: WallClock = .system,
        handlesSignals: Bool
    ) async throws -> Gateway {
        let status = try await Migrator(migrations: SchemaMigrations.all).status(database)
        guard !status.databaseIsNewer, status.pending.isEmpty else {
            throw SchemaMismatch(current: status.current, pending: status.pending.count, databaseIsNewer: status.databaseIsNewer)
        }
        let assembly = try TokenGateApp.assemble(configuration, database: database, providers: providers, logger: logger, clock: clock)
        try assembly.server.start()
        logger.info(
            "listening",
            metadata: ["host": .string(assembly.server.configuration.host), "port": .stringConvertible(assembly.server.port)]
        )
        var services: [any Service] = [
            InvalidationFollower(auth: assembly.auth, databaseURL: configuration.database.url?.value ?? ""),
            Sweeper(auth: assembly.auth, interval: .seconds(configuration.sweeper.intervalSeconds), logger: logger),
            ServerService(assembly: assembly, logger: logger),
        ]
        var configurations = services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) }
        if handlesSignals {
            let handler = SignalHandler(assembly: assembly, logger: logger)
            services.append(handler)
            configurations.append(.init(service: handler, successTerminationBehavior: .gracefullyShutdownGroup))
        }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: configurations, logger: logger))
        return Gateway(assembly: assembly, group: group)
    }

    /// Runs until a graceful shutdown has stopped every part.
    public func run() async throws {
        try await group.run()
    }

    /// Starts a graceful shutdown (what SIGTERM does); ``run()`` returns when it is over.
    public func shutdown() async {
        await group.triggerGracefulShutdown()
    }
}

/// The HTTP server (started by ``Gateway/start``): on graceful shutdown it stops accepting,
/// drains in-flight requests, then closes the APIs' clients.
struct ServerService: Service {
    let assembly: TokenGateApp.Assembly
    let logger: Logger

    func run() async throws {
        // Cancelled instead (the group failed): drain all the same.
        try? await gracefulShutdown()
        await assembly.server.shutdown()
        for client in assembly.upstreamClients.values { client.shutdown() }
        logger.info("stopped")
    }
}

/// The sweeper: every instance tries on each interval, one at a time does the work (an advisory
/// lock); each run also retries the revocation queue.
struct Sweeper: Service {
    let auth: AuthService
    let interval: Duration
    let logger: Logger

    func run() async throws {
        let (auth, interval, logger) = (auth, interval, logger)
        try? await cancelWhenGracefulShutdown {
            while true {
                try await Task.sleep(for: interval)
                do {
                    _ = try await auth.sweep()
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    logger.warning("sweep failed; the next one retries", metadata: ["error_type": "\(type(of: error))"])
                }
            }
        }
    }
}

/// What this instance caches follows every instance's changes (LISTEN/NOTIFY).
struct InvalidationFollower: Service {
    let auth: AuthService
    let databaseURL: String

    func run() async throws {
        let (auth, databaseURL) = (auth, databaseURL)
        await cancelWhenGracefulShutdown { await auth.followInvalidations(databaseURL: databaseURL) }
    }
}

/// `serve`'s SIGTERM and SIGINT: the first one logs which it was and ends this service, which
/// shuts the group down gracefully.
struct SignalHandler: Service {
    let assembly: TokenGateApp.Assembly
    let logger: Logger

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let caught = await cancelWhenGracefulShutdown { () async -> UnixSignal? in
            for await signal in signals { return signal }
            return nil
        }
        guard let caught else { return }
        logger.info(
            "shutting down",
            metadata: ["signal": .string("\(caught)"), "in_flight": .stringConvertible(assembly.server.requestsInFlight)]
        )
    }
}

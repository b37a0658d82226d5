import Foundation
public import Logging
import ServiceLifecycle
import TGAuth
public import TGBase
import TGHTTPClient
import TGHTTPServer
public import TGOIDC
public import TGPostgres
import TGProxy
import TGStore
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// One running TokenGate, started and stopped in one place for `serve` and for the test harness
/// alike: the schema check, the assembly (key ring, providers, routes, event loops, the public
/// server and the admin listener), then its parts as one swift-service-lifecycle group — the
/// public HTTP server, the admin listener, the dependency monitor, the sweeper (which also drains
/// the revocation queue), the cache-invalidation follower, the watcher that ends proxied streams
/// with their sessions (``StreamSessionWatcher``) and, for `serve`, the signal handler. A
/// graceful shutdown (SIGTERM, SIGINT, or ``shutdown()``) stops them in reverse order: the public
/// server drains first, then the admin listener stops (metrics and the readiness detail stay
/// readable during the drain), then the workers.
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

    /// A listener could not bind its address: the port is in use, the address is not this host's,
    /// or binding it needs privileges.
    public struct ListenerUnavailable: Error, CustomStringConvertible {
        /// `server` (the public port) or `admin` (the admin listener): the configuration section.
        public let section: String
        public let host: String
        public let port: Int
        /// Why, as the system said it (`Address already in use`).
        public let reason: String

        public var description: String {
            let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            let what = section == "admin" ? "the admin listener" : "the public port"
            return "cannot listen on \(address) for \(what) (\(section).host, \(section).port): \(reason)"
        }
    }

    /// Checks the schema, assembles everything and binds both listening sockets, the public one
    /// then the admin one (so a port in use fails here, before anything runs, with
    /// ``ListenerUnavailable``). Nothing is served until ``run()``.
    /// `handlesSignals`: SIGTERM and SIGINT shut it down gracefully (`serve`); tests leave them.
    public static func start(
        _ configuration: TokenGateConfiguration,
        database: PostgresClient,
        providers: [OpenIDProvider],
        logger: Logger,
        clock: WallClock = .system,
        handlesSignals: Bool
    ) async throws -> Gateway {
        let status = try await SchemaMigrations.status(database)
        guard !status.databaseIsNewer, status.pending.isEmpty else {
            throw SchemaMismatch(current: status.current, pending: status.pending.count, databaseIsNewer: status.databaseIsNewer)
        }
        let assembly = try TokenGateApp.assemble(configuration, database: database, providers: providers, logger: logger, clock: clock)
        // Trapped before the first request can arrive: a SIGTERM that comes before the group runs
        // waits in the sequence and still drains, instead of ending the process unhandled.
        let signals = handlesSignals ? await UnixSignalsSequence(trapping: .sigterm, .sigint) : nil
        try listen(assembly.server, section: "server")
        do {
            try listen(assembly.admin, section: "admin")
        } catch {
            // Nothing runs yet: close the public port again, and what runs on its loops.
            await assembly.server.shutdown()
            assembly.application.accessLines?.stop()
            throw error
        }
        logger.info(
            "listening",
            metadata: [
                "host": .string(assembly.server.configuration.host), "port": .stringConvertible(assembly.server.port),
                "admin_host": .string(assembly.admin.configuration.host), "admin_port": .stringConvertible(assembly.admin.port),
            ]
        )
        // Stopped in reverse: the public server drains, then the admin listener stops.
        var services: [any Service] = [
            StreamSessionWatcher(
                streams: assembly.streams,
                sessions: assembly.auth.sessions,
                clock: assembly.auth.clock,
                databaseURL: configuration.database.url?.value ?? "",
                logger: logger,
                metrics: assembly.metrics
            ),
            InvalidationFollower(upstream: assembly.auth.upstream, databaseURL: configuration.database.url?.value ?? ""),
            SweeperService(sweeper: assembly.auth.sweeper, interval: .seconds(configuration.sweeper.intervalSeconds), logger: logger),
            DependencyMonitor(readiness: assembly.readiness),
            AdminListenerService(admin: assembly.admin),
            ServerService(assembly: assembly, logger: logger),
        ]
        var configurations = services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) }
        if let signals {
            let handler = SignalHandler(assembly: assembly, signals: signals, logger: logger)
            services.append(handler)
            configurations.append(.init(service: handler, successTerminationBehavior: .gracefullyShutdownGroup))
        }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: configurations, logger: logger))
        return Gateway(assembly: assembly, group: group)
    }

    private static func listen(_ server: HTTPServer, section: String) throws {
        do {
            try server.start()
        } catch let error as HTTPServerError {
            let reason = error.errno.map { String(cString: strerror($0)) } ?? error.description
            throw ListenerUnavailable(section: section, host: server.configuration.host, port: Int(server.configuration.port), reason: reason)
        }
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
        // Event streams and WebSockets never end by themselves: they end cleanly now (their apps
        // reconnect elsewhere) rather than hold the drain until it cuts them.
        assembly.streams.endForShutdown()
        await assembly.server.shutdown()
        // Drained: every request's line is in a buffer; write them all.
        assembly.application.accessLines?.stop()
        logger.info("stopped")
    }
}

/// The admin listener (started by ``Gateway/start``): stops after the public server drained.
struct AdminListenerService: Service {
    let admin: HTTPServer

    func run() async throws {
        try? await gracefulShutdown()
        await admin.shutdown()
    }
}

/// Runs the readiness checks every `interval` (first at once), so `tokengate_dependency_up`
/// stays current when nothing probes `/readyz`: one `SELECT 1` per interval, and the providers'
/// cached metadata (a provider whose metadata has not loaded yet is asked again).
struct DependencyMonitor: Service {
    static let interval: Duration = .seconds(15)
    let readiness: HealthRoutes.Readiness

    func run() async throws {
        let readiness = readiness
        try? await cancelWhenGracefulShutdown {
            while true {
                _ = await readiness.run()
                try await Task.sleep(for: Self.interval)
            }
        }
    }
}

/// The sweeper: every instance tries on each interval, one at a time does the work (an advisory
/// lock); each run also retries the revocation queue.
struct SweeperService: Service {
    let sweeper: Sweeper
    let interval: Duration
    let logger: Logger

    func run() async throws {
        let (sweeper, interval, logger) = (sweeper, interval, logger)
        try? await cancelWhenGracefulShutdown {
            while true {
                try await Task.sleep(for: interval)
                do {
                    _ = try await sweeper.sweep()
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
    let upstream: UpstreamTokens
    let databaseURL: String

    func run() async throws {
        let (upstream, databaseURL) = (upstream, databaseURL)
        await cancelWhenGracefulShutdown { await upstream.followInvalidations(databaseURL: databaseURL) }
    }
}

/// `serve`'s SIGTERM and SIGINT: the first one logs which it was and ends this service, which
/// shuts the group down gracefully.
struct SignalHandler: Service {
    let assembly: TokenGateApp.Assembly
    /// Trapping since ``Gateway/start``, before the server listened.
    let signals: UnixSignalsSequence
    let logger: Logger

    func run() async throws {
        let signals = signals
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

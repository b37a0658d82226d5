import ArgumentParser
import Foundation
import Logging
import TGApp
import TGAuth
import TGHTTPClient
import TGPostgres
import TGStore

/// `tokengate`: the command line. Exit codes: 0 success, 1 runtime failure (database unreachable,
/// migration failed), 2 invalid configuration or usage.
@main
struct TokenGateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokengate",
        abstract: "Backend-for-frontend auth gateway for native mobile apps.",
        version: tokenGateVersion,
        subcommands: [Serve.self, Migrate.self, Sweep.self, Keys.self, CheckConfig.self, Version.self]
    )
}

/// The `--config` option every command shares.
struct ConfigOption: ParsableArguments {
    @Option(name: .long, help: "Configuration file (.yaml, .yml or .json). Default: $TOKENGATE_CONFIG, else none (defaults + environment).")
    var config: String?

    /// Loads and validates the configuration, or prints every problem and exits with code 2.
    func load() throws -> TokenGateConfiguration {
        let environment = ProcessInfo.processInfo.environment
        do {
            return try ConfigurationLoader.load(path: config ?? environment["TOKENGATE_CONFIG"], environment: environment)
        } catch {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            throw ExitCode(2)
        }
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve HTTP until SIGTERM or SIGINT, then drain in-flight requests."
    )

    @OptionGroup var options: ConfigOption

    func run() async throws {
        let configuration = try options.load()
        let logger = TokenGateApp.makeLogger(configuration)
        let database = TokenGateApp.makeDatabase(configuration)
        defer { database.shutdown() }
        do {
            let status = try await Migrator(migrations: SchemaMigrations.all).status(database)
            if status.databaseIsNewer || !status.pending.isEmpty {
                logger.critical(
                    "database schema does not match this binary: run `tokengate migrate`",
                    metadata: ["current": .stringConvertible(status.current), "pending": .stringConvertible(status.pending.count)]
                )
                throw ExitCode(1)
            }
        } catch let error as PostgresError {
            logger.critical("database unreachable", metadata: ["error": .string(error.description)])
            throw ExitCode(1)
        }
        let providers = try TokenGateApp.makeProviders(configuration)
        let assembly = try TokenGateApp.assemble(configuration, database: database, providers: providers, logger: logger)
        let (auth, server, upstreamClients) = (assembly.auth, assembly.server, assembly.upstreamClients)
        // What this instance caches follows every instance's changes (LISTEN/NOTIFY).
        let invalidations = Task { await auth.followInvalidations(databaseURL: configuration.database.url?.value ?? "") }
        defer { invalidations.cancel() }
        // The sweeper: every instance tries, one at a time does the work (advisory lock).
        let interval = Duration.seconds(configuration.sweeper.intervalSeconds)
        let sweeper = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                if Task.isCancelled { break }
                do {
                    _ = try await auth.sweep()
                } catch {
                    logger.warning("sweep failed; the next one retries", metadata: ["error_type": "\(type(of: error))"])
                }
            }
        }
        defer { sweeper.cancel() }
        try await Runtime.serveUntilSignalled(server, logger: logger)
        for client in upstreamClients.values { client.shutdown() }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending database migrations (safe to run from several instances at once)."
    )

    @OptionGroup var options: ConfigOption

    func run() async throws {
        let configuration = try options.load()
        let database = TokenGateApp.makeDatabase(configuration)
        defer { database.shutdown() }
        do {
            let applied = try await Migrator(migrations: SchemaMigrations.all).migrate(database)
            if applied.isEmpty {
                print("schema is up to date (version \(SchemaMigrations.all.last?.version ?? 0))")
            }
            for migration in applied { print("applied \(migration.version) \(migration.name)") }
        } catch let error as MigrationError {
            FileHandle.standardError.write(Data("migrate: \(error.description)\n".utf8))
            throw ExitCode(1)
        } catch let error as PostgresError {
            throw failure(error, command: "migrate")
        }
    }
}

struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate the configuration; print every problem, or the effective configuration with secrets redacted."
    )

    @OptionGroup var options: ConfigOption

    func run() throws {
        let configuration = try options.load()
        print(ConfigurationLoader.renderRedacted(configuration))
    }
}

struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the version.")

    func run() { print(tokenGateVersion) }
}

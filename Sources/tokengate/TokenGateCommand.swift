import ArgumentParser
import Foundation
import Logging
import TGApp
import TGAuth
import TGHTTPClient
import TGPostgres
import TGStore

#if canImport(Glibc)
import Glibc
#endif

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
        abstract: "Serve HTTP (the public port and the admin listener) until SIGTERM or SIGINT, then drain in-flight requests."
    )

    @OptionGroup var options: ConfigOption

    func run() async throws {
        let configuration = try options.load()
        let logger = TokenGateApp.makeLogger(configuration)
        for warning in ConfigurationLoader.warnings(configuration) {
            logger.warning("configuration", metadata: ["key": .string(warning.key), "detail": .string(warning.message)])
        }
        TokenGateApp.logEventLoops(configuration, logger: logger)
        let database = TokenGateApp.makeDatabase(configuration)
        defer { database.shutdown() }
        // A client gone mid-answer must not kill the process.
        signal(SIGPIPE, SIG_IGN)
        let providers = try TokenGateApp.makeProviders(configuration)
        let gateway: Gateway
        do {
            gateway = try await Gateway.start(configuration, database: database, providers: providers, logger: logger, handlesSignals: true)
        } catch let error as Gateway.SchemaMismatch {
            logger.critical("database schema does not match this binary", metadata: ["problem": .string(error.description)])
            throw ExitCode(1)
        } catch let error as StoreError {
            logger.critical("database unreachable", metadata: ["error": .string(error.description)])
            throw ExitCode(1)
        } catch let error as Gateway.ListenerUnavailable {
            logger.critical("cannot listen", metadata: ["problem": .string(error.description)])
            throw ExitCode(1)
        }
        try await gateway.run()
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
            let applied = try await SchemaMigrations.migrate(database)
            if applied.isEmpty {
                print("schema is up to date (version \(SchemaMigrations.all.last?.version ?? 0))")
            }
            for migration in applied { print("applied \(migration.version) \(migration.name)") }
        } catch let error as MigrationError {
            FileHandle.standardError.write(Data("migrate: \(error.description)\n".utf8))
            throw ExitCode(1)
        } catch let error as StoreError {
            throw failure(error, command: "migrate")
        }
    }
}

struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate the configuration; print every problem, or the effective configuration with secrets redacted.",
        discussion: "Standard error then lists the URLs to register at each provider: its redirect URI and back-channel logout URI."
    )

    @OptionGroup var options: ConfigOption

    func run() throws {
        let configuration = try options.load()
        print(ConfigurationLoader.renderRedacted(configuration))
        // Warnings and what to register at each provider, on stderr: standard output stays the JSON.
        for warning in ConfigurationLoader.warnings(configuration) {
            FileHandle.standardError.write(Data("warning: \(warning.key): \(warning.message)\n".utf8))
        }
        FileHandle.standardError.write(Data(configuration.providerRegistrations.utf8))
    }
}

struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the version.")

    func run() { print(tokenGateVersion) }
}

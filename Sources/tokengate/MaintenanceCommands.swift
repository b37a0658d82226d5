import ArgumentParser
import Foundation
import TGApp
import TGAuth
import TGPostgres
import TGStore

/// Builds the auth flow's pieces a maintenance command works with (no HTTP server).
private func withAuthServices<T>(_ options: ConfigOption, _ body: (AuthServices) async throws -> T) async throws -> T {
    let configuration = try options.load()
    let logger = TokenGateApp.makeLogger(configuration)
    let database = TokenGateApp.makeDatabase(configuration)
    defer { database.shutdown() }
    let auth = try TokenGateApp.makeAuthServices(
        configuration,
        database: database,
        providers: try TokenGateApp.makeProviders(configuration),
        logger: logger
    )
    do {
        return try await body(auth)
    } catch let error as StoreError {
        throw failure(error, command: "tokengate")
    }
}

/// Says what the database answered (never a query or a value) and gives exit code 1.
func failure(_ error: StoreError, command: String) -> ExitCode {
    FileHandle.standardError.write(Data("\(command): \(error.description)\n".utf8))
    return ExitCode(1)
}

struct Sweep: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove what is stale now (expired logins, codes and sessions, rejected or unused accounts), once.",
        discussion: "`serve` does this on its own every sweeper.interval_seconds; only one sweeper runs at a time across instances."
    )

    @OptionGroup var options: ConfigOption

    func run() async throws {
        try await withAuthServices(options) { auth in
            guard let report = try await auth.sweeper.sweep() else {
                print("another sweeper holds the lock; nothing done")
                return
            }
            print("removed \(report.description)")
        }
    }
}

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the encryption keys of data at rest.",
        subcommands: [Rotate.self]
    )

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-encrypt every stored secret under encryption.current_key_id, online, in batches.",
            discussion: """
                Add the new key to encryption.keys and roll the instances; then make it current_key_id and roll them \
                again (so no instance meets a blob under a key it lacks); then run this. Remove an old key only after \
                this reports remaining=0. Exit code 3: rows were in use; run it again.
                """
        )

        @OptionGroup var options: ConfigOption

        func run() async throws {
            try await withAuthServices(options) { auth in
                let rotation = auth.keyRotation
                let report = try await rotation.rotateKeys()
                print("re-encrypted under \(rotation.currentKeyID): \(report.description)")
                if report.remaining > 0 { throw ExitCode(3) }
            }
        }
    }
}

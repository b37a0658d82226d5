import Foundation
import TGPostgres
import TGTesting
import Testing

/// Runs the real `tokengate` executable built next to the test bundle.
struct TokenGateProcess {
    static var executable: String {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        var url = directory
        // The test runner may be inside an .xctest bundle directory.
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("tokengate").path), url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url.appendingPathComponent("tokengate").path
    }

    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let result = try await runProcess(executable, arguments, environment: baseEnvironment.merging(environment) { $1 })
        return (result.exitCode, result.stdout, result.stderr)
    }

    /// Starts `tokengate` in the background, its output going to `log` (a file, so that nothing
    /// waits on a pipe). With `blockingSignals`, it starts with every signal blocked, as a child
    /// of a supervisor that blocks them may.
    /// What every child gets: a fixed `PATH`, and the sanitizer options this run was given
    /// (`make test-sanitized` turns leak reports off for the tests; a child built with the same
    /// sanitizer must not fail its exit status on them either).
    static var baseEnvironment: [String: String] {
        var environment = ["PATH": "/usr/bin:/bin"]
        for name in ["ASAN_OPTIONS", "TSAN_OPTIONS"] {
            if let value = ProcessInfo.processInfo.environment[name] { environment[name] = value }
        }
        return environment
    }

    static func start(
        _ arguments: [String],
        environment: [String: String] = [:],
        log: URL,
        blockingSignals: Bool = false
    ) async throws -> UncheckedProcess {
        try await offPool {
            if blockingSignals {
                var blocked = sigset_t()
                sigfillset(&blocked)
                pthread_sigmask(SIG_BLOCK, &blocked, nil)
            }
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            process.environment = baseEnvironment.merging(environment) { $1 }
            let handle = try FileHandle(forWritingTo: log)
            process.standardOutput = handle
            process.standardError = handle
            try process.run()
            return UncheckedProcess(process)
        }
    }
}

@Suite struct CommandLineTests {
    @Test func checkConfigExitsWith2AndListsEveryProblem() async throws {
        let result = try await TokenGateProcess.run(
            ["check-config"],
            environment: ["TOKENGATE_SERVER_PORT": "0", "TOKENGATE_LOG_LEVEL": "loud"]
        )
        #expect(result.status == 2)
        #expect(result.stderr.contains("server.port: must be between 1 and 65535"))
        #expect(result.stderr.contains("log.level: must be one of"))
        #expect(result.stderr.contains("database.url: is required"))
    }

    @Test func checkConfigPrintsTheEffectiveConfigurationWithTheDatabasePasswordRedacted() async throws {
        let result = try await TokenGateProcess.run(
            ["check-config"],
            environment: ["TOKENGATE_DATABASE_URL": "postgresql://u:hunter2@127.0.0.1/db"]
        )
        #expect(result.status == 0)
        #expect(result.stdout.contains("\"port\" : 8080"))
        #expect(!result.stdout.contains("hunter2"))
    }

    @Test func migrateAppliesOnceThenReportsUpToDateAndServeRefusesAnUnmigratedDatabase() async throws {
        try await TestDatabase.withFreshDatabase { _, url async throws in
            let environment = ["TOKENGATE_DATABASE_URL": url]
            let serveBefore = try await TokenGateProcess.run(["serve"], environment: environment.merging(["TOKENGATE_SERVER_PORT": "1"]) { $1 })
            #expect(serveBefore.status == 1)
            #expect(serveBefore.stdout.contains("run `tokengate migrate`"))
            let first = try await TokenGateProcess.run(["migrate"], environment: environment)
            #expect(first.status == 0)
            #expect(first.stdout.contains("applied 1 initial"))
            let second = try await TokenGateProcess.run(["migrate"], environment: environment)
            #expect(second.stdout.contains("schema is up to date"))
        }
    }

    /// Under `taskset -c 0` the process may run on one CPU, however many the machine has:
    /// `serve` runs one event loop and says so at start (the line comes before it needs the
    /// database, which is unreachable here, so it then exits 1).
    @Test func serveUnderTasksetOnOneCPURunsOneEventLoopAndSaysWhy() async throws {
        let result = try await runProcess(
            "/usr/bin/taskset",
            ["-c", "0", TokenGateProcess.executable, "serve"],
            environment: TokenGateProcess.baseEnvironment.merging(["TOKENGATE_DATABASE_URL": "postgresql://x@127.0.0.1:1/none"]) { $1 }
        )
        #expect(result.exitCode == 1)
        let line = try #require(result.stdout.split(separator: "\n").first { $0.contains(#""message":"event loops""#) })
        let fields = decodeJSON(String(line))
        #expect(fields["loops"] as? Int == 1, "\(line)")
        #expect(fields["cpu_affinity"] as? Int == 1)
        #expect(fields["cpus_usable"] as? Int == 1)
        #expect(fields["loops_from"] as? String == "cpus")
        #expect(fields["cpus_online"] as? Int == sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }

    @Test func migrateExitsWith1WhenTheDatabaseIsUnreachable() async throws {
        let result = try await TokenGateProcess.run(["migrate"], environment: ["TOKENGATE_DATABASE_URL": "postgresql://x@127.0.0.1:1/none"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("could not connect"))
    }
}

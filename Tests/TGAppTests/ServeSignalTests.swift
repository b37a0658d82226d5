import Foundation
import TGPostgres
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite struct ServeSignalTests {
    /// A supervisor may start TokenGate with termination signals blocked (a child inherits its
    /// parent's signal mask; this test's own threads block them, as Dispatch's threads do): SIGTERM
    /// must still drain and stop `serve`. Checked by hand through /proc: the child's main thread
    /// starts with SIGTERM blocked, and `serve` opens it once its signal handling is in place.
    @Test func serveStopsCleanlyOnSIGTERMEvenWhenStartedWithSignalsBlocked() async throws {
        try await ServedProcess.run(blockingSignals: true) { served async throws in
            #expect(try await served.terminate() == 0)
            let log = served.log
            #expect(log.contains(#""signal":"SIGTERM""#))
            #expect(log.contains(#""message":"stopped""#))
        }
    }
}

@Suite struct ServeAccessLogTests {
    /// Access-log lines wait in their loop's buffer (here up to a minute): SIGTERM drains the
    /// server and writes every one before `serve` exits.
    @Test func sigtermWritesEveryBufferedAccessLogLine() async throws {
        try await ServedProcess.run(environment: ["TOKENGATE_LOG_ACCESS_LOG_FLUSH_SECONDS": "60"]) { served async throws in
            // Unknown paths: answered 404, and logged.
            let paths = (0..<30).map { "http://127.0.0.1:\(served.port)/nothing-\($0)" }
            _ = try await curl(["-o", "/dev/null"] + paths.flatMap { [$0, "-o", "/dev/null"] }.dropLast(2))
            #expect(!served.log.contains(#""message":"request""#))
            #expect(try await served.terminate() == 0)
            let lines = served.log.split(separator: "\n").filter { $0.contains(#""message":"request""#) && $0.contains(#""route":"-""#) }
            #expect(lines.count == 30)
            #expect(lines.allSatisfy { $0.hasPrefix("{") && $0.hasSuffix("}") })
        }
    }
}

/// `tokengate serve` as ops start it: a process of its own on a freshly migrated database and a
/// free loopback port, its log in a file. What the tests of its signal handling share.
struct ServedProcess {
    let port: Int
    let process: UncheckedProcess
    let logFile: URL

    /// Runs `body` once `serve` answers `/healthz`; the process is killed afterwards if it still
    /// runs. `environment`: settings beside the database, port and admin port.
    static func run(
        environment extra: [String: String] = [:],
        blockingSignals: Bool = false,
        _ body: (ServedProcess) async throws -> Void
    ) async throws {
        try await TestDatabase.withFreshDatabase { _, url async throws in
            let database = ["TOKENGATE_DATABASE_URL": url]
            #expect(try await TokenGateProcess.run(["migrate"], environment: database).status == 0)
            let port = try freeLoopbackPort()
            let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("tg-serve-\(UUID().uuidString).log")
            defer { try? FileManager.default.removeItem(at: logFile) }
            let environment = ["TOKENGATE_SERVER_PORT": String(port), "TOKENGATE_ADMIN_PORT": "0"].merging(extra) { $1 }.merging(database) { $1 }
            let process = try await TokenGateProcess.start(["serve"], environment: environment, log: logFile, blockingSignals: blockingSignals)
            defer { kill(process.value.processIdentifier, SIGKILL) }
            let served = ServedProcess(port: Int(port), process: process, logFile: logFile)
            try #require(try await served.answersHealthz())
            try await body(served)
        }
    }

    /// Whether `/healthz` answers within 10 seconds.
    func answersHealthz() async throws -> Bool {
        for _ in 0..<100 {
            if try await curl(["-f", "http://127.0.0.1:\(port)/healthz"]).exitCode == 0 { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// Sends SIGTERM; the exit status once the process ends, nil when it still runs 10 seconds later.
    func terminate() async throws -> Int32? {
        kill(process.value.processIdentifier, SIGTERM)
        let process = process
        return try await offPool { () -> Int32? in
            let deadline = Date().addingTimeInterval(10)
            while process.value.isRunning, Date() < deadline { usleep(20_000) }
            return process.value.isRunning ? nil : process.value.terminationStatus
        }
    }

    /// What the process has logged so far.
    var log: String {
        String(decoding: FileManager.default.contents(atPath: logFile.path) ?? Data(), as: UTF8.self)
    }
}

/// A `Process` handed between threads; only its thread-safe members are used after launch.
struct UncheckedProcess: @unchecked Sendable {
    // Invariant: after `run()`, only `processIdentifier`, `isRunning` and `terminationStatus` are read.
    let value: Process
    init(_ value: Process) { self.value = value }
}

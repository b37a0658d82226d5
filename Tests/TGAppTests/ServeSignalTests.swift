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
        try await TestDatabase.withFreshDatabase { _, url async throws in
            let environment = ["TOKENGATE_DATABASE_URL": url]
            #expect(try await TokenGateProcess.run(["migrate"], environment: environment).status == 0)
            let port = try freeLoopbackPort()
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("tg-serve-\(UUID().uuidString).log")
            defer { try? FileManager.default.removeItem(at: output) }
            let process = try await TokenGateProcess.start(
                ["serve"],
                environment: ["TOKENGATE_SERVER_PORT": String(port), "TOKENGATE_ADMIN_PORT": "0"].merging(environment) { $1 },
                log: output,
                blockingSignals: true
            )
            defer { kill(process.value.processIdentifier, SIGKILL) }
            var healthy = false
            for _ in 0..<100 where !healthy {
                healthy = try await curl(["-f", "http://127.0.0.1:\(port)/healthz"]).exitCode == 0
                if !healthy { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(healthy)
            kill(process.value.processIdentifier, SIGTERM)
            let exited = try await offPool { () -> Int32? in
                let deadline = Date().addingTimeInterval(10)
                while process.value.isRunning, Date() < deadline { usleep(20_000) }
                return process.value.isRunning ? nil : process.value.terminationStatus
            }
            #expect(exited == 0)
            let log = String(decoding: FileManager.default.contents(atPath: output.path) ?? Data(), as: UTF8.self)
            #expect(log.contains(#""signal":"SIGTERM""#))
            #expect(log.contains(#""message":"stopped""#))
        }
    }
}

@Suite struct ServeAccessLogTests {
    /// Access-log lines wait in their loop's buffer (here up to a minute): SIGTERM drains the
    /// server and writes every one before `serve` exits.
    @Test func sigtermWritesEveryBufferedAccessLogLine() async throws {
        try await TestDatabase.withFreshDatabase { _, url async throws in
            let environment = ["TOKENGATE_DATABASE_URL": url]
            #expect(try await TokenGateProcess.run(["migrate"], environment: environment).status == 0)
            let port = try freeLoopbackPort()
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("tg-access-\(UUID().uuidString).log")
            defer { try? FileManager.default.removeItem(at: output) }
            let process = try await TokenGateProcess.start(
                ["serve"],
                environment: [
                    "TOKENGATE_SERVER_PORT": String(port), "TOKENGATE_ADMIN_PORT": "0",
                    "TOKENGATE_LOG_ACCESS_LOG_FLUSH_SECONDS": "60",
                ].merging(environment) { $1 },
                log: output
            )
            defer { kill(process.value.processIdentifier, SIGKILL) }
            var healthy = false
            for _ in 0..<100 where !healthy {
                healthy = try await curl(["-f", "http://127.0.0.1:\(port)/healthz"]).exitCode == 0
                if !healthy { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(healthy)
            // Unknown paths: answered 404, and logged.
            let paths = (0..<30).map { "http://127.0.0.1:\(port)/nothing-\($0)" }
            _ = try await curl(["-o", "/dev/null"] + paths.flatMap { [$0, "-o", "/dev/null"] }.dropLast(2))
            let before = String(decoding: FileManager.default.contents(atPath: output.path) ?? Data(), as: UTF8.self)
            #expect(!before.contains(#""message":"request""#))
            kill(process.value.processIdentifier, SIGTERM)
            let exited = try await offPool { () -> Int32? in
                let deadline = Date().addingTimeInterval(10)
                while process.value.isRunning, Date() < deadline { usleep(20_000) }
                return process.value.isRunning ? nil : process.value.terminationStatus
            }
            #expect(exited == 0)
            let log = String(decoding: FileManager.default.contents(atPath: output.path) ?? Data(), as: UTF8.self)
            let lines = log.split(separator: "\n").filter { $0.contains(#""message":"request""#) && $0.contains(#""route":"-""#) }
            #expect(lines.count == 30)
            #expect(lines.allSatisfy { $0.hasPrefix("{") && $0.hasSuffix("}") })
        }
    }
}

/// A `Process` handed between threads; only its thread-safe members are used after launch.
struct UncheckedProcess: @unchecked Sendable {
    // Invariant: after `run()`, only `processIdentifier`, `isRunning` and `terminationStatus` are read.
    let value: Process
    init(_ value: Process) { self.value = value }
}

import Foundation
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `make dev` and the README's quick start: what a newcomer does on day one works as written.
@Suite struct DevWalkthroughTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    /// The README shows exactly the walkthrough script's commands.
    @Test func theReadmeQuickStartIsTheWalkthroughScript() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let script = try String(contentsOf: Self.root.appendingPathComponent("scripts/walkthrough.sh"), encoding: .utf8)
        let start = try #require(readme.range(of: "<!-- walkthrough:start -->\n```bash\n"))
        let end = try #require(readme.range(of: "```\n<!-- walkthrough:end -->"))
        let marker = try #require(script.range(of: "# --- walkthrough ---\n"))
        #expect(String(readme[start.upperBound..<end.lowerBound]) == String(script[marker.upperBound...]))
    }

    /// `scripts/dev.sh` (what `make dev` runs) on ports of its own: the walkthrough and the
    /// back-channel logout script pass against it, and SIGINT (Ctrl-C) stops TokenGate, the
    /// provider, the API and PostgreSQL.
    @Test func makeDevServesTheWholeWalkthroughAndCtrlCStopsEverything() async throws {
        _ = try TestDatabase.adminURL()  // runs under `make test` only, like every database test
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("tg-dev-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(at: data) }
        let ports = (
            tokenGate: try freeLoopbackPort(), admin: try freeLoopbackPort(), provider: try freeLoopbackPort(), api: try freeLoopbackPort()
        )
        let environment = [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": NSHomeDirectory(), "DATA": data.path,
            "TOKENGATE_DEV_PORT": String(ports.tokenGate), "TOKENGATE_DEV_ADMIN_PORT": String(ports.admin),
            "MOCK_PORT": String(ports.provider), "API_PORT": String(ports.api),
            // Below Linux's ephemeral range, where no client socket holds it (as PrivateCluster does).
            "DEV_PG_PORT": String(20000 + Int.random(in: 0..<10000)), "TOKENGATE_BINARY": TokenGateProcess.executable,
        ]
        let log = data.appendingPathComponent("dev.out")
        let dev = try await offPool {
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            let process = Process()
            // As from a terminal: no signal blocked (a child inherits the test thread's mask, in
            // which Dispatch blocks SIGINT, and bash cannot unblock it itself).
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", "-c",
                "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv('/bin/bash', ['bash', sys.argv[1]])",
                Self.root.appendingPathComponent("scripts/dev.sh").path,
            ]
            process.environment = environment
            let handle = try FileHandle(forWritingTo: log)
            process.standardOutput = handle
            process.standardError = handle
            try process.run()
            return UncheckedProcess(process)
        }
        defer {
            // Whatever happened: SIGTERM lets the script stop what it started, then it must go.
            kill(dev.value.processIdentifier, SIGTERM)
            for _ in 0..<200 where dev.value.isRunning { usleep(50_000) }
            kill(dev.value.processIdentifier, SIGKILL)
        }
        func output() -> String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        var started = false
        for _ in 0..<600 where !started && dev.value.isRunning {
            started = output().contains("Ctrl-C stops")
            if !started { try await Task.sleep(for: .milliseconds(100)) }
        }
        try #require(started, "make dev did not come up:\n\(output())")
        #expect(output().contains("TG=${TG:-http://127.0.0.1:\(ports.tokenGate)}"))
        // It says where the admin listener is, and the metrics are there, not on the public port.
        #expect(output().contains("admin listener        http://127.0.0.1:\(ports.admin)"))
        #expect(try await curl(["-f", "-o", "/dev/null", "http://127.0.0.1:\(ports.admin)/metrics"]).exitCode == 0)

        let walk = try await runProcess(
            "/bin/bash",
            [Self.root.appendingPathComponent("scripts/walkthrough.sh").path],
            environment: environment.merging(["TG": "http://127.0.0.1:\(ports.tokenGate)"]) { $1 }
        )
        #expect(walk.exitCode == 0, "\(walk.stdout)\n\(walk.stderr)")
        #expect(walk.stdout.contains(#""subject":"alice""#))
        #expect(walk.stdout.contains(#""displayName": "alice""#))
        // The API's next link came back as TokenGate's, and following it reached the second page.
        #expect(walk.stdout.contains("http://127.0.0.1:\(ports.tokenGate)/api/graph/me/messages?$skip=1\n"), "\(walk.stdout)")
        #expect(walk.stdout.contains("Paging through TokenGate"))
        #expect(walk.stdout.contains(#""@odata.deltaLink": "http://127.0.0.1:\#(ports.tokenGate)/api/graph/me/messages/delta?$deltatoken=1""#))
        #expect(walk.stdout.contains("old device after transfer: 401\n"))
        #expect(walk.stdout.contains(#""sessions_ended":1"#))
        #expect(walk.stdout.hasSuffix("after logout: 401\n"))
        // The DPoP script against the same `make dev` (its app allows DPoP).
        let dpop = try await runProcess(
            "/bin/bash",
            [Self.root.appendingPathComponent("scripts/dpop.sh").path],
            environment: environment.merging(["TG": "http://127.0.0.1:\(ports.tokenGate)"]) { $1 }
        )
        #expect(dpop.exitCode == 0, "\(dpop.stdout)\n\(dpop.stderr)")
        #expect(dpop.stdout.contains("token_type: DPoP\n") && dpop.stdout.contains(#""subject":"alice""#))
        #expect(dpop.stdout.contains("as bearer: 401\nwithout a proof: 401\n"))
        #expect(dpop.stdout.hasSuffix("refresh without a proof: 400\nrefresh with the proof: 200\n"))

        // The app side in Swift: the TokenGateClient library against the same `make dev`.
        let example = try await runProcess(
            "/bin/bash",
            [Self.root.appendingPathComponent("scripts/app-example.sh").path],
            // The sanitizer build's options too (`make test-sanitized` turns leak reports off:
            // URLSession's libcurl keeps memory to the end, and a report would replace the exit).
            environment: environment.merging([
                "TG": "http://127.0.0.1:\(ports.tokenGate)",
                "APP_EXAMPLE_BINARY": URL(fileURLWithPath: TokenGateProcess.executable).deletingLastPathComponent()
                    .appendingPathComponent("tokengate-app-example").path,
            ]) { $1 }.merging(ProcessInfo.processInfo.environment.filter { $0.key == "ASAN_OPTIONS" }) { $1 }
        )
        #expect(example.exitCode == 0, "\(example.stdout)\n\(example.stderr)")
        #expect(example.stdout.contains("signed in: alice at "), "\(example.stdout)")
        #expect(example.stdout.contains("token_type: DPoP\n"))
        #expect(example.stdout.contains("auth/me: 200 ") && example.stdout.contains(#""subject":"alice""#))
        #expect(example.stdout.contains("api/graph/me: 200 "))
        #expect(example.stdout.hasSuffix("logged out: 1 session(s) ended\naccounts left: 0\n"))

        // Back-channel logout: the development provider signs a logout token, curl posts it.
        let backChannel = try await runProcess(
            "/bin/bash",
            [Self.root.appendingPathComponent("scripts/backchannel-logout.sh").path],
            environment: environment.merging(["TG": "http://127.0.0.1:\(ports.tokenGate)", "IDP": "http://127.0.0.1:\(ports.provider)"]) { $1 }
        )
        #expect(backChannel.exitCode == 0, "\(backChannel.stdout)\n\(backChannel.stderr)")
        #expect(backChannel.stdout.contains("signed in: 200\nback-channel logout: 200\nafter back-channel logout: 401\n"), "\(backChannel.stdout)")
        #expect(backChannel.stdout.contains(#""error":"invalid_request""#) && backChannel.stdout.contains("jti was already used"))

        kill(dev.value.processIdentifier, SIGINT)
        let exited = try await offPool { () -> Bool in
            let deadline = Date().addingTimeInterval(20)
            while dev.value.isRunning, Date() < deadline { usleep(50_000) }
            return !dev.value.isRunning
        }
        #expect(exited, "make dev kept running after SIGINT:\n\(output())")
        #expect(output().contains("dev: stopped"))
        for port in [ports.tokenGate, ports.admin, ports.provider, ports.api] {
            let probe = try await curl(["-s", "-o", "/dev/null", "--max-time", "2", "http://127.0.0.1:\(port)/"])
            #expect(probe.exitCode == 7, "port \(port) still answers after Ctrl-C")
        }
        let postgres = try await curl(["-s", "--max-time", "2", "telnet://127.0.0.1:\(environment["DEV_PG_PORT"]!)"])
        #expect(postgres.exitCode == 7, "PostgreSQL still listens after Ctrl-C")
    }
}

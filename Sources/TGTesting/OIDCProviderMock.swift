import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real OpenID provider nobody in this project wrote: `oidc-provider-mock` (PyPI, installed by
/// `scripts/deps.sh`), run as a child process on 127.0.0.1. Its login step is a form POST of
/// `sub=<user>` to the authorize URL; `POST /users/<sub>/revoke-tokens` revokes a user's tokens.
public final class OIDCProviderMock: @unchecked Sendable {
    // Invariant: `process` is set in `start` before the instance is shared and only read after.
    private let process: Process
    public let port: UInt16

    /// The issuer, `http://127.0.0.1:<port>` (the mock derives it from the request's host).
    public var issuer: String { "http://127.0.0.1:\(port)" }

    private init(process: Process, port: UInt16) {
        self.process = process
        self.port = port
    }

    /// Starts the provider and waits until its discovery document answers.
    public static func start(extraArguments: [String] = []) async throws -> OIDCProviderMock {
        var lastError: (any Error)?
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-W", "ignore", "-m", "oidc_provider_mock", "-H", "127.0.0.1", "-p", String(port)] + extraArguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let mock = OIDCProviderMock(process: process, port: port)
            for _ in 0..<100 {
                let probe = try await curl(["-o", "/dev/null", "-w", "%{http_code}", "\(mock.issuer)/.well-known/openid-configuration"])
                if probe.stdout == "200" { return mock }
                if !process.isRunning { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            mock.stop()
            lastError = POSIXError(.ETIMEDOUT)
        }
        throw lastError ?? POSIXError(.ETIMEDOUT)
    }

    /// Stops the provider (SIGKILL: children of this process inherit a mask that blocks SIGTERM).
    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }
}

import Foundation

/// Runs blocking work on a thread of its own, never on Swift's cooperative pool (one thread per
/// core here, needed by the servers under test) nor on Dispatch's global queues (which on Linux
/// share that pool's threads and only add threads after a stall of seconds).
public func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try work() }) }
        thread.start()
    }
}

/// What the system `curl` printed and how it exited.
public struct CurlResult: Sendable {
    public var exitCode: Int32
    public var stdout: String
    public var stderr: String

    /// The body after the head when curl ran with `-i`.
    public var body: String {
        guard let end = stdout.range(of: "\r\n\r\n") else { return stdout }
        return String(stdout[end.upperBound...])
    }

    /// The status code when curl ran with `-i`.
    public var status: Int? {
        stdout.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) }
    }
}

/// Runs the system `curl` (a real, independent HTTP client) with `arguments`.
public func curl(_ arguments: [String]) async throws -> CurlResult {
    try await offPool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        // --noproxy: a test that sets http_proxy in this process must not divert other tests.
        process.arguments = ["--silent", "--show-error", "--noproxy", "*", "--max-time", "20"] + arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CurlResult(
            exitCode: process.terminationStatus,
            stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self)
        )
    }
}

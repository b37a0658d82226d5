import Foundation
import Synchronization

/// Runs blocking work on a thread of its own, never on Swift's cooperative pool (one thread per
/// core here, needed by the servers under test) nor on Dispatch's global queues (which on Linux
/// share that pool's threads and only add threads after a stall of seconds).
public func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try work() }) }
        thread.start()
    }
}

/// What a process printed and how it exited.
public struct ProcessResult: Sendable {
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

/// What the system `curl` printed and how it exited.
public typealias CurlResult = ProcessResult

/// Runs `executable` to its end on a thread of its own; what it printed. `environment` nil: this
/// process's environment.
public func runProcess(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) async throws -> ProcessResult {
    try await offPool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Standard error is read on another thread: a child filling one pipe while this waits
        // on the other would never finish.
        let stderr = Mutex(Data())
        let stderrRead = DispatchSemaphore(value: 0)
        Thread {
            let data = err.fileHandleForReading.readDataToEndOfFile()
            stderr.withLock { $0 = data }
            stderrRead.signal()
        }.start()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        stderrRead.wait()
        process.waitUntilExit()
        return ProcessResult(
            exitCode: process.terminationStatus,
            stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr.withLock { $0 }, as: UTF8.self)
        )
    }
}

/// Runs the system `curl` (a real, independent HTTP client) with `arguments`.
public func curl(_ arguments: [String]) async throws -> CurlResult {
    // --noproxy: a test that sets http_proxy in this process must not divert other tests.
    try await runProcess("/usr/bin/curl", ["--silent", "--show-error", "--noproxy", "*", "--max-time", "20"] + arguments)
}

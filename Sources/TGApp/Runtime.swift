import Dispatch
import Foundation
public import Logging
public import TGHTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// Runs an HTTP server until SIGTERM or SIGINT, then drains it: the `serve` command's life cycle.
public enum Runtime {
    /// Starts `server`, logs where it listens, and returns once a termination signal has been
    /// handled and in-flight requests have drained.
    public static func serveUntilSignalled(_ server: HTTPServer, logger: Logger) async throws {
        signal(SIGPIPE, SIG_IGN)
        try server.start()
        logger.info(
            "listening",
            metadata: ["host": .string(server.configuration.host), "port": .stringConvertible(server.port)]
        )
        let received = await waitForTerminationSignal()
        logger.info("shutting down", metadata: ["signal": .string(received), "in_flight": .stringConvertible(server.requestsInFlight)])
        await server.shutdown()
        logger.info("stopped")
    }

    /// Suspends until SIGTERM or SIGINT arrives; returns its name.
    static func waitForTerminationSignal() async -> String {
        await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            let once = Once(continuation)
            for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { once.resume(name) }
                source.resume()
                once.keep(source)
            }
        }
    }

    /// Resumes the continuation for the first signal only, and keeps the signal sources alive.
    private final class Once: @unchecked Sendable {
        // Invariant: `continuation` and `sources` are only touched with `lock` held.
        private let lock = NSLock()
        private var continuation: CheckedContinuation<String, Never>?
        private var sources: [any DispatchSourceSignal] = []

        init(_ continuation: CheckedContinuation<String, Never>) { self.continuation = continuation }

        func keep(_ source: any DispatchSourceSignal) { lock.withLock { sources.append(source) } }

        func resume(_ name: String) {
            let pending = lock.withLock {
                let pending = continuation
                continuation = nil
                return pending
            }
            pending?.resume(returning: name)
        }
    }
}

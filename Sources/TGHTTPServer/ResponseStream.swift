import CMicroHTTPD
import TGBase

/// Writes the chunks of a streamed response body. Writing waits while the client is behind
/// (back-pressure), and throws ``HTTPServerError/clientGone`` once the connection is closed.
public struct ResponseBodyWriter: Sendable {
    /// Where the chunks go: a connection's stream, or a closure (an in-process answer).
    enum Backing: Sendable {
        case stream(ResponseStream)
        case inProcess(@Sendable ([UInt8]) async throws -> Void)
    }

    let backing: Backing

    init(stream: ResponseStream) {
        backing = .stream(stream)
    }

    /// A writer without a connection, for draining a streamed body in-process (tests): `accept`
    /// receives each chunk; throwing from it ends the body as a closed connection would.
    public init(inProcess accept: @escaping @Sendable ([UInt8]) async throws -> Void) {
        backing = .inProcess(accept)
    }

    /// Queues `bytes` for sending; returns once they are buffered below the high-water mark.
    public func write(_ bytes: [UInt8]) async throws {
        switch backing {
        case .stream(let stream): try await stream.write(bytes)
        case .inProcess(let accept): try await accept(bytes)
        }
    }
}

/// The buffer between a body producer (any task) and libmicrohttpd's content-reader callback
/// (the connection's MHD thread). When the reader finds the buffer empty it suspends the
/// connection; the next write or the end resumes it.
final class ResponseStream: @unchecked Sendable {
    // Invariant: every mutable field is read and written only with `lock` held, and the connection
    // is suspended and resumed only with `lock` held, guided by `readerSuspended`, so a resume
    // always follows its suspend and never happens twice.
    private let lock = Lock()
    private let daemon: LoopDaemon
    private var connection: OpaquePointer?
    private var queue = ChunkQueue()
    private var ended = false
    private var failed = false
    private var closed = false
    private var readerSuspended = false
    private var writerWaiter: CheckedContinuation<Void, any Error>?

    static let highWater = 256 * 1024

    init(connection: OpaquePointer?, daemon: LoopDaemon) {
        self.connection = connection
        self.daemon = daemon
    }

    func write(_ bytes: [UInt8]) async throws {
        guard !bytes.isEmpty else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            lock.lock()
            if closed || ended {
                lock.unlock()
                continuation.resume(throwing: HTTPServerError.clientGone)
                return
            }
            queue.append(bytes)
            resumeReaderLocked()
            if queue.count > Self.highWater {
                writerWaiter = continuation
                lock.unlock()
            } else {
                lock.unlock()
                continuation.resume()
            }
        }
    }

    /// The producer is done (`failed`: it threw, so the body must end abnormally).
    func end(failed: Bool) {
        lock.withLock {
            guard !ended else { return }
            ended = true
            self.failed = failed
            resumeReaderLocked()
        }
    }

    /// MHD's content reader: copy buffered bytes, or report the end, or suspend until more come.
    func read(into destination: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        lock.lock()
        if !queue.isEmpty {
            let copied = queue.read(into: UnsafeMutableRawBufferPointer(start: destination, count: capacity))
            var waiter: CheckedContinuation<Void, any Error>?
            if queue.count <= Self.highWater / 2 {
                waiter = writerWaiter
                writerWaiter = nil
            }
            lock.unlock()
            waiter?.resume()
            return copied
        }
        if ended {
            lock.unlock()
            return failed ? Self.endWithError : Self.endOfStream
        }
        // Shutting down: a stream still running when the drain ends is cut.
        if daemon.closing {
            lock.unlock()
            return Self.endWithError
        }
        readerSuspended = true
        if let connection { daemon.suspend(connection) }
        lock.unlock()
        return 0
    }

    /// The response was destroyed: the connection is finished; producers must stop.
    func close() {
        lock.lock()
        closed = true
        connection = nil
        queue.removeAll()
        let waiter = writerWaiter
        writerWaiter = nil
        lock.unlock()
        waiter?.resume(throwing: HTTPServerError.clientGone)
    }

    private func resumeReaderLocked() {
        guard readerSuspended, let connection else { return }
        readerSuspended = false
        daemon.resume(connection)
    }

    /// `MHD_CONTENT_READER_END_OF_STREAM` and `MHD_CONTENT_READER_END_WITH_ERROR` (cast macros).
    static let endOfStream = -1
    static let endWithError = -2
}

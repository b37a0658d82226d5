import CMicroHTTPD
import TGBase

/// A request body read while it arrives: chunks of bytes in order, ending at the end of the body.
///
/// Iterating throws ``HTTPServerError/bodyTooLarge`` once the body passes the request's
/// `maxBodySize`, ``HTTPServerError/clientGone`` when the client closed the connection,
/// ``HTTPServerError/requestTimedOut`` when the request's deadline passed,
/// ``HTTPServerError/requestAnswered`` when the request was answered meanwhile, and
/// `CancellationError` when the reading task is cancelled. Read it once, from one task at a time.
public struct ServerRequestBody: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    let stream: RequestBodyStream

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: stream) }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: RequestBodyStream
        private var batch: [[UInt8]] = []
        private var index = 0

        init(stream: RequestBodyStream) { self.stream = stream }

        public mutating func next() async throws -> [UInt8]? {
            if index == batch.count {
                guard let chunks = try await stream.take() else { return nil }
                batch = chunks
                index = 0
            }
            index += 1
            return batch[index - 1]
        }
    }

    /// The whole body; throws ``HTTPServerError/bodyTooLarge`` past `limit` bytes.
    public func collect(upTo limit: Int) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        for try await chunk in self {
            guard bytes.count + chunk.count <= limit else { throw HTTPServerError.bodyTooLarge }
            bytes.append(contentsOf: chunk)
        }
        return bytes
    }
}

/// The buffer between libmicrohttpd's access handler (the producer, on the connection's thread)
/// and the reader of a streamed request body (any task).
///
/// Back-pressure: once more than ``highWater`` bytes wait, the producer suspends the connection
/// (libmicrohttpd then reads nothing more from the socket); the reader takes everything buffered
/// at once and resumes the connection.
final class RequestBodyStream: @unchecked Sendable {
    // Invariants:
    // - Every mutable field is accessed only with `lock` held. `lock` is the server's lock for the
    //   request's context, which also guards the request's `BridgeStateMachine`, so the two
    //   reasons to suspend a connection (a full buffer here, waiting for the answer there) are
    //   decided under one lock; they never overlap, as the bridge suspends only after the body.
    // - The connection is suspended only by the producer (inside the access handler) and resumed
    //   only when `paused` says it is suspended, both with `lock` held, so every resume follows
    //   its suspend and none happens twice. `connection` becomes nil (never resumed again) when the
    //   request completes.
    enum State {
        case open
        case ended
        case failed(HTTPServerError)
    }

    static let highWater = 256 * 1024

    let lock: Lock
    private let daemon: LoopDaemon
    private var connection: OpaquePointer?
    private var chunks: [[UInt8]] = []
    private var buffered = 0
    private var state = State.open
    private var reader: CheckedContinuation<[[UInt8]]?, any Error>?
    /// The connection is suspended because the buffer is full.
    private(set) var paused = false

    /// The connection's deadline entry: a pause of the server's making is not the client's slowness.
    private let entry: HeadDeadlines.Entry?

    init(lock: Lock, connection: OpaquePointer, daemon: LoopDaemon, entry: HeadDeadlines.Entry? = nil) {
        self.lock = lock
        self.daemon = daemon
        self.entry = entry
        self.connection = connection
    }

    /// Whether chunks are still wanted (neither ended nor failed). `lock` held.
    var isOpenLocked: Bool {
        if case .open = state { return true }
        return false
    }

    /// The reader's side: everything buffered, nil at the end, or the failure.
    func take() async throws -> [[UInt8]]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[[UInt8]]?, any Error>) in
                lock.lock()
                if !chunks.isEmpty {
                    let taken = takeAllLocked()
                    lock.unlock()
                    continuation.resume(returning: taken)
                    return
                }
                switch state {
                case .ended:
                    lock.unlock()
                    continuation.resume(returning: nil)
                case .failed(let error):
                    lock.unlock()
                    continuation.resume(throwing: error)
                case .open:
                    if Task.isCancelled {
                        lock.unlock()
                        continuation.resume(throwing: CancellationError())
                    } else {
                        precondition(reader == nil, "a streamed request body is read by one task at a time")
                        reader = continuation
                        lock.unlock()
                    }
                }
            }
        } onCancel: {
            lock.lock()
            let waiting = reader
            reader = nil
            lock.unlock()
            waiting?.resume(throwing: CancellationError())
        }
    }

    /// The producer's side, `lock` held: a chunk arrived. Returns the reader to wake (outside the
    /// lock) with the chunks, or suspends the connection when the buffer is over the high-water
    /// mark.
    func appendLocked(_ chunk: [UInt8]) -> Wake? {
        guard isOpenLocked else { return nil }
        chunks.append(chunk)
        buffered += chunk.count
        if let waiting = reader {
            reader = nil
            return Wake(reader: waiting, result: .success(takeAllLocked()))
        }
        if buffered > Self.highWater, !paused, let connection {
            paused = true
            entry?.bodyStopped()
            daemon.suspend(connection)
        }
        return nil
    }

    /// `lock` held: the body is complete.
    func finishLocked() -> Wake? {
        guard isOpenLocked else { return nil }
        state = .ended
        guard let waiting = reader else { return nil }
        reader = nil
        return Wake(reader: waiting, result: .success(nil))
    }

    /// `lock` held: no more chunks will be read (`error` says why); buffered ones are dropped and a
    /// paused connection is resumed, so libmicrohttpd reads (and drops) the rest.
    func failLocked(_ error: HTTPServerError) -> Wake? {
        resumeLocked()
        guard isOpenLocked else { return nil }
        state = .failed(error)
        chunks = []
        buffered = 0
        guard let waiting = reader else { return nil }
        reader = nil
        return Wake(reader: waiting, result: .failure(error))
    }

    /// `lock` held: the request completed; the connection is gone for good.
    func closeLocked() -> Wake? {
        let wake = failLocked(.clientGone)
        connection = nil
        paused = false
        return wake
    }

    private func takeAllLocked() -> [[UInt8]] {
        let taken = chunks
        chunks = []
        buffered = 0
        resumeLocked()
        return taken
    }

    private func resumeLocked() {
        guard paused else { return }
        paused = false
        if let connection {
            entry?.bodyStarted()
            daemon.resume(connection)
        }
    }

    /// A reader to resume once the lock is released.
    struct Wake {
        let reader: CheckedContinuation<[[UInt8]]?, any Error>
        let result: Result<[[UInt8]]?, HTTPServerError>

        func resume() {
            switch result {
            case .success(let chunks): reader.resume(returning: chunks)
            case .failure(let error): reader.resume(throwing: error)
            }
        }
    }
}

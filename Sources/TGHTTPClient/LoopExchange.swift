import CCurl
import TGBase
import TGEventLoop

/// One request sent from the client's loop thread, answered there: the head (or the failure
/// before it) through ``onHead``, then the body read with ``read(into:)`` as it arrives,
/// with back-pressure (the transfer pauses above 256 KiB buffered). No task, no lock, no hop:
/// for a caller that is itself on the loop (an HTTP server's connection on the same loop). The
/// exchange is its transfer (one object a call); its easy handle goes back to the pool when the
/// transfer ends, while the exchange may live on until its body is read.
///
/// Deadlines: the head must arrive within the head timeout; after it, the body may go quiet
/// for at most the idle timeout while the reader keeps up. Time the transfer spends paused
/// because the reader is behind does not count (a slow reader's download is never cut).
public final class LoopExchange: Transfer, @unchecked Sendable {
    // Invariant: every member is used only on the client's loop thread (libcurl calls back there,
    // and callers must be there).

    /// The response head (with the whole body already buffered when it is small, see
    /// `wholeBodyUpTo`), or why the exchange failed before it arrived. Called once. One callback
    /// for both: every proxied call sets it, and a closure is an allocation.
    public var onHead: ((Result<RawHead, HTTPClientError>) -> Void)?

    let client: HTTPClient
    private var queue = ChunkQueue()
    var buffered: Int { queue.count }
    private var failure: HTTPClientError?
    private var waker: (() -> Void)?
    // The flags and `largestPiece` share one word: an exchange lives as long as its call,
    // thousands at once under a burst (docs/architecture.md, "Memory under a burst").
    private var ended = false
    private var paused = false
    private var headArrived = false
    /// The most body bytes libcurl handed over at once: at most its read buffer's size (see
    /// ``EasyHandlePool``).
    private(set) var largestPiece: Int32 = 0
    /// Armed once the head is in and the body still arriving.
    private var bodyIdle: IdleDeadline?
    let bodyIdleTimeout: Int64

    static let highWater = 256 * 1024

    init(client: HTTPClient, idleTimeout: Duration, handles: EasyHandlePool, compact: Bool = false) throws {
        self.client = client
        bodyIdleTimeout = EventLoop.nanoseconds(idleTimeout)
        try super.init(bufferLimit: 0, handles: handles, compact: compact)
    }

    /// Whether the body is all here (nothing more will arrive).
    public var isComplete: Bool { ended }

    /// Every buffered byte, for a body known to be complete and small.
    public func takeAll() -> [UInt8] {
        // A small answer is usually one chunk: handed over as it is.
        queue.takeAll()
    }

    /// What a read of the body gave.
    public enum Read: Equatable {
        case bytes(Int)
        case wait
        case end
        case failed(HTTPClientError)
    }

    /// Copies buffered body bytes into `buffer`; when there are none, says whether the body ended,
    /// failed, or to wait (then ``notify(when:)``).
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> Read {
        guard buffered > 0 else {
            if let failure { return .failed(failure) }
            return ended ? .end : .wait
        }
        let copied = queue.read(into: buffer)
        if paused, buffered <= Self.highWater / 2, activeIndex >= 0 {
            paused = false
            bodyIdle?.moved()
            client.resumeOnLoop(self)
        }
        return .bytes(copied)
    }

    /// Calls `ready` once, on the loop, when a read would not wait.
    public func notify(when ready: @escaping () -> Void) {
        if buffered > 0 || ended || failure != nil {
            ready()
        } else {
            waker = ready
        }
    }

    /// Stops the transfer (the reader went away); nothing is called back afterwards.
    public func cancel() {
        onHead = nil
        waker = nil
        stopTimers()
        client.cancelOnLoop(self)
        queue.removeAll()
    }

    // MARK: As the transfer (loop thread)

    /// The head must arrive within `headTimeout`: the client's one timer for the heads of all its
    /// exchanges watches it (no timer per call), and expires the exchange when it is late.
    func started(headTimeout: Duration) {
        client.watchHead(of: self, until: EventLoop.now() + EventLoop.nanoseconds(headTimeout))
    }

    override func deliverHead() {
        super.deliverHead()
        handOver(receivedHead)
    }

    /// The head, to the caller (once).
    private func handOver(_ head: RawHead) {
        guard !headArrived else { return }
        headArrived = true
        headDeadline = 0
        if !ended, failure == nil {
            bodyIdle = IdleDeadline(
                timeout: bodyIdleTimeout,
                on: client.loop,
                isPaused: { [weak self] in self?.paused ?? false },
                expire: { [weak self] in self?.expire() }
            )
        }
        let callback = onHead
        onHead = nil
        callback?(.success(head))
    }

    /// Body bytes from libcurl: kept, or refused with a pause when the reader is behind.
    override func receiveBody(_ data: UnsafeBufferPointer<UInt8>) -> Int {
        guard buffered <= Self.highWater else {
            paused = true
            pausedForWrite = true
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        queue.append(Array(data))
        largestPiece = max(largestPiece, Int32(clamping: data.count))
        bodyIdle?.moved()
        wake()
        return data.count
    }

    override func finish(_ result: CURLcode, error override: HTTPClientError? = nil) {
        stopSending()
        transferEnded(outcome(result, override))
    }

    override func fail(_ error: HTTPClientError) {
        uploadChannel?.finish(error: error)
        transferEnded(error)
    }

    /// The transfer ended (`error` nil for a complete body), out of the multi handle: the handle
    /// goes back to serve the next call now, though this exchange may live on until its body is
    /// read; then the head or the failure goes to the caller.
    private func transferEnded(_ error: HTTPClientError?) {
        let head = receivedHead
        giveBackHandle()
        stopTimers()
        if let error {
            failure = error
            queue.removeAll()
            if !headArrived {
                headArrived = true
                let callback = onHead
                onHead = nil
                callback?(.failure(error))
                return
            }
        } else {
            ended = true
            if !headArrived { handOver(head) }
        }
        wake()
    }

    private func wake() {
        guard let waker else { return }
        self.waker = nil
        waker()
    }

    /// The head or the body was too late: the transfer stops with ``HTTPClientError/timeout``.
    func expire() {
        client.cancelOnLoop(self, error: .timeout)
    }

    private func stopTimers() {
        headDeadline = 0
        bodyIdle?.stop()
        bodyIdle = nil
    }
}

extension HTTPClient {
    /// Starts `request` from the loop's own thread (see ``LoopExchange``), with header lines the
    /// caller built (``HeaderLines``: no `HTTPFields` per call). Set the exchange's callbacks
    /// before returning to the loop. Throws before anything is sent when the URL is refused.
    ///
    /// `wholeBodyUpTo`: a response announcing at most this many body bytes is handed over only
    /// once its body is in (``LoopExchange/isComplete``), so it can be answered in one piece.
    ///
    /// Deadlines: the head must arrive within `headTimeout`, except after a streamed request body
    /// (``HTTPClientRequestBody/stream(length:_:)``), whose exchange may go quiet for at most
    /// `idleTimeout` from its start instead: the head must then arrive within it of the body's
    /// last byte, and time spent waiting for the body's producer does not count. After the head,
    /// see ``LoopExchange``. No deadline covers the whole exchange: a long upload or download
    /// that keeps moving is never cut (`CURLOPT_TIMEOUT` would count the pauses).
    public func startOnLoop(
        _ request: borrowing LoopRequest,
        body: HTTPClientRequestBody = .none,
        headTimeout: Duration,
        idleTimeout: Duration,
        wholeBodyUpTo: Int = 0
    ) throws -> LoopExchange {
        precondition(loop.inEventLoop, "startOnLoop must be called on the client's loop")
        let exchange = try LoopExchange(
            client: self,
            idleTimeout: idleTimeout,
            handles: handles,
            compact: transfersInFlight >= configuration.compactReadsAbove
        )
        exchange.holdHeadUpTo = min(wholeBodyUpTo, LoopExchange.highWater)
        try prepare(exchange, request, body: body, timeout: nil)
        if case .stream = body {
            // A streamed body may take longer than the head timeout to send: the exchange may go
            // quiet for at most `idleTimeout` instead, time spent waiting for the body's producer
            // not counted.
            exchange.idleTimeout = EventLoop.nanoseconds(idleTimeout)
        } else {
            exchange.started(headTimeout: headTimeout)
        }
        submit(.add(exchange))
        return exchange
    }
}

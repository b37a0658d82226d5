import CMicroHTTPD
import HTTPTypes
import Synchronization
import TGEventLoop

/// Everything the server keeps for one request, from the URI-log callback (which allocates it)
/// to the request-completed callback (which releases it).
///
/// It is also the task executor of the request's handler task: the task's first job runs inline on
/// the event-loop thread that dispatched it, so a handler that never truly suspends answers
/// without a thread hop and without suspending the connection; every later job goes to the
/// global concurrent executor, so no loop thread ever waits on a handler's I/O.
final class RequestContext: TaskExecutor, @unchecked Sendable {
    // Invariants:
    // - `stage`, `fields`, `body`, `deadlineSlot` are touched only on the connection's loop thread
    //   (MHD calls a connection's callbacks on one thread at a time).
    // - `bridge`, `task`, `connection`, `deadline` (once a handler task exists) and `bodyStream`
    //   are touched only with the server's lock for this context held (see `HTTPServer.lock(for:)`);
    //   `bodyStream` is set once, on the head, before any other thread can see the context.
    // - `startsInline` is set on the loop thread right before the handler task is created and read
    //   in `enqueue`, whose first call happens synchronously inside that task creation; later calls
    //   happen after the first job ran, so they observe `false`.
    enum Stage {
        case new
        case receiving
        case rejected
        /// The body passed the limit mid-way: the rest is read and dropped (up to a bound), then
        /// 413 is answered; libmicrohttpd accepts a response only before or after the body.
        case discarding(dropped: Int)
        /// The handler runs and reads the body as it arrives (`received` bytes so far).
        case streaming(received: Int)
        case dispatched
    }

    let target: String
    /// The daemon (and loop) the connection belongs to.
    let daemon: LoopDaemon
    var connection: OpaquePointer?
    var stage: Stage = .new
    // The flags sit in the padding after `stage`: every context lives as long as its request,
    // thousands at once under a burst, so its size is kept within an allocator size class of 256
    // bytes (docs/architecture.md, "Memory under a burst").
    /// Set on the loop thread when the handler answered `.async` (before its task exists).
    var isAsync = false
    var startsInline = false
    var method: HTTPRequest.Method = .get
    var fields = RequestFields()
    /// `Content-Length` as sent, if it was (stored without an optional's tag and padding).
    var contentLength: Int? {
        get { announcedLength == Int.min ? nil : announcedLength }
        set { announcedLength = newValue ?? Int.min }
    }
    private var announcedLength = Int.min
    /// This request's limits (the configuration's, or the ones it chose for this path); the
    /// timeout in nanoseconds.
    var maxBodySize = 0
    var requestTimeout: Int64 = 0
    var body: [UInt8] = []
    /// The body's buffer, for a request whose body streams.
    var bodyStream: RequestBodyStream?
    var bridge = BridgeStateMachine<ServerResponse>()
    var task: Task<Void, Never>?
    /// When the answer is due, in `EventLoop.now()` nanoseconds (0: no deadline set). A plain
    /// integer: an optional `ContinuousClock.Instant` is copied and destroyed through its type's
    /// metadata, several times per request.
    var deadline: Int64 = 0
    /// A streamed body's progress: how far past `deadline` its last bytes arrived moved it, in
    /// nanoseconds (the body's reader thread and the loop's deadline check read it; the loop writes it).
    let deadlineExtension = Atomic<Int64>(0)
    /// The connection's head-deadline entry (see ``HeadDeadlines``), if it has one. A `let`:
    /// read several times a request, each read of a `var` counted a reference.
    let connectionEntry: HeadDeadlines.Entry?
    /// Its place among its loop's requests waiting under a deadline (``RequestDeadlines``); -1
    /// when not waiting. Loop thread only.
    var deadlineSlot = -1

    /// Whether the request's deadline passed at `now`: for a streamed body, `requestTimeout`
    /// after the last bytes arrived, so an upload that keeps arriving is never cut (the minimum
    /// data rate of `HeadDeadlines` bounds a slow one). Nil deadline: due at once.
    func isDue(at now: Int64) -> Bool {
        deadline == 0 || deadline + deadlineExtension.load(ordering: .relaxed) <= now
    }

    /// Sets the deadline `requestTimeout` from now.
    func startDeadline() {
        deadline = EventLoop.now() + requestTimeout
    }

    /// Body bytes arrived (loop thread): a set deadline moves to `requestTimeout` from now.
    func bodyProgressed() {
        guard deadline != 0 else { return }
        deadlineExtension.store(EventLoop.now() + requestTimeout - deadline, ordering: .relaxed)
    }

    init(target: String, connection: OpaquePointer?, daemon: LoopDaemon, connectionEntry: HeadDeadlines.Entry?) {
        self.target = target
        self.daemon = daemon
        self.connection = connection
        self.connectionEntry = connectionEntry
    }

    func enqueue(_ job: consuming ExecutorJob) {
        if startsInline {
            startsInline = false
            job.runSynchronously(on: asUnownedTaskExecutor())
        } else {
            globalConcurrentExecutor.enqueue(job)
        }
    }
}

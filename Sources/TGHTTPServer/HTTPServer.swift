import CMicroHTTPD
import CMicroHTTPDShims
import HTTPTypes
import Synchronization
import TGBase
public import TGEventLoop

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 server on libmicrohttpd: one daemon in external mode per event loop (each loop a
/// thread with its own epoll set, see ``EventLoop``), so a request is served on one thread from
/// its first byte to its last, and loops never wait on a handler.
///
/// The handler is called on a loop once the request body is complete (or, for a request whose
/// ``RequestLimits/streamsBody`` is set, once the head arrived). It answers at once with
/// ``Reply/response(_:)`` (for work that needs no I/O, the fastest path) or hands over an async
/// function with ``Reply/async(_:)``: the connection is then suspended while the function runs,
/// and resumed on its loop when it answers. The async function's first part runs inline, so if
/// it finishes without really suspending the answer goes out without any thread hop.
public final class HTTPServer: @unchecked Sendable {
    // Invariants:
    // - `daemons`, `ownedLoops`, `started` and `boundPort` change only inside `start()`/`shutdown()`,
    //   under `lifecycleLock`; the C callbacks only read `handler`, `configuration`, `deadlines`,
    //   `locks` and the atomics, which are immutable or thread-safe.
    // - Every daemon is stopped before `self` can be freed (shutdown or deinit), and each
    //   ``LoopDaemon`` (the callbacks' context) holds `self` unowned.

    /// What the handler decides for a request.
    public enum Reply: Sendable {
        /// The answer, computed without I/O on the event-loop thread.
        case response(ServerResponse)
        /// An async function that produces the answer; the connection waits, suspended.
        case async(@Sendable (ServerRequest) async -> ServerResponse)
        /// Work that goes on from the connection's event loop: its `start` runs at once, on the
        /// loop, with the responder to answer through (once, from any thread; from the loop
        /// it costs no hop). Until then the connection waits, suspended, under the request's
        /// deadline. The work is an object (a route's call), not a closure around it: no
        /// context to allocate per request.
        case deferred(any DeferredReply)

        /// A ``deferred(_:)`` reply whose work is a closure.
        public static func deferred(_ start: @escaping @Sendable (LoopResponder) -> Void) -> Reply {
            .deferred(DeferredClosure(start: start))
        }
    }

    private struct DeferredClosure: DeferredReply {
        let start: @Sendable (LoopResponder) -> Void
        func start(_ responder: consuming LoopResponder) { start(responder) }
    }

    /// Called on an event-loop thread with the complete request. It must not block.
    public typealias Handler = @Sendable (ServerRequest) -> Reply

    public let configuration: Configuration
    let handler: Handler
    let uploadPauses = Atomic<Int>(0)
    let locks: [Lock] = (0..<64).map { _ in Lock() }
    /// Connections whose next request head is still arriving (for ``Configuration/requestHeadTimeout``).
    let heads = HeadDeadlines()
    /// Open connections per client address (nil: no per-IP limit).
    let perIP: ConnectionsPerIP?
    /// Connections closed at once for passing the per-IP limit. A counter for metrics and tests.
    let perIPRefusals = Atomic<Int>(0)
    /// Runs the head deadlines' checks (request deadlines are each loop's: ``LoopDaemon/deadlines``).
    private let ticker: Ticker
    private let lifecycleLock = Lock()
    private var daemons: [LoopDaemon] = []
    /// Every daemon started, kept after shutdown for their counters.
    private var startedDaemons: [LoopDaemon] = []
    /// Loops the server made itself (none when given a group), stopped with it.
    private var ownedLoops: EventLoopGroup?
    private let givenLoops: EventLoopGroup?
    private let stopsGivenLoops: Bool
    private var started = false
    private var boundPort: UInt16 = 0

    /// A server on `loops` (shared with whatever else runs on them, such as HTTP clients; with
    /// `stopsLoops` they stop after the server's shutdown), or on `configuration.threads` loops
    /// of its own.
    public init(configuration: Configuration, loops: EventLoopGroup? = nil, stopsLoops: Bool = false, handler: @escaping Handler) {
        self.configuration = configuration
        self.handler = handler
        self.givenLoops = loops
        self.stopsGivenLoops = stopsLoops
        if stopsLoops { ownedLoops = loops }
        self.perIP =
            configuration.perIPConnectionLimit > 0
            ? ConnectionsPerIP(
                limit: configuration.perIPConnectionLimit,
                ipv6PrefixLength: configuration.perIPConnectionIPv6PrefixLength
            ) : nil
        let heads = self.heads
        let headTimeout = configuration.requestHeadTimeout
        let minBodyRate = configuration.minBodyRate
        ticker = Ticker {
            if let headTimeout { heads.expire(timeout: headTimeout) }
            if let minBodyRate { heads.expireSlowBodies(bytesPerSecond: minBodyRate.bytesPerSecond, window: minBodyRate.window) }
        }
    }

    deinit {
        stopDaemonsNow(daemons)
        ownedLoops?.stop()
        ticker.stop()
    }

    /// The port the server listens on (the real one when configured with port 0).
    public var port: UInt16 { lifecycleLock.withLock { boundPort } }

    /// Requests between their request line and their completion, deferred or not.
    public var requestsInFlight: Int { Self.inFlight(lifecycleLock.withLock { startedDaemons }) }

    /// Connections closed as they opened because their address had too many open already.
    public var perIPRefusedCount: Int { perIPRefusals.load(ordering: .relaxed) }

    /// Requests whose connection had to be suspended while an async handler worked (the others
    /// were answered inline). A counter for metrics and tests.
    public var suspendedRequestCount: Int {
        lifecycleLock.withLock { startedDaemons }.reduce(0) { $0 + $1.suspensions.load(ordering: .relaxed) }
    }

    /// Suspended requests waiting for their answer under a deadline, on all loops now. For
    /// metrics and tests.
    public func requestsUnderDeadline() async -> Int {
        await Self.waiting(lifecycleLock.withLock { daemons })
    }

    /// Requests still waiting under their deadline on `daemons`' loops.
    private static func waiting(_ daemons: [LoopDaemon]) async -> Int {
        var total = 0
        for loopDaemon in daemons { total += await loopDaemon.loop.run { loopDaemon.deadlines.count } }
        return total
    }

    private static func inFlight(_ daemons: [LoopDaemon]) -> Int {
        daemons.reduce(0) { $0 + $1.inFlight.load(ordering: .acquiring) }
    }

    /// How often a streamed request body filled its buffer, so its connection was suspended
    /// until the reader caught up (back-pressure). A counter for metrics and tests.
    public var uploadPauseCount: Int { uploadPauses.load(ordering: .relaxed) }

    /// Binds (one listening socket per loop, `SO_REUSEPORT`) and starts a daemon on every loop.
    public func start() throws {
        try lifecycleLock.withLock {
            guard !started else { throw HTTPServerError.alreadyStarted }
            let group = givenLoops ?? EventLoopGroup(count: configuration.threads)
            if givenLoops == nil { ownedLoops = group }
            let sockets = try ListenSockets.bind(host: configuration.host, port: configuration.port, count: group.loops.count)
            var flags = UInt32(MHD_USE_EPOLL.rawValue) | UInt32(MHD_ALLOW_SUSPEND_RESUME.rawValue)
            flags |= UInt32(MHD_USE_TURBO.rawValue) | UInt32(MHD_USE_ERROR_LOG.rawValue)
            if sockets.family == AF_INET6 { flags |= UInt32(MHD_USE_IPv6.rawValue) }
            if configuration.allowsUpgrade { flags |= UInt32(MHD_ALLOW_UPGRADE.rawValue) }
            var made: [LoopDaemon] = []
            for (loop, socket) in zip(group.loops, sockets.descriptors) {
                let loopDaemon = LoopDaemon(server: self, loop: loop)
                let context = Unmanaged.passUnretained(loopDaemon).toOpaque()
                var options = options(socket: socket, context: context, logTarget: loopDaemon.logTarget, loops: group.loops.count)
                guard let daemon = CShims_MHD_start_daemon(flags, 0, nil, nil, accessHandler, context, &options) else {
                    let failure = errno
                    for descriptor in sockets.descriptors { close(descriptor) }
                    stopDaemonsNow(made)
                    throw HTTPServerError.startFailed(errno: failure)
                }
                loopDaemon.started(daemon)
                made.append(loopDaemon)
            }
            for loopDaemon in made { loopDaemon.loop.execute { loopDaemon.attach() } }
            daemons = made
            startedDaemons += made
            boundPort = sockets.port
            started = true
            ticker.start()
        }
    }

    /// Stops accepting, lets in-flight requests finish (up to the drain timeout, after which
    /// deferred ones are answered 503 and streams still running are cut), then stops the daemons:
    /// never with a suspended connection. Idempotent.
    public func shutdown() async {
        let stopping = lifecycleLock.withLock { () -> [LoopDaemon] in
            let current = daemons
            daemons = []
            return current
        }
        guard !stopping.isEmpty else { return }
        for loopDaemon in stopping {
            await loopDaemon.loop.run {
                let socket = loopDaemon.quiesce()
                if socket >= 0 { close(socket) }
            }
        }
        let clock = ContinuousClock()
        let giveUp = clock.now.advanced(by: configuration.drainTimeout)
        while Self.inFlight(stopping) > 0, clock.now < giveUp {
            try? await Task.sleep(for: .milliseconds(5))
        }
        if Self.inFlight(stopping) > 0 {
            for loopDaemon in stopping { await loopDaemon.loop.run { loopDaemon.deadlines.expireAll() } }
            let last = clock.now.advanced(by: .seconds(1))
            while await Self.waiting(stopping) > 0 || Self.inFlight(stopping) > 0, clock.now < last {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        var forced = 0
        for loopDaemon in stopping {
            forced += await loopDaemon.loop.run { loopDaemon.stop() }
        }
        if forced > 0, let sink = configuration.diagnosticsSink {
            sink("closed \(forced) connection(s) still streaming at the end of the drain")
        }
        ticker.stop()
        let owned = lifecycleLock.withLock { () -> EventLoopGroup? in
            defer { ownedLoops = nil }
            return ownedLoops
        }
        if let owned { await Task.detached { owned.stop() }.value }
    }

    /// Stops daemons from a thread that is not one of their loops, waiting for each (deinit and a
    /// failed start).
    private func stopDaemonsNow(_ stopping: [LoopDaemon]) {
        for loopDaemon in stopping {
            if loopDaemon.loop.inEventLoop {
                loopDaemon.stop()
                continue
            }
            let done = OneShotSignal()
            let accepted = loopDaemon.loop.execute {
                let socket = loopDaemon.quiesce()
                if socket >= 0 { close(socket) }
                loopDaemon.stop()
                done.signal()
            }
            if accepted { done.wait() }
        }
    }

    /// The lock guarding one request's bridge state (striped, so requests allocate none).
    func lock(for context: RequestContext) -> Lock {
        // Objects are 16-byte aligned and a context is a few hundred bytes: bits above 6 spread well.
        locks[Int(bitPattern: UInt(bitPattern: Unmanaged.passUnretained(context).toOpaque()) >> 6) & 63]
    }

    static let timeoutResponse = ServerResponse(
        status: .serviceUnavailable,
        contentType: "application/problem+json",
        body: #"{"type":"about:blank","title":"Request timed out","status":503,"code":"request_timeout"}"#,
        headerFields: [.retryAfter: "1"]
    )

    private func options(
        socket: Int32,
        context: UnsafeMutableRawPointer,
        logTarget: UnsafeMutablePointer<CShims_MHD_LogTarget>,
        loops: Int
    ) -> [MHD_OptionItem] {
        func item(_ option: MHD_OPTION, _ value: Int, _ pointer: UnsafeMutableRawPointer? = nil) -> MHD_OptionItem {
            MHD_OptionItem(option: option, value: value, ptr_value: pointer)
        }
        let uriLog = unsafeBitCast(uriLogCallback, to: Int.self)
        let completed = unsafeBitCast(requestCompletedCallback, to: Int.self)
        let connections = unsafeBitCast(connectionNotifyCallback, to: Int.self)
        logTarget.initialize(to: CShims_MHD_LogTarget(sink: diagnosticsCallback, context: context))
        let logger = CShims_MHD_log_adapter_address()
        // The connection limit is the whole server's: each loop takes its share.
        let perLoop = (max(1, configuration.connectionLimit) + loops - 1) / loops
        var items: [MHD_OptionItem] = [
            item(.LISTEN_SOCKET, Int(socket)),
            item(.CONNECTION_LIMIT, perLoop),
            item(.CONNECTION_TIMEOUT, max(0, configuration.connectionTimeoutSeconds)),
            item(.CONNECTION_MEMORY_LIMIT, connectionMemory),
            item(.URI_LOG_CALLBACK, uriLog, context),
            item(.NOTIFY_COMPLETED, completed, context),
            item(.EXTERNAL_LOGGER, logger, UnsafeMutableRawPointer(logTarget)),
        ]
        // Without deadlines or a per-IP limit, connections are not registered at all (no cost).
        if configuration.requestHeadTimeout != nil || configuration.minBodyRate != nil || perIP != nil {
            items.append(item(.NOTIFY_CONNECTION, connections, context))
        }
        items.append(item(.END, 0))
        return items
    }
}

/// The work of a ``HTTPServer/Reply/deferred(_:)`` reply.
public protocol DeferredReply: Sendable {
    /// Runs at once, on the connection's loop, with the responder to answer through (given, not
    /// lent: a conformance that keeps it takes it without a copy).
    func start(_ responder: consuming LoopResponder)
}

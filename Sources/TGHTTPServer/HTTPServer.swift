import CMicroHTTPD
import CShims
import HTTPTypes
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 server on libmicrohttpd: epoll event-loop threads that never wait on a handler.
///
/// The handler is called on an event-loop thread once the request body is complete (or, for a
/// request whose ``RequestLimits/streamsBody`` is set, once the head arrived). It answers at
/// once with ``Reply/response(_:)`` (for work that needs no I/O, the fastest path) or hands over
/// an async function with ``Reply/async(_:)``: the connection is then suspended while the function
/// runs, and resumed when it answers. The async function's first part runs inline, so if it
/// finishes without really suspending the answer goes out without any thread hop.
public final class HTTPServer: @unchecked Sendable {
    // Invariants:
    // - `daemon`, `listenSocket` and `started` change only inside `start()`/`shutdown()`, under
    //   `lifecycleLock`; the C callbacks only read `handler`, `configuration`, `deadlines`,
    //   `locks` and `inFlight`, which are immutable or thread-safe.
    // - The daemon is stopped before `self` can be freed (shutdown or deinit), so the unretained
    //   `self` handed to libmicrohttpd as callback context is valid in every callback.

    /// What the handler decides for a request.
    public enum Reply: Sendable {
        /// The answer, computed without I/O on the event-loop thread.
        case response(ServerResponse)
        /// An async function that produces the answer; the connection waits, suspended.
        case async(@Sendable (ServerRequest) async -> ServerResponse)
    }

    /// Called on an event-loop thread with the complete request. It must not block.
    public typealias Handler = @Sendable (ServerRequest) -> Reply

    public let configuration: Configuration
    let handler: Handler
    let inFlight = Atomic<Int>(0)
    let suspensions = Atomic<Int>(0)
    let uploadPauses = Atomic<Int>(0)
    let locks: [Lock] = (0..<64).map { _ in Lock() }
    /// Connections whose next request head is still arriving (for ``Configuration/requestHeadTimeout``).
    let heads = HeadDeadlines()
    private(set) var deadlines: DeadlineWatcher!
    private let lifecycleLock = Lock()
    private var daemon: OpaquePointer?
    private var listenSocket: Int32 = -1
    private var started = false
    private var boundPort: UInt16 = 0
    private let logTarget = UnsafeMutablePointer<CShims_MHD_LogTarget>.allocate(capacity: 1)

    public init(configuration: Configuration, handler: @escaping Handler) {
        self.configuration = configuration
        self.handler = handler
        self.deadlines = nil
        let heads = self.heads
        let headTimeout = configuration.requestHeadTimeout
        self.deadlines = DeadlineWatcher(
            tick: { _ in
                if let headTimeout { heads.expire(timeout: headTimeout) }
            },
            expire: { [unowned self] context in
                self.complete(context, with: Self.timeoutResponse, bodyError: .requestTimedOut)
            }
        )
    }

    deinit {
        if let daemon { MHD_stop_daemon(daemon) }
        deadlines.stop()
        logTarget.deallocate()
    }

    /// The port the server listens on (the real one when configured with port 0).
    public var port: UInt16 { lifecycleLock.withLock { boundPort } }

    /// Requests between their request line and their completion, deferred or not.
    public var requestsInFlight: Int { inFlight.load(ordering: .relaxed) }

    /// Requests whose connection had to be suspended while an async handler worked (the others
    /// were answered inline). A counter for metrics and tests.
    public var suspendedRequestCount: Int { suspensions.load(ordering: .relaxed) }

    /// How often a streamed request body filled its buffer, so its connection was suspended
    /// until the reader caught up (back-pressure). A counter for metrics and tests.
    public var uploadPauseCount: Int { uploadPauses.load(ordering: .relaxed) }

    /// Binds and starts the event-loop threads.
    public func start() throws {
        try lifecycleLock.withLock {
            guard !started else { throw HTTPServerError.alreadyStarted }
            var storage = sockaddr_storage()
            let addressFamily = try Self.fill(&storage, host: configuration.host, port: configuration.port)
            var flags = UInt32(MHD_USE_EPOLL_INTERNAL_THREAD.rawValue) | UInt32(MHD_ALLOW_SUSPEND_RESUME.rawValue)
            flags |= UInt32(MHD_USE_TURBO.rawValue) | UInt32(MHD_USE_ERROR_LOG.rawValue)
            if addressFamily == AF_INET6 { flags |= UInt32(MHD_USE_IPv6.rawValue) }
            let context = Unmanaged.passUnretained(self).toOpaque()
            let started: OpaquePointer? = withUnsafeMutablePointer(to: &storage) { address in
                var options = options(address: UnsafeMutableRawPointer(address), context: context)
                return CShims_MHD_start_daemon(flags, 0, nil, nil, accessHandler, context, &options)
            }
            guard let started else { throw HTTPServerError.startFailed(errno: errno) }
            daemon = started
            boundPort = CShims_MHD_bound_port(started)
            self.started = true
            deadlines.start()
        }
    }

    /// Stops accepting, lets in-flight requests finish (up to the drain timeout, after which
    /// deferred ones are answered 503), then stops the threads. Idempotent.
    public func shutdown() async {
        guard
            let daemon = lifecycleLock.withLock({ () -> OpaquePointer? in
                let current = self.daemon
                self.daemon = nil
                return current
            })
        else { return }
        listenSocket = MHD_quiesce_daemon(daemon)
        let clock = ContinuousClock()
        let giveUp = clock.now.advanced(by: configuration.drainTimeout)
        while inFlight.load(ordering: .acquiring) > 0, clock.now < giveUp {
            try? await Task.sleep(for: .milliseconds(5))
        }
        if inFlight.load(ordering: .acquiring) > 0 {
            deadlines.expireAll()
            let last = clock.now.advanced(by: .seconds(1))
            while deadlines.count > 0 || inFlight.load(ordering: .acquiring) > 0, clock.now < last {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        MHD_stop_daemon(daemon)
        if listenSocket >= 0 { close(listenSocket) }
        deadlines.stop()
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

    private func options(address: UnsafeMutableRawPointer, context: UnsafeMutableRawPointer) -> [MHD_OptionItem] {
        func item(_ option: MHD_OPTION, _ value: Int, _ pointer: UnsafeMutableRawPointer? = nil) -> MHD_OptionItem {
            MHD_OptionItem(option: option, value: value, ptr_value: pointer)
        }
        let uriLog = unsafeBitCast(uriLogCallback, to: Int.self)
        let completed = unsafeBitCast(requestCompletedCallback, to: Int.self)
        let connections = unsafeBitCast(connectionNotifyCallback, to: Int.self)
        logTarget.initialize(to: CShims_MHD_LogTarget(sink: diagnosticsCallback, context: context))
        let logger = CShims_MHD_log_adapter_address()
        var items: [MHD_OptionItem] = [
            item(.SOCK_ADDR, 0, address),
            item(.THREAD_POOL_SIZE, max(1, configuration.threads)),
            item(.CONNECTION_LIMIT, max(1, configuration.connectionLimit)),
            item(.CONNECTION_TIMEOUT, max(0, configuration.connectionTimeoutSeconds)),
            item(.CONNECTION_MEMORY_LIMIT, max(8 * 1024, configuration.connectionMemoryLimit)),
            item(.LISTENING_ADDRESS_REUSE, 1),
            item(.URI_LOG_CALLBACK, uriLog, context),
            item(.NOTIFY_COMPLETED, completed, context),
            item(.EXTERNAL_LOGGER, logger, UnsafeMutableRawPointer(logTarget)),
        ]
        // Without a head deadline, connections are not registered at all (no per-request cost).
        if configuration.requestHeadTimeout != nil {
            items.append(item(.NOTIFY_CONNECTION, connections, context))
        }
        if configuration.perIPConnectionLimit > 0 {
            items.append(item(.PER_IP_CONNECTION_LIMIT, configuration.perIPConnectionLimit))
        }
        items.append(item(.END, 0))
        return items
    }

    private static func fill(_ storage: inout sockaddr_storage, host: String, port: UInt16) throws -> Int32 {
        try withUnsafeMutableBytes(of: &storage) { raw in
            let v4 = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
            if inet_pton(AF_INET, host, &v4.pointee.sin_addr) == 1 {
                v4.pointee.sin_family = sa_family_t(AF_INET)
                v4.pointee.sin_port = port.bigEndian
                return AF_INET
            }
            let v6 = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
            if inet_pton(AF_INET6, host, &v6.pointee.sin6_addr) == 1 {
                v6.pointee.sin6_family = sa_family_t(AF_INET6)
                v6.pointee.sin6_port = port.bigEndian
                return AF_INET6
            }
            throw HTTPServerError.invalidAddress
        }
    }
}

import CCurl
import CCurlShims
import Foundation
public import HTTPTypes
import Synchronization
import TGBase
public import TGEventLoop

/// An HTTP client on libcurl's multi interface, driven by one event loop
/// (`curl_multi_socket_action` on the loop's epoll set): every transfer's sockets and timeouts
/// are the loop's, so any number of requests wait on the network without holding a thread each,
/// and a client on the loop of an HTTP server's connection serves it without a thread hop.
///
/// Safe by default: only http and https; TLS always verified (there is no switch to turn it off);
/// plain http only to a loopback host and only with ``Configuration/allowPlainHTTPToLoopbackForTesting``;
/// redirects not followed unless asked; every request has a deadline; response bodies have a size
/// limit.
public final class HTTPClient: @unchecked Sendable {
    // Invariants: `multi` is used only on the event thread, except `curl_multi_wakeup`, which libcurl
    // documents as callable from any thread. `stopping` is atomic. `active`, `sockets`,
    // `curlDeadline`, `headTimer`, `timeoutDue` and `lastLoopOrigin` are only touched on the event
    // thread.
    public struct Configuration: Sendable {
        /// Connections at most per host (0: no limit).
        public var maxConnectionsPerHost = 32
        /// Connections at most in total (0: no limit).
        public var maxConnections = 256
        public var connectTimeout: Duration = .seconds(10)
        /// Largest buffered response body, unless a request says otherwise.
        public var maxResponseBodySize = 10 << 20
        /// Follow 3xx responses (only to http/https). Default: return them as they are.
        public var followRedirects = false
        /// An extra CA bundle (PEM) trusted besides the system's, for test servers.
        public var caFile: String?
        /// Allows `http://` to 127.0.0.0/8, ::1 and localhost, for tests and local development
        /// only. Plain HTTP to any other host is always refused.
        public var allowPlainHTTPToLoopbackForTesting = false
        /// Origins kept parsed (see ``Origins``); tests set 0 to take the per-transfer parse.
        var originCapacity = 16
        /// A request started on the loop while this many transfers or more are in flight there
        /// reads its response in pieces of ``EasyHandlePool/compactReadBufferSize`` bytes instead
        /// of libcurl's 16 KiB (see ``EasyHandlePool``): memory per call under a burst, against
        /// more reads for a large body. 0: every call on the loop reads compact.
        public var compactReadsAbove = 256

        public init() {}
    }

    enum Command {
        case add(Transfer)
        case cancel(Transfer)
        case resume(Transfer)
    }

    public let configuration: Configuration
    /// The loop every transfer of this client runs on.
    public let loop: EventLoop
    /// The loop this client made for itself (none when given one), stopped with it.
    private let ownLoop: EventLoop?
    let multi: OpaquePointer
    /// Set once by `shutdown`; read by every submission (an atomic: a lock per call cost ~60
    /// instructions, and only the flag itself is shared).
    private let stopping = Atomic<Bool>(false)
    /// The transfers in the multi handle, each at its ``Transfer/activeIndex`` (no hashing per
    /// call: a transfer knows its place).
    private var active: [Transfer] = []
    /// How many transfers are in the multi handle (event thread).
    var transfersInFlight: Int { active.count }
    /// When libcurl wants its timeout acted on (``EventLoop/now()``'s clock), if it does: set by
    /// its timer callback, acted on by ``beforeWait()``.
    var curlDeadline: Int64?
    /// Fires at the earliest head deadline of the transfers in flight (see `watchHead`).
    private var headTimer: EventLoopTimer?
    /// Every upstream socket in the loop's epoll set, watched or parked (see `HTTPClient+Sockets`).
    var sockets: [WordKey: CurlSocket] = [:]
    var timeoutDue = false
    private var hookToken = 0
    let handles: EasyHandlePool
    /// See `validatedURL`: an authority already found to be loopback.
    let lastLoopbackAuthority = Mutex<String?>(nil)
    /// See `validatedURL`: the origins requests went to, parsed once.
    let origins: Origins
    /// The origin (scheme and authority) the last request started on the loop went to, checked,
    /// with its URL; loop thread only (see `prepare(_:_:body:timeout:)` for ``LoopRequest``).
    var lastLoopOrigin: LoopOrigin?
    /// The fewest connections a transfer may be held back by (either limit; 0 is no limit): with
    /// no more transfers in flight, none waits for a connection slot.
    private let slotLimit: Int

    /// A client on `loop` (shared with an HTTP server, say), or on a loop of its own.
    public init(configuration: Configuration = Configuration(), loop: EventLoop? = nil) {
        HTTPClient.initializeLibcurl
        self.configuration = configuration
        origins = Origins(capacity: configuration.originCapacity)
        handles = EasyHandlePool(capacity: max(8, configuration.maxConnections))
        let perHost = configuration.maxConnectionsPerHost > 0 ? configuration.maxConnectionsPerHost : Int.max
        slotLimit = min(perHost, configuration.maxConnections > 0 ? configuration.maxConnections : Int.max)
        multi = curl_multi_init()!
        _ = CShims_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
        _ = CShims_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxConnections)
        _ = CShims_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(configuration.maxConnections, 8))
        if let loop {
            self.loop = loop
            ownLoop = nil
        } else {
            let own = EventLoop()
            own.start()
            self.loop = own
            ownLoop = own
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = CShims_curl_multi_setopt_socket_function(multi, socketCallback)
        _ = CShims_curl_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, context)
        _ = CShims_curl_multi_setopt_timer_function(multi, timerCallback)
        _ = CShims_curl_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, context)
        if self.loop.inEventLoop {
            // Made on its loop (an ``UpstreamTunnel``'s): the hook goes in now. A job posted for it
            // could run after a client that failed at once was gone.
            hookToken = self.loop.addPreWaitHook { [unowned(unsafe) self] in self.beforeWait() }
            return
        }
        let hooked = OneShot()
        let context2 = UnmanagedClient(client: Unmanaged.passUnretained(self))
        let accepted = self.loop.execute {
            let client = context2.client.takeUnretainedValue()
            // Not weak (see `CurlSocket.client`): the client may be in its deinit meanwhile, but that
            // waits for `stopOnLoop`, which removes the hook on the loop.
            client.hookToken = client.loop.addPreWaitHook { [unowned(unsafe) client] in client.beforeWait() }
            hooked.signal()
        }
        // The hook must be in place before the first transfer is added (it starts transfers).
        if accepted { hooked.wait() }
    }

    deinit {
        shutdown()
    }

    /// `curl_global_init` once per process, before any handle; SIGPIPE ignored (a closed peer
    /// must not kill the process).
    private static let initializeLibcurl: Void = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        signal(SIGPIPE, SIG_IGN)
    }()

    /// Fails every request in flight with ``HTTPClientError/shutDown`` and releases libcurl's
    /// handles (on the loop). Idempotent. Not from the loop's thread unless the loop is shared.
    public func shutdown() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let done = OneShot()
        let context = UnmanagedClient(client: Unmanaged.passUnretained(self))
        let stopAll: @Sendable () -> Void = {
            context.client.takeUnretainedValue().stopOnLoop()
            done.signal()
        }
        if loop.inEventLoop {
            stopAll()
        } else if loop.execute(stopAll) {
            done.wait()
        } else {
            // The loop has stopped (its owner shut it down first): nothing runs there any more.
            stopAll()
        }
        ownLoop?.stop()
    }

    /// Sends a request and returns the whole response (body at most `maxResponseBodySize`).
    public func send(
        _ request: HTTPRequest,
        body: [UInt8]? = nil,
        timeout: Duration,
        maxResponseBodySize: Int? = nil
    ) async throws -> HTTPClientResponse {
        let transfer = try Transfer(bufferLimit: maxResponseBodySize ?? configuration.maxResponseBodySize, handles: handles)
        try prepare(transfer, request, body: body.map { .bytes($0) } ?? .none, timeout: timeout)
        let (head, body) = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.awaitCompletion(continuation)
                submit(.add(transfer))
            }
        } onCancel: {
            self.cancel(transfer)
        }
        return HTTPClientResponse(head: head.parse(), body: body)
    }

    func cancel(_ transfer: Transfer) {
        if transfer.requestCancel() { submit(.cancel(transfer)) }
    }

    func submit(_ command: Command) {
        guard !stopping.load(ordering: .acquiring) else {
            if case .add(let transfer) = command { transfer.fail(.shutDown) }
            return
        }
        if loop.inEventLoop {
            apply(command)
        } else {
            let unmanaged = UnmanagedClient(client: Unmanaged.passRetained(self))
            let box = CommandBox(command: command)
            let accepted = loop.execute {
                let client = unmanaged.client.takeRetainedValue()
                if client.stopping.load(ordering: .acquiring) {
                    if case .add(let transfer) = box.command { transfer.fail(.shutDown) }
                    return
                }
                client.apply(box.command)
            }
            if !accepted {
                unmanaged.client.release()
                if case .add(let transfer) = command { transfer.fail(.shutDown) }
            }
        }
    }

    // MARK: On the loop

    /// Before the loop sleeps: act on libcurl's timeout if it is due (it asked for a zero one: a
    /// transfer added, a connection slot freed; or its deadline passed), and tell the loop how
    /// long it may sleep before the deadline.
    private func beforeWait() -> Int64? {
        var rounds = 0
        while rounds < 8 {
            if !timeoutDue {
                // libcurl's deadline, if one is set and due.
                guard let deadline = curlDeadline else { return nil }
                let left = deadline - EventLoop.now()
                guard left <= 0 else { return left }
                curlDeadline = nil
            }
            timeoutDue = false
            act(socket: -1, events: 0)
            rounds += 1
        }
        return 0
    }

    /// `curl_multi_socket_action` for a socket (or the timeout, -1), then completes what finished.
    func act(socket: Int32, events: Int32) {
        var running: Int32 = 0
        curl_multi_socket_action(multi, socket, events, &running)
        // libcurl 7.88 can leave a transfer that waited for a connection slot until its next
        // timeout; acting on the timeout after harvesting starts it now (docs/c-libraries.md).
        // Only when one can have waited: more transfers in flight than the smaller limit allows
        // connections (otherwise every one had a connection, and the extra round cost each call
        // another `curl_multi_socket_action`).
        let inFlight = active.count
        if harvest(), inFlight > slotLimit {
            timeoutDue = true
            loop.wakeSoon()
        }
    }

    /// On the loop: the client no longer runs before every wait of its loop. For a client whose
    /// transfers are over but whose connection lives on (``UpstreamTunnel``): thousands of open
    /// tunnels would otherwise each add a call to every round of the loop. Its shutdown still
    /// releases everything.
    func stopDriving() {
        loop.removePreWaitHook(hookToken)
        curlDeadline = nil
        timeoutDue = false
    }

    /// On the loop: resume a transfer paused for its reader.
    func resumeOnLoop(_ transfer: Transfer) {
        apply(.resume(transfer))
    }

    /// On the loop: stop a transfer; its exchange hears `error`.
    func cancelOnLoop(_ transfer: Transfer, error: HTTPClientError = .cancelled) {
        guard deactivate(transfer) else { return }
        curl_multi_remove_handle(multi, transfer.easy)
        transfer.finish(CURLE_ABORTED_BY_CALLBACK, error: error)
        Unmanaged.passUnretained(transfer).release()
    }

    private func stopOnLoop() {
        let remaining = active
        active.removeAll()
        for transfer in remaining { transfer.activeIndex = -1 }
        for transfer in remaining {
            transfer.idle?.stop()
            transfer.idle = nil
            curl_multi_remove_handle(multi, transfer.easy)
            transfer.fail(.shutDown)
            Unmanaged.passUnretained(transfer).release()
        }
        curlDeadline = nil
        headTimer?.cancel()
        headTimer = nil
        timeoutDue = false
        curl_multi_cleanup(multi)
        loop.removePreWaitHook(hookToken)
    }

    private func apply(_ command: Command) {
        switch command {
        case .add(let transfer):
            if transfer.isCancelRequested {
                transfer.fail(.cancelled)
                return
            }
            _ = Unmanaged.passRetained(transfer)
            transfer.activeIndex = active.count
            active.append(transfer)
            if transfer.idleTimeout > 0 {
                transfer.idle = IdleDeadline(
                    timeout: transfer.idleTimeout,
                    on: loop,
                    isPaused: { [weak transfer] in transfer.map { $0.pausedForWrite || $0.pausedForRead } ?? false },
                    // The client unowned (see `CurlSocket.client`): the deadline stops when the
                    // transfer ends, and `stopOnLoop` ends them all.
                    expire: { [unowned(unsafe) self, weak transfer] in
                        if let transfer { self.cancelOnLoop(transfer, error: .timeout) }
                    }
                )
            }
            curl_multi_add_handle(multi, transfer.easy)
        case .cancel(let transfer):
            guard deactivate(transfer) else { return }
            curl_multi_remove_handle(multi, transfer.easy)
            transfer.finish(CURLE_ABORTED_BY_CALLBACK)
            Unmanaged.passUnretained(transfer).release()
        case .resume(let transfer):
            guard transfer.activeIndex >= 0, transfer.pausedForWrite || transfer.pausedForRead else { return }
            transfer.pausedForWrite = false
            transfer.pausedForRead = false
            curl_easy_pause(transfer.easy, curlPauseContinue)
        }
    }

    /// On the loop: the head of `transfer`, about to be added, is due at `deadline`. One timer
    /// watches every head (a timer per call cost an allocation and two moves in the loop's heap):
    /// it is set for the earliest deadline, which a client whose calls share a timeout only ever
    /// sets when it is not waiting already.
    func watchHead(of transfer: Transfer, until deadline: Int64) {
        transfer.headDeadline = deadline
        let timer: EventLoopTimer
        if let headTimer {
            timer = headTimer
        } else {
            // Unowned: `stopOnLoop` cancels the timer before the client can go.
            timer = loop.makeTimer { [unowned(unsafe) self] in self.expireLateHeads() }
            headTimer = timer
        }
        if !timer.isScheduled || deadline < timer.deadline { timer.schedule(at: deadline) }
    }

    /// Expires the transfers whose head is past its deadline, and sets the timer for the next.
    private func expireLateHeads() {
        let now = EventLoop.now()
        var next = Int64.max
        var late: [Transfer] = []
        for transfer in active where transfer.headDeadline != 0 {
            if transfer.headDeadline <= now {
                late.append(transfer)
            } else {
                next = min(next, transfer.headDeadline)
            }
        }
        if next != .max { headTimer?.schedule(at: next) }
        for transfer in late { (transfer as? LoopExchange)?.expire() }
    }

    /// Takes `transfer` out of ``active`` (the last one moves into its place); false if it was
    /// not there.
    @discardableResult
    private func deactivate(_ transfer: Transfer) -> Bool {
        let index = transfer.activeIndex
        guard index >= 0 else { return false }
        let last = active.removeLast()
        if index < active.count {
            active[index] = last
            last.activeIndex = index
        }
        transfer.activeIndex = -1
        return true
    }

    /// Completes finished transfers; true if any.
    private func harvest() -> Bool {
        var any = false
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let result = message.pointee.data.result
            var pointer: UnsafeMutableRawPointer?
            _ = CShims_curl_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &pointer)
            guard let pointer else {
                curl_multi_remove_handle(multi, easy)
                continue
            }
            let transfer = Unmanaged<Transfer>.fromOpaque(pointer).takeUnretainedValue()
            // A connection made for a tunnel stays in the multi handle (removing the handle closes
            // it); its owner removes it when done (``UpstreamTunnel``).
            if !(transfer.keepsConnection && result == CURLE_OK) { curl_multi_remove_handle(multi, easy) }
            deactivate(transfer)
            transfer.finish(result)
            Unmanaged.passUnretained(transfer).release()
            any = true
        }
        return any
    }
}

/// The client, unretained or retained by hand, carried into a loop job.
struct UnmanagedClient: @unchecked Sendable {
    let client: Unmanaged<HTTPClient>
}

/// A command carried into a loop job (its transfer is thread-safe where it is shared).
struct CommandBox: @unchecked Sendable {
    let command: HTTPClient.Command
}

/// A one-shot wake-up between two threads.
final class OneShot: @unchecked Sendable {
    // Invariant: `semaphore` is only used through DispatchSemaphore's thread-safe API.
    private let semaphore = DispatchSemaphore(value: 0)

    func signal() { semaphore.signal() }
    func wait() { semaphore.wait() }
}

/// `CURLPAUSE_CONT` is a macro expression (`CURLPAUSE_RECV_CONT|CURLPAUSE_SEND_CONT`, both 0) that
/// Swift does not import.
let curlPauseContinue: Int32 = 0

import CCurl
import CShims
import Foundation
public import HTTPTypes

/// An HTTP client on libcurl's multi interface: one event thread drives every transfer, so any
/// number of requests wait on the network without holding a thread each.
///
/// Safe by default: only http and https; TLS always verified (there is no switch to turn it off);
/// plain http only to a loopback host and only with ``Configuration/allowPlainHTTPToLoopbackForTesting``;
/// redirects not followed unless asked; every request has a deadline; response bodies have a size
/// limit.
public final class HTTPClient: @unchecked Sendable {
    // Invariants: `multi` is used only on the event thread, except `curl_multi_wakeup`, which libcurl
    // documents as callable from any thread. `commands` and `stopping` are only accessed with
    // `lock` held. `active` is only touched on the event thread.
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

        public init() {}
    }

    enum Command {
        case add(Transfer)
        case cancel(Transfer)
        case resume(Transfer)
    }

    public let configuration: Configuration
    private let multi: OpaquePointer
    private let lock = NSLock()
    private var commands: [Command] = []
    private var stopping = false
    private var active: [ObjectIdentifier: Transfer] = [:]
    private let stopped = DispatchSemaphore(value: 0)
    private let handles: EasyHandlePool

    public init(configuration: Configuration = Configuration()) {
        HTTPClient.initializeLibcurl
        self.configuration = configuration
        handles = EasyHandlePool(capacity: max(8, configuration.maxConnections))
        multi = curl_multi_init()!
        _ = CShims_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
        _ = CShims_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxConnections)
        _ = CShims_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(configuration.maxConnections, 8))
        let thread = Thread { [self] in self.eventLoop() }
        thread.name = "tokengate-http-client"
        thread.start()
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

    /// Fails every request in flight with ``HTTPClientError/shutDown`` and stops the event thread.
    /// Idempotent.
    public func shutdown() {
        let first = lock.withLock {
            let first = !stopping
            stopping = true
            return first
        }
        guard first else { return }
        curl_multi_wakeup(multi)
        stopped.wait()
        curl_multi_cleanup(multi)
    }

    /// Sends a request and returns the whole response (body at most `maxResponseBodySize`).
    public func send(
        _ request: HTTPRequest,
        body: [UInt8]? = nil,
        timeout: Duration,
        maxResponseBodySize: Int? = nil
    ) async throws -> HTTPClientResponse {
        let transfer = try Transfer(mode: .buffered(limit: maxResponseBodySize ?? configuration.maxResponseBodySize), handles: handles)
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

    /// Sends a request and returns as soon as the response head is in; the body follows as a
    /// stream with back-pressure (the transfer pauses while the consumer is behind). The whole
    /// exchange, body included, must finish within `timeout`.
    ///
    /// A response whose `Content-Length` is at most `wholeBodyUpTo` (capped at `bufferSize`) is
    /// returned only once its body is in: reading it then never waits, and the caller is woken
    /// once instead of twice.
    public func stream(
        _ request: HTTPRequest,
        body: HTTPClientRequestBody = .none,
        timeout: Duration,
        bufferSize: Int = 256 * 1024,
        wholeBodyUpTo: Int = 0
    ) async throws -> HTTPClientStreamingResponse {
        let channel = BodyChannel(highWater: bufferSize)
        let transfer = try Transfer(mode: .streaming(channel), handles: handles)
        transfer.holdHeadUpTo = min(wholeBodyUpTo, bufferSize)
        channel.onDrained = { [weak self, weak transfer] in
            if let transfer { self?.submit(.resume(transfer)) }
        }
        try prepare(transfer, request, body: body, timeout: timeout)
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.awaitHead(continuation)
                submit(.add(transfer))
            }
        } onCancel: {
            self.cancel(transfer)
        }
        return HTTPClientStreamingResponse(head: head.parse(), channel: channel, transfer: transfer, client: self)
    }

    func cancel(_ transfer: Transfer) {
        if transfer.requestCancel() { submit(.cancel(transfer)) }
    }

    func submit(_ command: Command) {
        let accepted = lock.withLock {
            guard !stopping else { return false }
            commands.append(command)
            return true
        }
        if accepted {
            curl_multi_wakeup(multi)
        } else if case .add(let transfer) = command {
            transfer.fail(.shutDown)
        }
    }

    // MARK: The event thread

    private func eventLoop() {
        var running: Int32 = 0
        while true {
            let (pending, stop) = lock.withLock {
                let pending = commands
                commands.removeAll()
                return (pending, stopping)
            }
            if stop { break }
            for command in pending { apply(command) }
            curl_multi_perform(multi, &running)
            // libcurl 7.88 can leave a transfer that waited for a connection slot until the next
            // poll times out; performing again after harvesting starts it now (CINTEROP.md).
            if harvest() { curl_multi_perform(multi, &running) }
            _ = harvest()
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        let remaining = Array(active.values)
        active.removeAll()
        for transfer in remaining {
            curl_multi_remove_handle(multi, transfer.easy)
            transfer.fail(.shutDown)
            Unmanaged.passUnretained(transfer).release()
        }
        for command in lock.withLock({ commands }) {
            if case .add(let transfer) = command { transfer.fail(.shutDown) }
        }
        stopped.signal()
    }

    private func apply(_ command: Command) {
        switch command {
        case .add(let transfer):
            if transfer.isCancelRequested {
                transfer.fail(.cancelled)
                return
            }
            _ = Unmanaged.passRetained(transfer)
            active[ObjectIdentifier(transfer)] = transfer
            curl_multi_add_handle(multi, transfer.easy)
        case .cancel(let transfer):
            guard active.removeValue(forKey: ObjectIdentifier(transfer)) != nil else { return }
            curl_multi_remove_handle(multi, transfer.easy)
            transfer.finish(CURLE_ABORTED_BY_CALLBACK)
            Unmanaged.passUnretained(transfer).release()
        case .resume(let transfer):
            guard active[ObjectIdentifier(transfer)] != nil, transfer.pausedForWrite || transfer.pausedForRead else { return }
            transfer.pausedForWrite = false
            transfer.pausedForRead = false
            curl_easy_pause(transfer.easy, curlPauseContinue)
        }
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
            curl_multi_remove_handle(multi, easy)
            guard let pointer else { continue }
            let transfer = Unmanaged<Transfer>.fromOpaque(pointer).takeUnretainedValue()
            active.removeValue(forKey: ObjectIdentifier(transfer))
            transfer.finish(result)
            Unmanaged.passUnretained(transfer).release()
            any = true
        }
        return any
    }
}

/// `CURLPAUSE_CONT` is a macro expression (`CURLPAUSE_RECV_CONT|CURLPAUSE_SEND_CONT`, both 0) that
/// Swift does not import.
let curlPauseContinue: Int32 = 0

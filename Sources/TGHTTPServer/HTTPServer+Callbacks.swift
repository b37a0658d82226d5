import CMicroHTTPD
import CMicroHTTPDShims
import HTTPTypes
import Synchronization
import TGBase
import TGEventLoop

#if canImport(Glibc)
import Glibc
#endif

// The C entry points libmicrohttpd calls. They live in a library file (not main.swift) so they are
// isolation-checked; each recovers the server from its context pointer.

/// Request line parsed: allocate the request's context (released when the request completes).
let uriLogCallback: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = {
    serverPointer,
    uri,
    connection in
    // The daemon borrowed (it outlives its callbacks), as in every callback below.
    Unmanaged<LoopDaemon>.fromOpaque(serverPointer!)._withUnsafeGuaranteedRef { daemon in
        daemon.inFlight.add(1, ordering: .relaxed)
        let entry = connection.flatMap { CShims_MHD_socket_context($0) }.map { Unmanaged<HeadDeadlines.Entry>.fromOpaque($0).takeUnretainedValue() }
        let context = RequestContext(target: uri.map { String(cString: $0) } ?? "/", connection: connection, daemon: daemon, connectionEntry: entry)
        return Unmanaged.passRetained(context).toOpaque()
    }
}

/// A connection opened or closed: its entry in the head-deadline registry lives exactly as long.
let connectionNotifyCallback:
    @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?, MHD_ConnectionNotificationCode) -> Void =
        {
            serverPointer,
            connection,
            socketContext,
            code in
            let server = Unmanaged<LoopDaemon>.fromOpaque(serverPointer!).takeUnretainedValue().server
            guard let socketContext else { return }
            switch code {
            case .CONNECTION_NOTIFY_STARTED:
                guard let connection else { return }
                let socket = CShims_MHD_connection_fd(connection)
                var counted: PeerAddress?
                let peer = PeerAddress(CShims_MHD_client_address(connection))
                let text = peer.text
                if let perIP = server.perIP {
                    if server.configuration.perIPConnectionLimitExempt?(text ?? "") != true {
                        counted = peer
                        if !perIP.opened(peer) {
                            // Over the limit: counted, then closed at once (libmicrohttpd sees the
                            // socket fail). Counted first: a client that sees its connection
                            // closed finds the refusal counted.
                            server.perIPRefusals.add(1, ordering: .relaxed)
                            shutdown(socket, shutBoth)
                        }
                    }
                }
                let address = text.map(PeerAddress.text) ?? .unknown
                let entry = HeadDeadlines.Entry(socket: socket, since: HeadDeadlines.now(), peer: counted, address: address)
                server.heads.opened(entry)
                socketContext.pointee = Unmanaged.passRetained(entry).toOpaque()
            default:
                guard let raw = socketContext.pointee else { return }
                socketContext.pointee = nil
                let entry = Unmanaged<HeadDeadlines.Entry>.fromOpaque(raw).takeRetainedValue()
                if let peer = entry.peer { server.perIP?.closed(peer) }
                server.heads.closed(entry)
            }
        }

/// Request finished (answered, failed or connection closed): release its context.
let requestCompletedCallback:
    @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?, MHD_RequestTerminationCode) -> Void = {
        serverPointer,
        _,
        contextSlot,
        _ in
        guard let contextSlot, let raw = contextSlot.pointee else { return }
        contextSlot.pointee = nil
        let context = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
        Unmanaged<LoopDaemon>.fromOpaque(serverPointer!)._withUnsafeGuaranteedRef { daemon in
            daemon.abandonUpgrade(of: raw)
            let server = daemon.server
            if let entry = context.connectionEntry { server.heads.headStarted(entry) }
            // Answered requests left their loop's deadlines already; this covers any other end.
            daemon.deadlines.remove(context)
            // Only an async handler's task (or a streamed body's reader) can reach the connection
            // from another thread.
            if context.isAsync {
                let lock = server.lock(for: context)
                lock.lock()
                context.connection = nil
                // No optional `Wake` (a generic layout) to carry when no body streams (most requests).
                if let bodyStream = context.bodyStream {
                    let wake = bodyStream.closeLocked()
                    lock.unlock()
                    wake?.resume()
                } else {
                    lock.unlock()
                }
            }
            daemon.inFlight.subtract(1, ordering: .releasing)
        }
    }

/// libmicrohttpd's diagnostics, already formatted by `CShims_MHD_log_adapter`.
let diagnosticsCallback: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void = { serverPointer, message in
    let server = Unmanaged<LoopDaemon>.fromOpaque(serverPointer!).takeUnretainedValue().server
    guard let sink = server.configuration.diagnosticsSink, let message else { return }
    sink(String(cString: message).trimmingSuffixNewlines())
}

/// Called at least twice per request: headers, then body chunks, then the end of the body (and
/// once more after a resume).
let accessHandler:
    @convention(c) (
        UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
        UnsafePointer<CChar>?, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?
    ) -> MHD_Result = { serverPointer, connection, _, method, _, uploadData, uploadSize, contextSlot in
        // Borrowed, not retained: the daemon outlives its callbacks, and the context is held by its
        // slot until the request completes (every request passes here two or three times).
        Unmanaged<LoopDaemon>.fromOpaque(serverPointer!)._withUnsafeGuaranteedRef { daemon in
            // Shutting down: a connection resumed to be closed gets no more work.
            guard !daemon.closing else { return MHD_Result.NO }
            guard let connection, let contextSlot, let raw = contextSlot.pointee, let uploadSize else { return MHD_Result.NO }
            return Unmanaged<RequestContext>.fromOpaque(raw)._withUnsafeGuaranteedRef { context in
                daemon.server.handle(context, connection: connection, method: method, uploadData: uploadData, uploadSize: uploadSize)
            }
        }
    }

extension HTTPServer {
    fileprivate func handle(
        _ context: RequestContext,
        connection: OpaquePointer,
        method: UnsafePointer<CChar>?,
        uploadData: UnsafePointer<CChar>?,
        uploadSize: UnsafeMutablePointer<Int>
    ) -> MHD_Result {
        switch context.stage {
        case .new:
            context.stage = .receiving
            if let entry = context.connectionEntry { heads.headArrived(entry) }
            guard let method, let parsed = Self.method(method) else {
                context.stage = .rejected
                return queue(Self.problem(.badRequest, "bad_request", "The request method is not valid."), on: connection, context: context)
            }
            context.method = parsed
            let target = context.target
            let limits = configuration.limits?(parsed, target[..<(ServerRequest.queryMark(in: target) ?? target.endIndex)])
            context.maxBodySize = limits?.maxBodySize ?? configuration.maxBodySize
            context.requestTimeout = EventLoop.nanoseconds(limits?.requestTimeout ?? configuration.requestTimeout)
            collectHeaders(connection, into: context)
            if let length = context.contentLength, length > context.maxBodySize {
                context.stage = .rejected
                return queue(Self.bodyTooLarge, on: connection, context: context)
            }
            if let entry = context.connectionEntry, (context.contentLength ?? 0) > 0 || context.fields.contains(.transferEncoding) {
                entry.bodyStarted()
            }
            if let limits, limits.streams(contentLength: context.contentLength, fields: context.fields) {
                return dispatchStreaming(context, connection: connection)
            }
            return MHD_Result.YES
        case .receiving:
            let count = uploadSize.pointee
            context.connectionEntry?.bodyReceived(count)
            if count > 0 {
                uploadSize.pointee = 0
                guard context.body.count + count <= context.maxBodySize else {
                    context.stage = .discarding(dropped: context.body.count + count)
                    context.body = []
                    return MHD_Result.YES
                }
                if let uploadData {
                    uploadData.withMemoryRebound(to: UInt8.self, capacity: count) {
                        context.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: count))
                    }
                }
                return MHD_Result.YES
            }
            context.stage = .dispatched
            context.connectionEntry?.bodyStopped()
            return dispatch(context, connection: connection)
        case .streaming(let received):
            let count = uploadSize.pointee
            context.connectionEntry?.bodyReceived(count)
            guard count > 0 else {
                context.connectionEntry?.bodyStopped()
                return endStreaming(context, connection: connection)
            }
            uploadSize.pointee = 0
            return receiveStreaming(context, received: received, uploadData: uploadData, count: count)
        case .rejected:
            context.connectionEntry?.bodyReceived(uploadSize.pointee)
            uploadSize.pointee = 0
            return MHD_Result.YES
        case .discarding(let dropped):
            let count = uploadSize.pointee
            context.connectionEntry?.bodyReceived(count)
            guard count > 0 else { return queue(Self.bodyTooLarge, on: connection, context: context) }
            uploadSize.pointee = 0
            // Reading a little past the limit buys a clean 413; a client that keeps sending is cut off.
            guard dropped + count <= Self.discardLimit(context) else { return MHD_Result.NO }
            context.stage = .discarding(dropped: dropped + count)
            return MHD_Result.YES
        case .dispatched:
            // Bound as it is taken: unwrapping a stored optional would copy the response first.
            guard let response = lock(for: context).withLock({ context.bridge.takeResponse() }) else { return MHD_Result.NO }
            return queue(response, on: connection, context: context)
        }
    }

    private func dispatch(_ context: RequestContext, connection: OpaquePointer) -> MHD_Result {
        let room = answerHeadRoom(connection, context)
        guard room >= Self.smallestAnswerRoom else { return queue(Self.headLeavesNoRoom, on: connection, context: context) }
        let request = ServerRequest(
            method: context.method,
            authority: nil,
            target: context.target,
            fields: context.fields,
            body: context.body,
            peer: context.connectionEntry?.address ?? PeerAddress(CShims_MHD_client_address(connection)),
            loop: context.daemon.loop,
            connectionMemo: context.connectionEntry?.memo,
            answerHeadRoom: room
        )
        context.body = []
        switch handler(request) {
        case .response(let response):
            return queue(response, on: connection, context: context)
        case .deferred(let work):
            context.isAsync = true
            work.start(LoopResponder(server: self, context: context))
            return answerOrSuspend(context, connection: connection, task: nil)
        case .async(let respond):
            context.isAsync = true
            context.startsInline = true
            let task = Task(executorPreference: context) { [unowned self] in
                let response = await respond(request)
                self.complete(context, with: response)
            }
            return answerOrSuspend(context, connection: connection, task: task)
        }
    }

    /// After a deferred or async handler started: queue its answer if it already gave one, else
    /// suspend the connection under the request's deadline until it does.
    private func answerOrSuspend(_ context: RequestContext, connection: OpaquePointer, task: Task<Void, Never>?) -> MHD_Result {
        let lock = lock(for: context)
        lock.lock()
        switch context.bridge.startReturned() {
        case .queue(let response):
            lock.unlock()
            return queue(response, on: connection, context: context)
        case .suspend:
            context.task = task
            context.startDeadline()
            context.daemon.suspend(connection)
            context.daemon.suspensions.add(1, ordering: .relaxed)
            context.daemon.deadlines.add(context)
            lock.unlock()
            return MHD_Result.YES
        }
    }

    /// Delivers a handler's (or the deadline's) answer; resumes the connection if it waits. A
    /// streamed body still arriving is no longer read: its reader gets `bodyError`, and the rest
    /// is dropped (a connection paused for back-pressure is resumed for that).
    func complete(_ context: RequestContext, with response: consuming ServerResponse, bodyError: HTTPServerError = .requestAnswered) {
        // Taken, not borrowed: the bridge keeps it without a copy.
        let unavailable = response.status == .serviceUnavailable
        let lock = lock(for: context)
        lock.lock()
        // An answer after the first (the deadline's 503 came before it) is dropped: a body source
        // it carries is told so (``ResponseBodySource/close()``, on its loop), so that what feeds it
        // (an upstream exchange) stops instead of waiting for a reader that never comes.
        let late = context.bridge.isFinished ? Self.source(of: response) : nil
        let action = context.bridge.complete(response)
        let task = context.task
        let registered = context.deadline != 0
        if action == .resume, let connection = context.connection {
            context.daemon.resume(connection)
        }
        // Most requests have no streamed body: no optional `Wake` (a generic layout) to carry.
        if let bodyStream = context.bodyStream {
            let wake = bodyStream.failLocked(bodyError)
            lock.unlock()
            wake?.resume()
        } else {
            lock.unlock()
        }
        if registered {
            context.daemon.answered(context)
            if unavailable { task?.cancel() }
        }
        if let late {
            let loop = context.daemon.loop
            if loop.inEventLoop { late.close() } else { _ = loop.execute { late.close() } }
        }
    }

    /// What a dropped answer holds that must let go: a body source, or an upgrade's handler.
    private static func source(of response: borrowing ServerResponse) -> (any LateAnswer)? {
        switch response.body {
        case .source(let source): DroppedSource(source: source)
        case .upgrade(let handler): AbandonedUpgrade(handler: handler)
        case .bytes, .stream: nil
        }
    }

    private func collectHeaders(_ connection: OpaquePointer, into context: RequestContext) {
        let raw = Unmanaged.passUnretained(context).toOpaque()
        _ = MHD_get_connection_values_n(
            connection,
            MHD_ValueKind.HEADER_KIND,
            { raw, _, key, keySize, value, valueSize in
                let context = Unmanaged<RequestContext>.fromOpaque(raw!).takeUnretainedValue()
                guard let key else { return MHD_Result.YES }
                let name = UnsafeRawBufferPointer(start: key, count: keySize)
                let value = UnsafeRawBufferPointer(start: value, count: value == nil ? 0 : valueSize)
                guard context.fields.append(name: name, value: value) else { return MHD_Result.YES }
                if RequestFields.equalsIgnoringCase(name, "content-length") {
                    context.contentLength = Int(String(decoding: value, as: UTF8.self))
                }
                return MHD_Result.YES
            },
            raw
        )
    }

    /// The common methods without building and validating a string; others through HTTPTypes.
    private static func method(_ name: UnsafePointer<CChar>) -> HTTPRequest.Method? {
        // Each comparison stops at the terminator (it matches no letter), so no byte past it is read.
        if name[0] == 0x47, name[1] == 0x45, name[2] == 0x54, name[3] == 0 { return .get }  // GET
        if name[0] == 0x50, name[1] == 0x4F, name[2] == 0x53, name[3] == 0x54, name[4] == 0 { return .post }  // POST
        return HTTPRequest.Method(String(cString: name))
    }
}

extension String {
    fileprivate func trimmingSuffixNewlines() -> String {
        var text = self
        while text.last?.isNewline == true { text.removeLast() }
        return text
    }
}

/// What a dropped answer (``HTTPServer/complete(_:with:bodyError:)``) is told, on its loop.
protocol LateAnswer: Sendable {
    func close()
}

/// A body source whose answer was dropped: it stops producing.
private struct DroppedSource: LateAnswer {
    let source: any ResponseBodySource
    func close() { source.close() }
}

/// An upgrade answer that was dropped: its handler never gets the connection.
private struct AbandonedUpgrade: LateAnswer {
    let handler: any ConnectionUpgradeHandler
    func close() { handler.abandoned() }
}

import CMicroHTTPD
import CMicroHTTPDShims
import HTTPTypes
import Synchronization
import TGBase

// Requests whose body streams (`RequestLimits.streamsBody`): the handler runs once the head has
// arrived and reads the body from a `RequestBodyStream` while libmicrohttpd receives it.
//
// libmicrohttpd takes a response only before the body (which costs keep-alive) or after it, so an
// answer that is ready early waits for the end of the body: the rest is read and dropped, up to
// `discardLimit`, after which the connection is closed. The bridge state machine is the one of
// buffered requests; the MHD thread reports `startReturned` only at the end of the body.

extension HTTPServer {
    /// First access-handler call (the head): start the handler. Nothing is queued on this call.
    func dispatchStreaming(_ context: RequestContext, connection: OpaquePointer) -> MHD_Result {
        let room = answerHeadRoom(connection, context)
        guard room >= Self.smallestAnswerRoom else { return queue(Self.headLeavesNoRoom, on: connection, context: context) }
        let lock = lock(for: context)
        let stream = RequestBodyStream(lock: lock, connection: connection, daemon: context.daemon, entry: context.connectionEntry)
        let request = ServerRequest(
            method: context.method,
            authority: nil,
            target: context.target,
            fields: context.fields,
            body: [],
            bodyStream: ServerRequestBody(stream: stream),
            peer: PeerAddress(CShims_MHD_client_address(connection)),
            loop: context.daemon.loop,
            connectionMemo: context.connectionEntry?.memo,
            answerHeadRoom: room
        )
        lock.withLock {
            context.bodyStream = stream
            context.isAsync = true
        }
        context.stage = .streaming(received: 0)
        switch handler(request) {
        case .response(let response):
            let wake = lock.withLock {
                _ = context.bridge.complete(response)
                return stream.failLocked(.requestAnswered)
            }
            wake?.resume()
        case .deferred(let work):
            lock.withLock { context.startDeadline() }
            work.start(LoopResponder(server: self, context: context))
            lock.withLock {
                if !context.bridge.isFinished { context.daemon.deadlines.add(context) }
            }
        case .async(let respond):
            lock.withLock { context.startDeadline() }
            context.startsInline = true
            let task = Task(executorPreference: context) { [unowned self] in
                let response = await respond(request)
                self.complete(context, with: response)
            }
            lock.withLock {
                context.task = task
                // A handler that answered inline needs no deadline.
                if !context.bridge.isFinished { context.daemon.deadlines.add(context) }
            }
        }
        return MHD_Result.YES
    }

    /// A body chunk: to the reader, or dropped when nobody reads any more.
    func receiveStreaming(
        _ context: RequestContext,
        received: Int,
        uploadData: UnsafePointer<CChar>?,
        count: Int
    ) -> MHD_Result {
        let total = received + count
        context.stage = .streaming(received: total)
        context.bodyProgressed()
        guard let stream = context.bodyStream, let uploadData else { return MHD_Result.YES }
        let lock = stream.lock
        if total > context.maxBodySize {
            let wake = lock.withLock { stream.failLocked(.bodyTooLarge) }
            wake?.resume()
            return total <= Self.discardLimit(context) ? MHD_Result.YES : MHD_Result.NO
        }
        lock.lock()
        guard stream.isOpenLocked else {
            lock.unlock()
            // Answered, failed or timed out: the rest is read and dropped, within a bound.
            return total <= Self.discardLimit(context) ? MHD_Result.YES : MHD_Result.NO
        }
        let chunk = uploadData.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) }
        let wake = stream.appendLocked(chunk)
        if stream.paused { uploadPauses.add(1, ordering: .relaxed) }
        lock.unlock()
        wake?.resume()
        return MHD_Result.YES
    }

    /// The last access-handler call of the body: end the stream, then answer now or wait.
    func endStreaming(_ context: RequestContext, connection: OpaquePointer) -> MHD_Result {
        context.stage = .dispatched
        context.bodyProgressed()
        guard let stream = context.bodyStream else { return MHD_Result.NO }
        let lock = stream.lock
        lock.lock()
        let wake = stream.finishLocked()
        switch context.bridge.startReturned() {
        case .queue(let response):
            lock.unlock()
            wake?.resume()
            return queue(response, on: connection, context: context)
        case .suspend:
            context.daemon.suspend(connection)
            context.daemon.suspensions.add(1, ordering: .relaxed)
            lock.unlock()
            wake?.resume()
            return MHD_Result.YES
        }
    }

    /// How many body bytes in all are read before a connection is cut: a little past the limit
    /// buys a clean 413 (or early answer); a client that keeps sending is cut off.
    static func discardLimit(_ context: RequestContext) -> Int {
        2 * context.maxBodySize + 65536
    }
}

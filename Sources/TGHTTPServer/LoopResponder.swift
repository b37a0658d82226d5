import CMicroHTTPD
public import TGEventLoop

/// Answers a request whose handler replied ``HTTPServer/Reply/deferred(_:)``.
///
/// A served request's responder completes the request on its connection. A responder made with
/// ``init(inProcess:)`` has no connection: it hands the answer to a closure (the in-process entry
/// of TGApp's `Application`, which tests drive without sockets).
public struct LoopResponder: Sendable {
    /// Where the answer goes: the connection that carries the request, or a closure.
    enum Backing: Sendable {
        case connection(HTTPServer, RequestContext)
        case inProcess(@Sendable (ServerResponse) -> Void)
    }

    let backing: Backing

    /// The loop the request is served on (nil for an in-process responder).
    public var loop: EventLoop? {
        guard case .connection(_, let context) = backing else { return nil }
        return context.daemon.loop
    }

    init(server: HTTPServer, context: RequestContext) {
        backing = .connection(server, context)
    }

    /// A responder without a connection, for a request answered in-process (tests): `deliver`
    /// receives every answer ``respond(_:)`` is given. Invariant the caller keeps: it keeps the
    /// first answer only, as a served request's connection does, and the request it answers was
    /// made without a server (its `loop` is nil), so no handler counts on a loop to answer from.
    public init(inProcess deliver: @escaping @Sendable (ServerResponse) -> Void) {
        backing = .inProcess(deliver)
    }

    /// Sends `response` (the first answer wins; a later one, or one after the request's deadline
    /// answered 503, is dropped, and the body source it carries closed on its loop). From any
    /// thread; on ``loop`` there is no hop.
    public func respond(_ response: consuming ServerResponse) {
        switch backing {
        case .connection(let server, let context): server.complete(context, with: response)
        case .inProcess(let deliver): deliver(response)
        }
    }
}

/// libmicrohttpd's content reader over a ``ResponseBodySource``, on the connection's loop: when
/// the source has nothing yet the connection is suspended, and the source's notification resumes it.
final class SourceReader: @unchecked Sendable {
    // Invariant: used only on the daemon's loop (libmicrohttpd calls the reader and the free
    // callback from `MHD_run`; the source notifies on the loop).
    let source: any ResponseBodySource
    let daemon: LoopDaemon
    let connection: OpaquePointer

    init(source: any ResponseBodySource, daemon: LoopDaemon, connection: OpaquePointer) {
        self.source = source
        self.daemon = daemon
        self.connection = connection
    }

    func read(into destination: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        // Shutting down: a body still running when the drain ends is cut.
        if daemon.closing { return ResponseStream.endWithError }
        switch source.read(into: UnsafeMutableRawBufferPointer(start: destination, count: capacity)) {
        case .bytes(let count):
            return count
        case .end:
            return ResponseStream.endOfStream
        case .failed:
            return ResponseStream.endWithError
        case .wait:
            daemon.suspend(connection)
            let daemon = daemon
            let connection = SendableAddress(UnsafeMutableRawPointer(connection))
            source.notify { daemon.resume(OpaquePointer(connection.pointer)) }
            return 0
        }
    }
}

let sourceReaderCallback: @convention(c) (UnsafeMutableRawPointer?, UInt64, UnsafeMutablePointer<CChar>?, Int) -> Int = {
    readerPointer,
    _,
    buffer,
    capacity in
    let reader = Unmanaged<SourceReader>.fromOpaque(readerPointer!).takeUnretainedValue()
    guard let buffer else { return ResponseStream.endWithError }
    return reader.read(into: buffer, capacity: capacity)
}

let sourceFreeCallback: @convention(c) (UnsafeMutableRawPointer?) -> Void = { readerPointer in
    let reader = Unmanaged<SourceReader>.fromOpaque(readerPointer!).takeRetainedValue()
    reader.source.close()
}

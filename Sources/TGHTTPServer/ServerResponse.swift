public import HTTPTypes

/// A response for the server to send: status, header fields and a body that is either a byte
/// buffer or a stream of unknown length (sent with chunked transfer encoding).
public struct ServerResponse: Sendable {
    /// How the body is produced.
    public enum Body: Sendable {
        /// A complete body; `Content-Length` is set by the server.
        case bytes([UInt8])
        /// A body produced while sending: chunked, unless a `Content-Length` header field announces
        /// its length. The closure writes chunks and returns when done; throwing aborts the
        /// connection so the client sees a truncated (invalid) body.
        case stream(@Sendable (ResponseBodyWriter) async throws -> Void)
        /// A body read on the connection's loop from a source that lives there (an upstream
        /// transfer on the same loop): no task, no lock, no thread hop. Chunked unless a
        /// `Content-Length` header field announces its length.
        case source(any ResponseBodySource)
        /// No body: the answer is a `101 Switching Protocols` whose connection then belongs to
        /// `handler` (a WebSocket relay). Only with ``HTTPServer/Configuration/allowsUpgrade``;
        /// the fields must name the protocol (`Upgrade`); the server adds `Connection: Upgrade`.
        case upgrade(any ConnectionUpgradeHandler)
    }

    public var status: HTTPResponse.Status
    /// Header fields. `Transfer-Encoding` and `Connection` are managed by the server and ignored
    /// here, and so is `Content-Length` except as the announced length of a streamed body.
    public var headerFields: HTTPFields
    /// More fields, already checked, sent after ``headerFields`` (a proxied answer's own).
    public var rawHeaderFields = RawHeaderFields()
    /// The request's id, sent last as `X-Request-ID` (every answer carries one: set once, where
    /// the answer is finished, without copying it into the fields). A value that holds NUL, CR or
    /// LF is not sent.
    public var requestID: String?
    public var body: Body

    /// `headerFields` defaults to `HTTPFields()`, not `[:]`: the literal reserves capacity for
    /// its no elements, an array allocation per answer.
    public init(status: HTTPResponse.Status, headerFields: HTTPFields = HTTPFields(), body: Body = .bytes([])) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
    }

    /// A response with a UTF-8 text body and the given content type.
    public init(status: HTTPResponse.Status, contentType: String, body: String, headerFields: HTTPFields = HTTPFields()) {
        var fields = headerFields
        fields[.contentType] = contentType
        self.init(status: status, headerFields: fields, body: .bytes(Array(body.utf8)))
    }
}

/// A response body produced on the connection's event loop. Every call comes from that loop.
public protocol ResponseBodySource: AnyObject, Sendable {
    /// Copies up to `buffer.count` bytes, or says the body ended, failed, or has nothing yet.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> ResponseBodyRead
    /// After ``read(into:)`` answered ``ResponseBodyRead/wait``: call `ready` once, on the loop,
    /// when there is more to read (or the end, or a failure).
    func notify(when ready: @escaping () -> Void)
    /// The response is gone (sent, or the client went away): stop producing and let go.
    func close()
}

/// What a ``ResponseBodySource`` read gave.
public enum ResponseBodyRead: Sendable, Equatable {
    case bytes(Int)
    case wait
    case end
    /// The body cannot be completed: the connection is closed so the client sees it truncated.
    case failed
}

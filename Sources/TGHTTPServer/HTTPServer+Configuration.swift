public import HTTPTypes
import TGEventLoop

extension HTTPServer {
    /// Listening address, thread pool and the limits that protect the server from its clients.
    public struct Configuration: Sendable {
        /// IPv4 or IPv6 address literal to bind. Default `127.0.0.1`.
        public var host: String = "127.0.0.1"
        /// TCP port; 0 picks a free one (see ``HTTPServer/port``).
        public var port: UInt16 = 0
        /// Event-loop threads (epoll, one per CPU the process may use by default: ``defaultThreadCount``). Handlers never block them.
        public var threads: Int = HTTPServer.defaultThreadCount
        /// Open connections at most; further clients are refused at accept.
        public var connectionLimit: Int = 4096
        /// Connections at most from one IP address, across all loops (0: no per-IP limit). A
        /// connection over it is closed as soon as it opens.
        public var perIPConnectionLimit: Int = 0
        /// IPv6 clients count against the per-IP limit by their first this many bits (a
        /// subscriber is usually given a whole /64); an IPv4-mapped IPv6 peer is its IPv4 address.
        public var perIPConnectionIPv6PrefixLength: Int = 64
        /// Peers the per-IP limit does not apply to (trusted reverse proxies, whose connections
        /// carry many clients), by address text.
        public var perIPConnectionLimitExempt: (@Sendable (String) -> Bool)?
        /// A request body must arrive at this many bytes per second at least, measured over each
        /// window of this length (slowloris with a trickled body: the connection timeout only
        /// counts silence); a slower client is disconnected. Time the server itself holds the
        /// upload back (back-pressure) does not count. nil: no minimum.
        public var minBodyRate: (bytesPerSecond: Int, window: Duration)? = (1024, .seconds(10))
        /// A connection with no traffic for this many seconds is closed (slow or idle clients).
        public var connectionTimeoutSeconds: Int = 15
        /// A request head (request line and headers) must arrive in full within this long of the
        /// connection opening or of the previous request ending; a slower client is disconnected
        /// (slowloris: the connection timeout above only counts silence). nil: no such limit.
        public var requestHeadTimeout: Duration? = .seconds(30)
        /// Request bodies larger than this are refused with 413, before reading them when
        /// `Content-Length` says so.
        public var maxBodySize: Int = 1 << 20
        /// Memory per connection for the request head and buffers; heads that do not fit are refused
        /// (431). libmicrohttpd clears this memory for every request, so larger costs throughput.
        /// 14 KiB, not 16: libmicrohttpd fills this block from both ends (the head read at the
        /// start, the parsed fields at the end), so a waiting request touches its first and last
        /// page. Blocks of 16 KiB lie page-aligned side by side, two pages each; at 14 KiB one
        /// block's end and the next one's start fall in the same page every other time: 1.5 pages
        /// a connection (docs/architecture.md, "Memory under a burst"). One field may take about
        /// half: up to 6.9 KB here (7.9 KB at 16 KiB).
        public var connectionMemoryLimit: Int = 14 * 1024
        /// An async handler that has not answered by then gets 503 and is cancelled. A suspended
        /// connection never times out by itself, so this is the deadline of every deferred request.
        public var requestTimeout: Duration = .seconds(30)
        /// How long `shutdown()` waits for in-flight requests before answering them 503.
        public var drainTimeout: Duration = .seconds(10)
        /// Whether a handler may answer `101 Switching Protocols` and take the connection over
        /// (``ServerResponse/Body/upgrade(_:)``, a WebSocket). Off by default: a server that
        /// upgrades nothing starts its daemons without it.
        public var allowsUpgrade = false
        /// Where libmicrohttpd's own diagnostics go (they carry no request data). Default: dropped.
        public var diagnosticsSink: (@Sendable (String) -> Void)?
        /// Limits for some requests other than `maxBodySize` and `requestTimeout` (a proxy route's
        /// larger bodies and longer deadline), chosen from the method and path as the head arrives.
        /// nil, or nil for a request: the defaults.
        public var limits: (@Sendable (HTTPRequest.Method, _ path: Substring) -> RequestLimits?)?

        public init() {}
    }

    /// The body size, deadline and body mode of one request.
    public struct RequestLimits: Sendable, Equatable {
        public var maxBodySize: Int
        /// For a streamed body, the deadline counts from the last body bytes received: an upload
        /// that keeps arriving is not cut, one that stops (or whose reader stops) is.
        public var requestTimeout: Duration
        /// The handler is called as soon as the head arrived and reads the body from
        /// ``ServerRequest/bodyStream`` while it arrives (``ServerRequest/body`` stays empty), with
        /// back-pressure: a reader that falls behind pauses the upload. Still at most
        /// `maxBodySize` bytes.
        public var streamsBody: Bool
        /// With `streamsBody`, a request without a body (neither `Content-Length` nor
        /// `Transfer-Encoding`) or whose `Content-Length` is at most this many bytes is read
        /// whole as usual: ``ServerRequest/bodyStream`` is nil and the answer can go out inline.
        public var buffersBodiesUpTo: Int

        public init(maxBodySize: Int, requestTimeout: Duration, streamsBody: Bool = false, buffersBodiesUpTo: Int = 0) {
            self.maxBodySize = maxBodySize
            self.requestTimeout = requestTimeout
            self.streamsBody = streamsBody
            self.buffersBodiesUpTo = buffersBodiesUpTo
        }

        /// Whether a request with these fields streams its body.
        func streams(contentLength: Int?, fields: RequestFields) -> Bool {
            guard streamsBody else { return false }
            if let contentLength { return contentLength > buffersBodiesUpTo }
            return fields.contains(.transferEncoding)
        }
    }

    /// One event-loop thread per CPU the process may use (``EventLoopGroup/defaultCount``), at
    /// least one.
    public static var defaultThreadCount: Int { EventLoopGroup.defaultCount }
}

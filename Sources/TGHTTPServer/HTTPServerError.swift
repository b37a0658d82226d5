/// Errors of the HTTP server wrapper. Descriptions are generic; details stay in `debugDescription`.
public struct HTTPServerError: Error, Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    private enum Code: Hashable, Sendable {
        case invalidAddress
        case startFailed
        case alreadyStarted
        case clientGone
        case bodyTooLarge
        case requestTimedOut
        case requestAnswered
    }

    private let code: Code
    /// The OS error number, when the failure came with one.
    public let errno: Int32?

    private init(_ code: Code, errno: Int32? = nil) {
        self.code = code
        self.errno = errno
    }

    /// The configured host is not an IPv4 or IPv6 address literal.
    public static let invalidAddress = HTTPServerError(.invalidAddress)
    /// libmicrohttpd could not start (port in use, limits, …).
    public static func startFailed(errno: Int32) -> HTTPServerError { HTTPServerError(.startFailed, errno: errno) }
    /// `start()` was called twice.
    public static let alreadyStarted = HTTPServerError(.alreadyStarted)
    /// The connection a streamed body was written to is gone.
    public static let clientGone = HTTPServerError(.clientGone)
    /// A streamed request body passed the request's `maxBodySize`.
    public static let bodyTooLarge = HTTPServerError(.bodyTooLarge)
    /// The request's deadline passed while its streamed body was read (it was answered 503).
    public static let requestTimedOut = HTTPServerError(.requestTimedOut)
    /// The request was answered before its streamed body was read to the end; the rest is dropped.
    public static let requestAnswered = HTTPServerError(.requestAnswered)

    public static func == (lhs: HTTPServerError, rhs: HTTPServerError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String {
        switch code {
        case .invalidAddress: "HTTP server: listen address is not an IP address literal"
        case .startFailed: "HTTP server: could not start listening"
        case .alreadyStarted: "HTTP server: already started"
        case .clientGone: "HTTP server: client connection closed"
        case .bodyTooLarge: "HTTP server: request body larger than the limit"
        case .requestTimedOut: "HTTP server: request deadline passed"
        case .requestAnswered: "HTTP server: request answered before its body was read"
        }
    }

    public var debugDescription: String {
        guard let errno else { return description }
        return "\(description) (errno \(errno))"
    }
}

import CCurl

/// Errors of the HTTP client. `description` is generic (never a URL, query or header value);
/// libcurl's own message is only in `debugDescription`.
public struct HTTPClientError: Error, Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    enum Code: Hashable, Sendable {
        case timeout
        case dnsFailure
        case connectFailed
        case tlsFailure
        case responseTooLarge
        case invalidURL
        case insecureURLRefused
        case cancelled
        case shutDown
        case transport
    }

    let code: Code
    /// libcurl's result code, when the failure came from a transfer.
    public let curlCode: Int32?
    let detail: String?

    init(_ code: Code, curlCode: Int32? = nil, detail: String? = nil) {
        self.code = code
        self.curlCode = curlCode
        self.detail = detail
    }

    /// The deadline passed (connecting, waiting for a connection, or transferring).
    public static let timeout = HTTPClientError(.timeout)
    /// The host name did not resolve.
    public static let dnsFailure = HTTPClientError(.dnsFailure)
    /// Nothing accepted the connection.
    public static let connectFailed = HTTPClientError(.connectFailed)
    /// TLS failed: handshake, or the peer's certificate did not verify.
    public static let tlsFailure = HTTPClientError(.tlsFailure)
    /// The response body passed the size limit.
    public static let responseTooLarge = HTTPClientError(.responseTooLarge)
    /// The request's scheme, authority or path do not form a usable URL.
    public static let invalidURL = HTTPClientError(.invalidURL)
    /// Plain HTTP to a host that is not loopback (or without the test option): refused before any
    /// socket was opened.
    public static let insecureURLRefused = HTTPClientError(.insecureURLRefused)
    /// The request's task was cancelled.
    public static let cancelled = HTTPClientError(.cancelled)
    /// The client was shut down.
    public static let shutDown = HTTPClientError(.shutDown)
    /// Any other transfer failure (connection reset, malformed response, …); see `curlCode`.
    public static let transport = HTTPClientError(.transport)

    public static func == (lhs: HTTPClientError, rhs: HTTPClientError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// True for failures where trying again later may work (network, timeout): not the peer's verdict.
    public var isTransient: Bool {
        switch code {
        case .timeout, .dnsFailure, .connectFailed, .transport: true
        default: false
        }
    }

    public var description: String {
        switch code {
        case .timeout: "HTTP client: timed out"
        case .dnsFailure: "HTTP client: host name did not resolve"
        case .connectFailed: "HTTP client: could not connect"
        case .tlsFailure: "HTTP client: TLS failed"
        case .responseTooLarge: "HTTP client: response too large"
        case .invalidURL: "HTTP client: invalid URL"
        case .insecureURLRefused: "HTTP client: plain HTTP refused"
        case .cancelled: "HTTP client: cancelled"
        case .shutDown: "HTTP client: shut down"
        case .transport: "HTTP client: transfer failed (curl \(curlCode ?? -1))"
        }
    }

    public var debugDescription: String {
        var text = description
        if let curlCode { text += " [CURLcode \(curlCode)]" }
        if let detail, !detail.isEmpty { text += ": \(detail)" }
        return text
    }

    /// Classifies a failed transfer's result code.
    static func from(_ result: CURLcode, detail: String?) -> HTTPClientError {
        let code: Code
        switch result {
        case CURLE_OPERATION_TIMEDOUT: code = .timeout
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: code = .dnsFailure
        case CURLE_COULDNT_CONNECT: code = .connectFailed
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS,
            CURLE_SSL_CRL_BADFILE, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_SHUTDOWN_FAILED:
            code = .tlsFailure
        case CURLE_FILESIZE_EXCEEDED: code = .responseTooLarge
        case CURLE_URL_MALFORMAT: code = .invalidURL
        default: code = .transport
        }
        return HTTPClientError(code, curlCode: Int32(bitPattern: result.rawValue), detail: detail)
    }
}

/// Why a proxied call was not forwarded, or failed on the way. TGApp turns each into its HTTP
/// answer (problem+json) where every error is; the API's own errors pass through as they are.
public enum ProxyError: Error, Equatable, Sendable {
    case unknownUpstream
    case methodNotAllowed(allowed: [String])
    case invalidPath(String)
    case pathNotAllowed
    case upstreamUnavailable
    case upstreamTimeout
    /// The app's streamed body passed the API's `max_body_bytes`.
    case bodyTooLarge
    /// The app's streamed body stopped before its end (the app went away, or the request's
    /// deadline passed and was answered already): an answer nobody normally receives.
    case bodyIncomplete
    /// The upstream access token cannot be sent in a header field (a provider fault).
    case unusableToken
    /// The API's answer has more header fields than the server can send back with this request
    /// (`size` bytes of them to pass on, `room` for them: ``TGHTTPServer/ServerRequest/answerHeadRoom``).
    case answerHeadTooLarge(size: Int, room: Int)
    /// The API asks for a stronger or fresher sign-in (RFC 9470) than the account's token
    /// carries; `upstream` is the API's name, `dpop` whether the app's own token is DPoP-bound.
    case stepUpRequired(StepUpChallenge, upstream: String, dpop: Bool)
    /// The app asks for a WebSocket, and the API does not take them through TokenGate.
    case webSocketNotEnabled
    /// The app's WebSocket handshake is malformed (what is wrong with it).
    case webSocketInvalid(String)
    /// The app's WebSocket handshake asks for a version other than 13.
    case webSocketVersion
    /// The app's WebSocket handshake comes with an `Origin` the API's `websocket_origins` lacks.
    case webSocketOriginNotAllowed
    /// The API did not switch to WebSocket in a way the proxy can relay (why).
    case webSocketRefused(String)
}

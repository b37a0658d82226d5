public import TGHTTPClient
public import TGHTTPServer

/// Where the proxy gets the upstream access token of a call. The proxy knows HTTP, not OAuth:
/// whoever assembles it (TGApp) says which session a call's own token names and which token of
/// the API's provider it carries upstream.
public protocol ProxyCredentials: Sendable {
    /// On the request's event loop, without waiting: the token from memory, or nil when it must
    /// be loaded (``load(for:rejected:)``). Throws when the call is refused outright (a malformed
    /// token, a scheme its session does not take).
    func cached(for request: ServerRequest) throws -> ProxyCredential?

    /// Off the loop: what memory could not answer (a session to read, a token to refresh), with
    /// every check the call needs. `rejected`: a token the API just refused with 401
    /// `invalid_token`, for a call whose credentials were checked already (its proof included):
    /// a fresh token other than that one, if there is one.
    func load(for request: ServerRequest, rejected: String?) async throws -> ProxyCredential
}

/// The upstream token of one call.
public struct ProxyCredential: Sendable {
    public var token: String
    /// `Authorization: Bearer <token>` as a header line (``ProxyHeaders/bearerLines(_:)``), made
    /// once per token and shared by its calls.
    public var bearer: SharedHeaderLines
    /// A check the call must pass off the loop before it goes (a DPoP proof: a signature check
    /// and a statement); nil for none.
    public var check: (@Sendable () async throws -> Void)?
    /// The session the call's own token opened, whose end ends the call's streamed answer
    /// (``OpenStreams``); nil: nothing ends it but its own end.
    public var holder: StreamHolder?

    public init(
        token: String,
        bearer: SharedHeaderLines,
        check: (@Sendable () async throws -> Void)? = nil,
        holder: StreamHolder? = nil
    ) {
        self.token = token
        self.bearer = bearer
        self.check = check
        self.holder = holder
    }
}

/// Where a proxied call answers: once, with a response or an error (which the assembler turns
/// into its HTTP answer). From any thread.
public protocol ProxyResponder: Sendable {
    func respond(_ response: consuming ServerResponse)
    func fail(_ error: any Error)
}

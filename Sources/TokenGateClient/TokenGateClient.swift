public import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An app's side of TokenGate (docs/apps.md): signs accounts in through the browser, keeps their
/// credentials, hands out access tokens on demand (one refresh however many callers ask at once),
/// sends authorized requests to the gateway, binds tokens to the install's key (DPoP), logs out,
/// and re-links a device after a lost Keychain with a transfer code.
///
/// One instance per app; every method may be called from any task.
public actor TokenGateClient {
    /// Who the app is to the gateway.
    public struct Configuration: Sendable {
        /// The gateway's public base URL (its `server.public_base_url`), e.g. `https://auth.example.com`.
        public var gatewayURL: URL
        /// The app's `client_id` (`clients[].client_id`).
        public var clientID: String
        /// One of the app's registered redirect URIs (`com.example.app:/oauth2redirect`); its
        /// scheme is the browser session's callback scheme.
        public var redirectURI: String
        /// One of the app's `post_logout_redirect_uris`, for a logout that also ends the
        /// provider's session in the browser.
        public var postLogoutRedirectURI: String?
        /// Bind tokens to the install's key (the app's `dpop: allowed` or `required`).
        public var usesDPoP: Bool
        /// Sign in in a private browser session (no cookies shared with the browser).
        public var ephemeralBrowserSession: Bool
        /// An access token is refreshed this long before it expires.
        public var refreshMargin: TimeInterval

        public init(
            gatewayURL: URL,
            clientID: String,
            redirectURI: String,
            postLogoutRedirectURI: String? = nil,
            usesDPoP: Bool = false,
            ephemeralBrowserSession: Bool = true,
            refreshMargin: TimeInterval = 30
        ) {
            self.gatewayURL = gatewayURL
            self.clientID = clientID
            self.redirectURI = redirectURI
            self.postLogoutRedirectURI = postLogoutRedirectURI
            self.usesDPoP = usesDPoP
            self.ephemeralBrowserSession = ephemeralBrowserSession
            self.refreshMargin = refreshMargin
        }
    }

    /// The gateway's RFC 8414 metadata, as far as the library uses it.
    public struct Metadata: Sendable, Equatable, Decodable {
        public let issuer: String
        public let authorizationEndpoint: URL
        public let tokenEndpoint: URL
        public let dpopSigningAlgValuesSupported: [String]?

        enum CodingKeys: String, CodingKey {
            case issuer
            case authorizationEndpoint = "authorization_endpoint"
            case tokenEndpoint = "token_endpoint"
            case dpopSigningAlgValuesSupported = "dpop_signing_alg_values_supported"
        }
    }

    public nonisolated let configuration: Configuration
    let browser: any BrowserSession
    let credentials: any CredentialStore
    let transfers: (any TransferStore)?
    let transport: any HTTPTransport
    let now: @Sendable () -> Date
    let gatewayOrigin: Origin?

    var cachedMetadata: Metadata?
    var loadedState: StoredState?
    /// Access tokens by account id; never stored (they live minutes).
    var accessTokens: [String: AccessToken] = [:]
    /// The refresh in flight per account: every caller of that moment waits for the same one.
    var refreshes: [String: Task<AccessToken, any Error>] = [:]
    var loadedKey: (any DPoPKey)?
    /// The last `DPoP-Nonce` the gateway gave.
    var dpopNonce: String?

    /// `transfers`: where a transfer code is kept (nil: no transfer codes). `dpopKey`: the
    /// install's key (nil: made once and kept in `credentials`, in the Secure Enclave where there
    /// is one; used only with ``Configuration/usesDPoP``). `now`: the clock (tests pass theirs).
    public init(
        configuration: Configuration,
        browser: any BrowserSession,
        credentials: any CredentialStore,
        transfers: (any TransferStore)? = nil,
        dpopKey: (any DPoPKey)? = nil,
        transport: any HTTPTransport = URLSessionTransport(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.browser = browser
        self.credentials = credentials
        self.transfers = transfers
        self.loadedKey = dpopKey
        self.transport = transport
        self.now = now
        gatewayOrigin = Origin(configuration.gatewayURL)
    }

    /// The gateway's metadata (`/.well-known/oauth-authorization-server`), fetched once.
    public func metadata() async throws -> Metadata {
        if let cachedMetadata { return cachedMetadata }
        var request = URLRequest(url: endpoint(".well-known/oauth-authorization-server"))
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let answer = try await send(request)
        guard answer.status == 200 else { throw answer.failure() }
        let metadata = try answer.decode(Metadata.self)
        cachedMetadata = metadata
        return metadata
    }

    /// `path` under the gateway's base URL.
    func endpoint(_ path: String) -> URL {
        let base = configuration.gatewayURL.absoluteString
        return URL(string: (base.hasSuffix("/") ? base : base + "/") + path)!
    }

    // MARK: State

    func state() throws -> StoredState {
        if let loadedState { return loadedState }
        let state = try StoredState.load(from: credentials)
        loadedState = state
        return state
    }

    /// Changes the stored state and writes it before anything else uses the change.
    func update(_ change: (inout StoredState) throws -> Void) throws {
        var state = try state()
        try change(&state)
        try state.save(to: credentials)
        loadedState = state
    }

    /// The accounts signed in on this device, in the order they signed in.
    public func accounts() throws -> [Account] { try state().entries.map(\.account) }

    /// The account the app works with now (the last one signed in, unless switched).
    public func currentAccount() throws -> Account? {
        let state = try state()
        return state.currentAccountID.flatMap { state.entry($0)?.account } ?? state.entries.first?.account
    }

    /// Makes `id` the current account.
    public func switchAccount(to id: String) throws {
        guard try state().entry(id) != nil else { throw TokenGateClientError.unknownAccount(id) }
        try update { $0.currentAccountID = id }
    }

    // MARK: Sending

    func send(_ request: URLRequest) async throws -> GatewayAnswer {
        let (data, response) = try await transport.send(request)
        let answer = GatewayAnswer(data, response)
        if let nonce = answer.header("DPoP-Nonce") { dpopNonce = nonce }
        return answer
    }

    func key() throws -> (any DPoPKey)? {
        guard configuration.usesDPoP else { return nil }
        if let loadedKey { return loadedKey }
        let key = try DPoPKeys.loadOrCreate(in: credentials)
        loadedKey = key
        return key
    }

    /// A form POST to the token endpoint, with a proof when the app uses DPoP: once more with the
    /// gateway's nonce when it asks for one and, with `resendsLostAnswer`, once more after a
    /// transport failure (the gateway answers a repeated refresh or transfer code the same within
    /// its replay grace; a handoff code works once, so its redemption is not sent again and the
    /// failure goes to the app, whose sign-in starts over).
    func tokenRequest(_ form: [(String, String)], resendsLostAnswer: Bool = true) async throws -> GatewayAnswer {
        let url = try await metadata().tokenEndpoint
        var lastError: (any Error)?
        var nonceRetried = false
        var attempt = 0
        while attempt < (resendsLostAnswer ? 2 : 1) {
            attempt += 1
            var request = URLRequest(url: url)
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.setValue("application/json", forHTTPHeaderField: "Accept")
            request.httpBody = Data(Form.encode(form).utf8)
            if let key = try key() {
                request.setValue(
                    try DPoPProof.make(key: key, method: "POST", url: url, accessToken: nil, nonce: dpopNonce, now: now()),
                    forHTTPHeaderField: "DPoP"
                )
            }
            let answer: GatewayAnswer
            do {
                answer = try await send(request)
            } catch let error as TokenGateClientError {
                throw error
            } catch {
                lastError = error
                continue
            }
            if !nonceRetried, DPoPProof.asksForNonce(answer) {
                nonceRetried = true
                attempt -= 1
                continue
            }
            return answer
        }
        throw lastError ?? TokenGateClientError.invalidResponse("no answer")
    }

    /// Keeps what a token answer gave: the rotated refresh token (and the device secret) stored
    /// first, then the access token in memory.
    func keep(_ tokens: TokenResponse, makeCurrent: Bool) throws -> AccessToken {
        try update { state in
            if let secret = tokens.deviceSecret { state.deviceSecret = secret }
            state.put(StoredState.Entry(account: tokens.account, refreshToken: tokens.refreshToken))
            if makeCurrent || state.currentAccountID == nil { state.currentAccountID = tokens.account.id }
        }
        let token = AccessToken(
            value: tokens.accessToken,
            tokenType: tokens.tokenType,
            expiresAt: now().addingTimeInterval(TimeInterval(tokens.expiresIn))
        )
        accessTokens[tokens.account.id] = token
        return token
    }

    /// Forgets an account on this device (its grant is gone).
    func forget(_ id: String) throws {
        accessTokens[id] = nil
        try update { $0.remove(id) }
    }
}

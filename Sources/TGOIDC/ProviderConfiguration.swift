public import TGCrypto

/// One identity provider as TokenGate uses it.
public struct ProviderConfiguration: Sendable {
    /// How the provider sends the authorization response to the callback.
    public enum ResponseMode: String, Sendable, Hashable {
        case query
        case formPost = "form_post"
    }

    /// Stable name, used in URLs (`provider=`), logs and metrics.
    public var name: String
    public var profile: ProviderProfile
    public var clientID: String
    public var clientAuthentication: ClientAuthentication
    /// TokenGate's callback URL registered at the provider.
    public var redirectURI: String
    /// Scopes of every login (`openid` is added when the profile issues ID tokens).
    public var scopes: [String]
    public var responseMode: ResponseMode = .query
    /// Accepted ID-token algorithms. Never `none` or HMAC (TGCrypto cannot even express them).
    public var allowedAlgorithms: Set<JWSAlgorithm> = [.rs256, .rs384, .rs512, .ps256, .es256, .es384]
    /// Tolerated clock difference for `exp`, `iat` and `nbf`.
    public var clockSkew: Duration = .seconds(60)
    /// Deadline of each request to the provider.
    public var requestTimeout: Duration = .seconds(10)
    /// How long discovery metadata is reused before it is fetched again.
    public var metadataLifetime: Duration = .seconds(24 * 3600)
    /// An unknown `kid` refetches the JWKS at most this often (a forged `kid` cannot make
    /// TokenGate hammer the provider).
    public var jwksRefetchInterval: Duration = .seconds(60)
    /// A key set older than this is fetched again on its next use, so keys the provider stopped
    /// publishing stop being accepted.
    public var jwksMaxAge: Duration = .seconds(24 * 3600)
    /// Extra parameters of every authorization request (never overriding the protocol's own).
    public var extraAuthorizationParameters: [(name: String, value: String)] = []
    /// When a login asks UserInfo for display claims.
    public var userInfo: UserInfoUse = .auto
    /// Whether the provider may end sessions with back-channel logout tokens (OpenID Connect
    /// Back-Channel Logout 1.0); only for profiles that issue ID tokens.
    public var acceptsBackChannelLogout = true
    /// How old (its `iat`) a logout token may be, besides the clock skew.
    public var logoutTokenMaxAge: Duration = .seconds(300)
    /// Whether only logout tokens typed `logout+jwt` are accepted (otherwise `JWT` and no `typ`
    /// too, as many providers still send).
    public var logoutTokenRequiresExplicitType = false
    /// Whether, and how, the provider's security event tokens are taken (OpenID Shared Signals
    /// Framework 1.0, pushed per RFC 8935); nil: not at all (the default).
    public var securityEvents: SecurityEventSettings?

    /// What a provider's security event tokens must match.
    public struct SecurityEventSettings: Sendable, Hashable {
        /// The `aud` they must carry; nil: the client id.
        public var audience: String?
        /// How old (their `iat`) they may be, besides the clock skew.
        public var maxAge: Duration
        /// The whole `Authorization` header value the transmitter must send with each push (the
        /// stream's `authorization_header`); nil: none is required. Never logged.
        public var authorization: String?
        /// The transmitter's own `iss` (SSF 1.0 §7.1 `issuer`), when it is not the provider's
        /// OpenID issuer; a subject it names with this issuer is the provider's account.
        public var issuer: String?
        /// The transmitter's own `jwks_uri`, when its keys are not the provider's.
        public var jwksURI: String?

        public init(
            audience: String? = nil,
            maxAge: Duration = .seconds(600),
            authorization: String? = nil,
            issuer: String? = nil,
            jwksURI: String? = nil
        ) {
            self.audience = audience
            self.maxAge = maxAge
            self.authorization = authorization
            self.issuer = issuer
            self.jwksURI = jwksURI
        }

        /// Whether `header` is the configured authorization (compared in constant time), or
        /// none is configured.
        public func authorizes(_ header: String?) -> Bool {
            guard let authorization else { return true }
            guard let header else { return false }
            return Digest.constantTimeEqual(Array(header.utf8), Array(authorization.utf8))
        }
    }

    /// When a login asks the provider's UserInfo endpoint for display claims.
    public enum UserInfoUse: String, Sendable, Hashable, CaseIterable {
        /// When the provider has an endpoint and the ID token carries none of `name`, `email`
        /// and `preferred_username`.
        case auto
        /// Whenever the provider has an endpoint.
        case always
        case never
    }

    public init(
        name: String,
        profile: ProviderProfile,
        clientID: String,
        clientAuthentication: ClientAuthentication,
        redirectURI: String,
        scopes: [String] = ["openid", "profile", "email", "offline_access"]
    ) {
        self.name = name
        self.profile = profile
        self.clientID = clientID
        self.clientAuthentication = clientAuthentication
        self.redirectURI = redirectURI
        self.scopes = scopes
    }
}

/// A registered app (an OAuth public client: it proves itself with PKCE, not a secret).
public struct AppClient: Sendable, Hashable {
    public var clientID: String
    /// Compared byte for byte: no normalisation, no prefix match, no wildcard.
    public var redirectURIs: [String]
    /// The providers it may log in with; empty: every configured provider.
    public var providers: [String]
    /// Where it may be sent back after the provider's logout; exact match, like redirect URIs.
    public var postLogoutRedirectURIs: [String]
    /// Whether its tokens are bound to a key it holds (RFC 9449).
    public var dpop: DPoPMode

    public init(
        clientID: String,
        redirectURIs: [String],
        providers: [String] = [],
        postLogoutRedirectURIs: [String] = [],
        dpop: DPoPMode = .off
    ) {
        self.clientID = clientID
        self.redirectURIs = redirectURIs
        self.providers = providers
        self.postLogoutRedirectURIs = postLogoutRedirectURIs
        self.dpop = dpop
    }

    /// Exact match only, as for redirect URIs.
    public func allows(postLogoutRedirectURI uri: String) -> Bool {
        postLogoutRedirectURIs.contains { $0.utf8.elementsEqual(uri.utf8) }
    }

    /// Exact match only (RFC 8252 §8.10, OAuth 2.0 Security BCP §4.1.3).
    public func allows(redirectURI: String) -> Bool {
        redirectURIs.contains { $0.utf8.elementsEqual(redirectURI.utf8) }
    }

    public func allows(provider: String) -> Bool { providers.isEmpty || providers.contains(provider) }
}

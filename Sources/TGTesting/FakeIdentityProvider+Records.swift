extension FakeIdentityProvider {
    /// Every request received, in order.
    public var requests: [RecordedRequest] {
        endpoints.state.withLock { $0.requests }
    }

    /// The requests to one endpoint below the issuer (`"/token"`, `"/authorize"`…).
    public func requests(to endpoint: String) -> [RecordedRequest] {
        endpoints.state.withLock { $0.requests.filter { $0.endpoint == endpoint } }
    }

    /// `GET /.well-known/openid-configuration` requests received.
    public var discoveryFetchCount: Int { endpoints.state.withLock { $0.discoveryFetchCount } }

    /// `GET /jwks` requests received.
    public var jwksFetchCount: Int { endpoints.state.withLock { $0.jwksFetchCount } }

    /// `grant_type=refresh_token` requests received, successful or not.
    public var refreshCount: Int { endpoints.state.withLock { $0.refreshCount } }

    /// The client authentication method of each token request, in order (requests whose method
    /// could not be told, e.g. two at once, are left out).
    public var tokenRequestAuthenticationMethods: [ClientAuthenticationMethod] {
        endpoints.state.withLock { $0.tokenAuthenticationMethods }
    }

    /// Every refresh token issued so far (active or not).
    public var issuedRefreshTokens: [String] { endpoints.state.withLock { Array($0.refreshTokens.keys) } }

    /// The `token` of every revocation request from an authenticated client, in order.
    public var revokedTokens: [String] { endpoints.state.withLock { $0.revokedTokens } }

    /// The parameters of each `/logout` request (`id_token_hint`, `post_logout_redirect_uri`,
    /// `state`, `client_id`…), in order.
    public var logoutRequests: [[String: String]] { endpoints.state.withLock { $0.logoutRequests } }

    /// The query of the last `/authorize` request (first value of each parameter).
    public var lastAuthorizationQuery: [String: String]? {
        endpoints.state.withLock { $0.lastAuthorizationQuery }
    }

    /// Forgets the recorded requests and resets the counters (grants, tokens and settings stay).
    public func clearRecords() {
        endpoints.state.withLock { state in
            state.requests.removeAll()
            state.discoveryFetchCount = 0
            state.jwksFetchCount = 0
            state.refreshCount = 0
            state.tokenAuthenticationMethods.removeAll()
            state.revokedTokens.removeAll()
            state.logoutRequests.removeAll()
            state.lastAuthorizationQuery = nil
        }
    }
}

extension FakeIdentityProvider {
    /// The subject of a live access token (known, not revoked, not expired), or nil: what an API
    /// that trusts this provider checks.
    public func subject(ofAccessToken token: String) -> String? {
        let now = now
        return endpoints.state.withLock { $0.liveGrant(accessToken: token, at: now)?.subject }
    }

    /// How the user of a live access token signed in (`acr`), or nil (none asked, or not live):
    /// what an API that demands a step-up checks.
    public func authenticationContext(ofAccessToken token: String) -> String? {
        let now = now
        return endpoints.state.withLock { $0.liveGrant(accessToken: token, at: now)?.acr }
    }
}

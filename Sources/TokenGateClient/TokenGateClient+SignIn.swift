import Foundation

extension TokenGateClient {
    /// Signs an account in through the browser: PKCE (S256) and `state` made here, the gateway's
    /// login opened, the redirect checked (`state`, and `iss` against the gateway's issuer), the
    /// handoff code redeemed with this device's secret so that the account joins the device's
    /// others. Returns the account, now the current one; a second sign-in adds a second account
    /// (the same account signing in again replaces its credentials).
    ///
    /// `provider`: one of the gateway's providers (nil: its default). `policy`: an Azure AD B2C
    /// user flow. `loginHint`: who is expected to sign in. (An API's step-up: ``stepUp(_:account:)``.)
    @discardableResult
    public func signIn(provider: String? = nil, policy: String? = nil, loginHint: String? = nil) async throws -> Account {
        var extra: [(String, String)] = []
        if let provider { extra.append(("provider", provider)) }
        if let policy { extra.append(("policy", policy)) }
        if let loginHint { extra.append(("login_hint", loginHint)) }
        return try await signIn(extra: extra, makeCurrent: true)
    }

    /// A sign-in with `extra` parameters for `/auth/login`; its account becomes the current one
    /// with `makeCurrent`.
    func signIn(extra: [(String, String)], makeCurrent: Bool) async throws -> Account {
        let metadata = try await metadata()
        let verifier = PKCE.makeVerifier()
        let state = PKCE.makeVerifier()
        var query: [(String, String)] = [
            ("client_id", configuration.clientID), ("redirect_uri", configuration.redirectURI), ("response_type", "code"),
            ("state", state), ("code_challenge", PKCE.challenge(for: verifier)), ("code_challenge_method", "S256"),
        ]
        query += extra
        let login = URL(string: metadata.authorizationEndpoint.absoluteString + "?" + Form.encode(query))!
        let back = try await browser.authenticate(
            at: login,
            callbackScheme: callbackScheme(configuration.redirectURI),
            ephemeral: configuration.ephemeralBrowserSession
        )
        let parameters = Form.query(of: back)
        guard parameters["state"] == state else { throw TokenGateClientError.stateMismatch }
        // RFC 9207: an answer from another authorization server is not this login's.
        if let issuer = parameters["iss"], issuer != metadata.issuer { throw TokenGateClientError.stateMismatch }
        if let error = parameters["error"] {
            throw TokenGateClientError.authorizationFailed(error: error, description: parameters["error_description"])
        }
        guard let code = parameters["code"] else { throw TokenGateClientError.invalidResponse("the redirect carries no code") }
        var form: [(String, String)] = [
            ("grant_type", "authorization_code"), ("code", code), ("code_verifier", verifier),
            ("redirect_uri", configuration.redirectURI), ("client_id", configuration.clientID),
        ]
        if let secret = try self.state().deviceSecret { form.append(("device_secret", secret)) }
        let answer = try await tokenRequest(form, resendsLostAnswer: false)
        guard answer.status == 200 else { throw answer.failure() }
        let tokens = try answer.decode(TokenResponse.self)
        _ = try keep(tokens, makeCurrent: makeCurrent)
        return tokens.account
    }

    /// The scheme of a redirect URI (`com.example.app` of `com.example.app:/oauth2redirect`).
    func callbackScheme(_ redirectURI: String) -> String {
        String(redirectURI.prefix { $0 != ":" })
    }
}

import Foundation
import HTTPTypes
public import TGBase
import TGCrypto
import TGHTTPClient

/// The provider's responses are small; anything larger is refused rather than buffered.
private let maxResponseSize = 256 * 1024

extension OpenIDProvider {
    /// Revokes a refresh token (RFC 7009). Returns false when the provider has no revocation
    /// endpoint (Entra): the caller just forgets the token.
    @discardableResult
    public func revoke(refreshToken: String, policy: String? = nil) async throws(OIDCError) -> Bool {
        let metadata = try await metadata(policy: try configuration.profile.resolvedPolicy(policy))
        guard let endpoint = metadata.revocationEndpoint else { return false }
        let form: [(name: String, value: String)] = [("token", refreshToken), ("token_type_hint", "refresh_token")]
        let (status, body, retryAfter) = try await post(form, to: endpoint, authenticated: true)
        // RFC 7009 §2.2: 200 also for a token that was already invalid.
        guard status == 200 else { throw ErrorResponse.classify(status: status, body: body, retryAfter: retryAfter) }
        return true
    }

    /// What the provider says of TokenGate's client alone, asked without touching any grant.
    public enum ClientCheck: Sendable, Equatable {
        /// The client authenticated: a refusal of a refresh was about the grant.
        case accepted
        /// The client was refused (why, safe to log): the provider or the configuration is at fault.
        case refused(String)
        /// The provider could not answer now.
        case unavailable
        /// The provider has no endpoint to ask, or its answer tells neither way.
        case cannotTell
    }

    /// Asks whether the provider accepts TokenGate's client credentials, with a call that checks
    /// the client and nothing else: revocation (RFC 7009) of a random token that was never
    /// issued, which a provider answers 200 once the client authenticated (§2.2) and 401 (or
    /// `invalid_client`) when it did not. glewlwyd answers a refresh with a wrong secret exactly
    /// as one with a revoked grant, but tells the two apart here.
    public func checkClient() async -> ClientCheck {
        let metadata: ProviderMetadata
        do { metadata = try await self.metadata() } catch { return error.classification == .transient ? .unavailable : .cannotTell }
        guard let endpoint = metadata.revocationEndpoint else { return .cannotTell }
        let form: [(name: String, value: String)] = [("token", SecureRandom.token()), ("token_type_hint", "refresh_token")]
        let answer: (status: Int, body: [UInt8], retryAfter: String?)
        do { answer = try await post(form, to: endpoint, authenticated: true) } catch {
            return error.classification == .transient ? .unavailable : .cannotTell
        }
        if answer.status == 200 { return .accepted }
        let error = ErrorResponse.classify(status: answer.status, body: answer.body, retryAfter: answer.retryAfter)
        switch error.classification {
        case .clientRefused: return .refused("the revocation endpoint refused the client too (HTTP \(answer.status))")
        case .transient: return .unavailable
        default: return .cannotTell
        }
    }

    /// `policy` if this provider still has it (B2C policy names are case-insensitive), else nil
    /// (the default policy): a grant stored under a policy since removed is still refreshed.
    public func knownPolicy(_ policy: String?) -> String? {
        guard let policy, let resolved = try? configuration.profile.resolvedPolicy(policy) else { return nil }
        return resolved
    }

    /// The provider's logout URL to send the browser to, or nil when it has none. OIDC
    /// RP-initiated logout for most; Cognito's `/logout?client_id=…&logout_uri=…`.
    public func endSessionURL(
        idTokenHint: String?,
        postLogoutRedirectURI: String?,
        state: String? = nil,
        policy: String? = nil
    ) async throws(OIDCError) -> String? {
        let metadata = try await metadata(policy: try configuration.profile.resolvedPolicy(policy))
        guard let endpoint = metadata.endSessionEndpoint else { return nil }
        var parameters: [(name: String, value: String)] = []
        if configuration.profile.isCognito {
            parameters.append(("client_id", configuration.clientID))
            if let postLogoutRedirectURI { parameters.append(("logout_uri", postLogoutRedirectURI)) }
        } else {
            if let idTokenHint { parameters.append(("id_token_hint", idTokenHint)) }
            parameters.append(("client_id", configuration.clientID))
            if let postLogoutRedirectURI { parameters.append(("post_logout_redirect_uri", postLogoutRedirectURI)) }
            if let state { parameters.append(("state", state)) }
        }
        return FormURLEncoding.url(endpoint, adding: parameters)
    }

    /// Claims from the UserInfo endpoint, for claims missing from the ID token. The answer's
    /// `sub` must be `subject` (OIDC Core §5.3.4: otherwise it is someone else's).
    public func userInfo(accessToken: String, subject: String, policy: String? = nil) async throws(OIDCError) -> [String: JSONValue] {
        let metadata = try await metadata(policy: try configuration.profile.resolvedPolicy(policy))
        guard let endpoint = metadata.userinfoEndpoint else { throw OIDCError(.misconfigured("provider has no userinfo_endpoint")) }
        var request = try Self.request(.get, endpoint)
        request.headerFields[.authorization] = "Bearer \(accessToken)"
        request.headerFields[.accept] = "application/json"
        let response = try await send(request, body: nil)
        guard response.head.status.code == 200 else {
            if response.head.status.code == 401 { throw OIDCError(.invalidResponse("userinfo refused the access token")) }
            throw ErrorResponse.classify(status: response.head.status.code, body: response.body, retryAfter: response.head.headerFields[.retryAfter])
        }
        guard let claims = JSONValue(parsing: response.body)?.objectValue else {
            throw OIDCError(.invalidResponse("userinfo is not a JSON object"))
        }
        guard claims["sub"]?.stringValue == subject else { throw OIDCError.userInfoSubjectMismatch }
        return claims
    }

    /// UserInfo's claims for a login, as the provider's `userinfo` setting says: nil when it is
    /// not asked (`never`; `auto` with an ID token that already names the user; no endpoint).
    /// Throws ``OIDCError/userInfoSubjectMismatch`` when it names someone else, and whatever else
    /// kept it from answering (the caller decides whether the login can do without).
    public func userInfoClaims(accessToken: String, idToken: IDToken, policy: String?) async throws(OIDCError) -> [String: JSONValue]? {
        let shown = ["name", "email", "preferred_username"]
        switch configuration.userInfo {
        case .never: return nil
        case .auto where shown.contains(where: { idToken.claims[$0] != nil }): return nil
        case .auto, .always: break
        }
        guard try await metadata(policy: configuration.profile.resolvedPolicy(policy)).userinfoEndpoint != nil else { return nil }
        return try await userInfo(accessToken: accessToken, subject: idToken.subject, policy: policy)
    }

    /// A token-endpoint request with client authentication; the parsed success or the
    /// classified failure.
    func tokenRequest(_ form: [(name: String, value: String)], metadata: ProviderMetadata) async throws(OIDCError) -> TokenResponse {
        let (status, body, retryAfter) = try await post(form, to: metadata.tokenEndpoint, authenticated: true)
        guard status == 200 else { throw ErrorResponse.classify(status: status, body: body, retryAfter: retryAfter) }
        return try TokenResponse(json: body, receivedAt: clock.now())
    }

    /// POSTs a form, with the client's credentials when `authenticated`.
    func post(
        _ form: [(name: String, value: String)],
        to endpoint: String,
        authenticated: Bool
    ) async throws(OIDCError) -> (status: Int, body: [UInt8], retryAfter: String?) {
        var form = form
        var request = try Self.request(.post, endpoint)
        request.headerFields[.contentType] = "application/x-www-form-urlencoded"
        request.headerFields[.accept] = "application/json"
        if authenticated {
            try configuration.clientAuthentication.apply(
                clientID: configuration.clientID,
                endpoint: endpoint,
                now: clock.now(),
                form: &form,
                headers: &request.headerFields
            )
        }
        let response = try await send(request, body: Array(FormURLEncoding.encode(form).utf8))
        return (response.head.status.code, response.body, response.head.headerFields[.retryAfter])
    }

    /// GETs a JSON document (discovery, JWKS); non-200 is classified like a token error.
    func get(_ url: String, what: String) async throws(OIDCError) -> [UInt8] {
        var request = try Self.request(.get, url)
        request.headerFields[.accept] = "application/json"
        let response = try await send(request, body: nil)
        guard response.head.status.code == 200 else {
            let status = response.head.status.code
            if status == 429 || status >= 500 {
                throw ErrorResponse.classify(status: status, body: [], retryAfter: response.head.headerFields[.retryAfter])
            }
            throw OIDCError(.invalidResponse("\(what) answered HTTP \(status)"))
        }
        return response.body
    }

    private func send(_ request: HTTPRequest, body: [UInt8]?) async throws(OIDCError) -> HTTPClientResponse {
        do {
            return try await http.send(request, body: body, timeout: configuration.requestTimeout, maxResponseBodySize: maxResponseSize)
        } catch let error as HTTPClientError {
            if error == .invalidURL || error == .insecureURLRefused {
                throw OIDCError(.misconfigured("endpoint URL refused (\(error))"))
            }
            if error == .responseTooLarge { throw OIDCError(.invalidResponse("response too large")) }
            throw OIDCError(.providerUnavailable(retryAfter: nil))
        } catch {
            throw OIDCError(.providerUnavailable(retryAfter: nil))
        }
    }

    /// An `HTTPRequest` for an absolute URL.
    static func request(_ method: HTTPRequest.Method, _ url: String) throws(OIDCError) -> HTTPRequest {
        guard let schemeEnd = url.range(of: "://") else { throw OIDCError(.misconfigured("endpoint is not an absolute URL")) }
        let scheme = String(url[..<schemeEnd.lowerBound]).lowercased()
        let rest = url[schemeEnd.upperBound...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = String(rest[..<slash])
        let path = slash == rest.endIndex ? "/" : String(rest[slash...])
        guard scheme == "https" || scheme == "http", !authority.isEmpty else {
            throw OIDCError(.misconfigured("endpoint is not an http(s) URL"))
        }
        return HTTPRequest(method: method, scheme: scheme, authority: authority, path: path)
    }
}

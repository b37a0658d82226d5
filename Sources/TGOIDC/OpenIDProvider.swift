import Foundation
public import TGBase
import TGCrypto
public import TGHTTPClient

/// TokenGate as the confidential client of one identity provider: authorization requests,
/// code redemption with ID-token validation, refresh, revocation, logout URLs and UserInfo.
/// Safe to share; metadata and keys are cached per instance.
public final class OpenIDProvider: Sendable {
    public let configuration: ProviderConfiguration
    let http: HTTPClient
    let clock: WallClock
    let metadataCache = MetadataCache()
    let keyCaches = KeyCaches()

    /// What a successful login yields.
    public struct Login: Sendable {
        public var tokens: TokenResponse
        /// The validated ID token (nil only for plain OAuth 2.0 providers).
        public var idToken: IDToken?
    }

    /// What a successful refresh yields.
    public struct Refresh: Sendable {
        public var tokens: TokenResponse
        /// A validated ID token, when the provider sent one.
        public var idToken: IDToken?
    }

    public init(configuration: ProviderConfiguration, httpClient: HTTPClient, clock: WallClock = .system) {
        self.configuration = configuration
        self.http = httpClient
        self.clock = clock
    }

    public var name: String { configuration.name }

    /// The metadata of the authority of `policy` (B2C) or of the provider.
    public func metadata(policy: String? = nil) async throws(OIDCError) -> ProviderMetadata {
        let profile = configuration.profile
        guard let url = try profile.discoveryURL(policy: policy) else {
            guard case .oauth2(let metadata) = profile else { throw OIDCError(.misconfigured("no metadata")) }
            return metadata
        }
        let lifetime = configuration.metadataLifetime
        return try await metadataCache.metadata(for: url, now: clock.now(), lifetime: lifetime) { [self] () throws(OIDCError) in
            let body = try await get(url, what: "discovery")
            let document = try ProviderMetadata(discoveryDocument: body, acceptingIssuer: profile.acceptsDiscoveredIssuer)
            return profile.completing(document)
        }
    }

    /// Builds the redirect to the provider: fresh state, nonce and PKCE verifier every time.
    public func authorizationRequest(_ options: AuthorizationOptions = AuthorizationOptions()) async throws(OIDCError) -> AuthorizationRequest {
        try options.validate()
        let profile = configuration.profile
        let policy = try profile.resolvedPolicy(options.policy)
        let metadata = try await metadata(policy: policy)
        let pending = PendingAuthorization(
            provider: configuration.name,
            policy: policy,
            state: SecureRandom.token(),
            nonce: SecureRandom.token(),
            codeVerifier: PKCE.makeVerifier(),
            issuer: metadata.issuer
        )
        var scopes = configuration.scopes
        if profile.issuesIDTokens, !scopes.contains("openid") { scopes.insert("openid", at: 0) }
        for scope in options.extraScopes where !scopes.contains(scope) { scopes.append(scope) }
        var parameters: [(name: String, value: String)] = [
            ("response_type", "code"),
            ("client_id", configuration.clientID),
            ("redirect_uri", configuration.redirectURI),
            ("scope", profile.adjustedScopes(scopes).joined(separator: " ")),
            ("state", pending.state),
            ("nonce", pending.nonce),
            ("code_challenge", PKCE.challenge(for: pending.codeVerifier)),
            ("code_challenge_method", "S256"),
        ]
        if configuration.responseMode == .formPost { parameters.append(("response_mode", "form_post")) }
        parameters += profile.authorizationParameters
        if let prompt = try mergedPrompt(app: options.prompt) { parameters.append(("prompt", prompt)) }
        if let hint = options.loginHint { parameters.append(("login_hint", hint)) }
        if let hint = options.domainHint { parameters.append(("domain_hint", hint)) }
        parameters += options.requirement.parameters
        if let claims = options.claims { parameters.append(("claims", claims)) }
        let taken = Set(parameters.map(\.name))
        parameters += configuration.extraAuthorizationParameters.filter { !taken.contains($0.name) }
        return AuthorizationRequest(url: FormURLEncoding.url(metadata.authorizationEndpoint, adding: parameters), pending: pending)
    }

    /// Redeems the authorization code of a callback. `callbackIssuer` is the callback's `iss`
    /// parameter (RFC 9207) if it had one.
    public func redeem(code: String, for pending: PendingAuthorization, callbackIssuer: String?) async throws(OIDCError) -> Login {
        let metadata = try await metadata(policy: pending.policy)
        if let callbackIssuer {
            guard callbackIssuer == pending.issuer else { throw OIDCError(.issuerMismatch) }
        } else if metadata.sendsIssuerInAuthorizationResponse {
            // RFC 9207 §2.4: a provider that promises `iss` and omits it may be an impostor.
            throw OIDCError(.issuerMismatch)
        }
        let form: [(name: String, value: String)] = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", configuration.redirectURI),
            ("code_verifier", pending.codeVerifier),
        ]
        let tokens = try await tokenRequest(form, metadata: metadata)
        guard configuration.profile.issuesIDTokens else { return Login(tokens: tokens, idToken: nil) }
        guard let raw = tokens.idToken else { throw OIDCError(.invalidResponse("token response lacks id_token")) }
        let idToken = try await validate(raw, metadata: metadata, nonce: pending.nonce, subject: nil)
        return Login(tokens: tokens, idToken: idToken)
    }

    /// Uses a refresh token. `scopes` asks for a token for other scopes than the login's (Entra:
    /// another resource); `subject` is the account's, which a returned ID token must keep.
    public func refresh(
        _ refreshToken: String,
        scopes: [String]? = nil,
        policy: String? = nil,
        subject: String? = nil
    ) async throws(OIDCError) -> Refresh {
        let metadata = try await metadata(policy: try configuration.profile.resolvedPolicy(policy))
        var form: [(name: String, value: String)] = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if let scopes { form.append(("scope", configuration.profile.adjustedScopes(scopes).joined(separator: " "))) }
        let tokens: TokenResponse
        do {
            tokens = try await tokenRequest(form, metadata: metadata)
        } catch {
            // Without a `scope` nothing but the grant was asked for: a refused scope refuses it.
            if scopes == nil, case .scopeRefused(let code) = error.kind { throw OIDCError(.grantRejected(code: code)) }
            throw error
        }
        guard let raw = tokens.idToken, configuration.profile.issuesIDTokens else { return Refresh(tokens: tokens, idToken: nil) }
        let idToken = try await validate(raw, metadata: metadata, nonce: nil, subject: subject)
        return Refresh(tokens: tokens, idToken: idToken)
    }

    func validate(_ raw: String, metadata: ProviderMetadata, nonce: String?, subject: String?) async throws(OIDCError) -> IDToken {
        guard let jwksURI = metadata.jwksURI else { throw OIDCError(.misconfigured("provider publishes no jwks_uri")) }
        let now = clock.now()
        let expectations = IDTokenExpectations(
            metadata: metadata,
            clientID: configuration.clientID,
            nonce: nonce,
            subject: subject,
            allowedTenants: Set(configuration.profile.allowedTenants.map { $0.lowercased() }),
            allowedAlgorithms: configuration.allowedAlgorithms,
            clockSkew: configuration.clockSkew,
            now: now
        )
        return try await IDTokenValidator.validate(raw, expecting: expectations) { [self] (keyID: String?) throws(OIDCError) in
            try await candidateKeys(keyID, jwksURI: jwksURI, now: now)
        }
    }

    /// The provider's published keys that may have signed a token naming `keyID`, from the
    /// JWKS cache (fetched again for an unknown `kid`, at most once per refetch interval, and
    /// once the set is older than its maximum age). Every token TokenGate checks comes through here.
    func candidateKeys(_ keyID: String?, jwksURI: String, now: Date) async throws(OIDCError) -> [PublicKey] {
        let cache = await keyCaches.cache(for: jwksURI)
        return try await cache.candidates(
            keyID: keyID,
            now: now,
            refetchInterval: configuration.jwksRefetchInterval,
            maxAge: configuration.jwksMaxAge
        ) { () throws(OIDCError) in
            let body = try await self.get(jwksURI, what: "JWKS")
            guard let set = try? JWKSet(json: body) else { throw OIDCError(.invalidResponse("JWKS is not a key set")) }
            return set
        }
    }
}

/// One JWKS cache per key-set URL (B2C policies may share one).
actor KeyCaches {
    private var caches: [String: JWKSCache] = [:]

    func cache(for url: String) -> JWKSCache {
        if let cache = caches[url] { return cache }
        let cache = JWKSCache()
        caches[url] = cache
        return cache
    }
}

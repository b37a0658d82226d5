import Foundation
public import Logging
public import TGBase
import TGCrypto
public import TGOIDC
public import TGStore

/// A login: the app's authorization request checked and sent on to the provider, then the
/// provider's callback, up to the handoff code the app redeems (``TokenGrants``).
public final class LoginFlow: Sendable {
    let store: Store
    let vault: TokenVault
    let providers: [String: OpenIDProvider]
    let clients: [String: AppClient]
    let settings: AuthSettings
    /// TokenGate's own issuer identifier (its public base URL), sent as `iss` to the app.
    let issuer: String
    /// Takes the login's own upstream access token.
    let upstream: UpstreamTokens
    let clock: WallClock
    let logger: Logger

    public init(
        store: Store,
        vault: TokenVault,
        providers: [String: OpenIDProvider],
        clients: [String: AppClient],
        settings: AuthSettings,
        issuer: String,
        upstream: UpstreamTokens,
        clock: WallClock = .system,
        logger: Logger
    ) {
        self.store = store
        self.vault = vault
        self.providers = providers
        self.clients = clients
        self.settings = settings
        self.issuer = issuer
        self.upstream = upstream
        self.clock = clock
        self.logger = logger
    }

    /// Checks the app's request and stores a pending login; returns the provider's authorization
    /// URL. An unknown client or redirect URI is refused here and never redirected to.
    public func beginLogin(_ request: LoginRequest) async throws -> String {
        guard let clientID = request.clientID, let client = clients[clientID] else {
            throw AuthProblem(.unknownClient, "client_id is missing or names no registered app.")
        }
        guard let redirectURI = request.redirectURI, client.allows(redirectURI: redirectURI) else {
            throw AuthProblem(
                .redirectURINotRegistered,
                "redirect_uri is missing or not one of this app's registered redirect URIs (compared exactly)."
            )
        }
        guard request.responseType == "code" else {
            throw AuthProblem(.invalidRequest, "response_type must be code.")
        }
        guard let state = request.state, Syntax.isVisibleASCII(state, limit: 1024) else {
            throw AuthProblem(.invalidRequest, "state is required: 1 to 1024 visible ASCII characters.")
        }
        guard request.codeChallengeMethod == "S256", let challenge = request.codeChallenge, Syntax.isS256Challenge(challenge)
        else {
            throw AuthProblem(
                .invalidRequest,
                "code_challenge (43 base64url characters) with code_challenge_method=S256 is required (RFC 7636)."
            )
        }
        let provider = try chooseProvider(request.provider, for: client)
        var options = try loginOptions(request)
        let stepUp = try await stepUp(request, provider: provider.name)
        if options.loginHint == nil { options.loginHint = stepUp.loginHint }
        let authorization: AuthorizationRequest
        do {
            authorization = try await provider.authorizationRequest(options)
        } catch {
            if request.policy != nil, case .misconfigured = error.kind {
                throw AuthProblem(.invalidRequest, "policy names no policy of this provider.")
            }
            throw Self.problem(error)
        }
        let pending = authorization.pending
        let now = clock.now()
        let stateHash = OpaqueToken.hash(pending.state)
        let verifier = try vault.seal(pending.codeVerifier, context: TokenVault.Context.pendingLogin(stateHash))
        let record = PendingLoginRecord(
            stateHash: stateHash,
            clientID: clientID,
            redirectURI: redirectURI,
            appState: state,
            codeChallenge: challenge,
            provider: provider.name,
            policy: pending.policy,
            nonce: pending.nonce,
            codeVerifier: verifier,
            keyID: vault.currentKeyID,
            issuer: pending.issuer,
            createdAt: now,
            expiresAt: now.addingTimeInterval(settings.pendingLoginTTL),
            acrValues: options.requirement.acrValues.isEmpty ? nil : options.requirement.acrValues.joined(separator: " "),
            maxAge: options.requirement.maxAge,
            stepUpAccount: stepUp.account,
            stepUpResource: stepUp.resource
        )
        try await store.transaction { try await $0.loginStates.begin(record) }
        return authorization.url
    }

    private func chooseProvider(_ name: String?, for client: AppClient) throws(AuthProblem) -> OpenIDProvider {
        if let name {
            guard let provider = providers[name], client.allows(provider: name) else {
                throw AuthProblem(.unknownProvider, "provider names no identity provider this app may use.")
            }
            return provider
        }
        let usable = providers.keys.filter { client.allows(provider: $0) }.sorted()
        guard usable.count == 1, let provider = providers[usable[0]] else {
            throw AuthProblem(
                .unknownProvider,
                usable.isEmpty
                    ? "No identity provider is configured for this app."
                    : "Several providers are configured: name one with provider= (\(usable.joined(separator: ", ")))."
            )
        }
        return provider
    }

    private func loginOptions(_ request: LoginRequest) throws(AuthProblem) -> AuthorizationOptions {
        var options = AuthorizationOptions(policy: request.policy, prompt: request.prompt)
        if let scope = request.scope {
            guard Syntax.isVisibleASCII(scope, limit: 1024), !scope.contains("\""), !scope.contains("\\") else {
                throw AuthProblem(.invalidRequest, "scope must be space-separated scope tokens (at most 1024 characters).")
            }
            options.extraScopes = scope.split(separator: " ").map(String.init)
        }
        for (name, hint) in [("login_hint", request.loginHint), ("domain_hint", request.domainHint)] {
            guard let hint else { continue }
            guard !hint.isEmpty, hint.utf8.count <= 256, !hint.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else { throw AuthProblem(.invalidRequest, "\(name) must be 1 to 256 characters without control characters.") }
        }
        options.loginHint = request.loginHint
        options.domainHint = request.domainHint
        do {
            options.requirement = try AuthenticationRequirement(acrValues: request.acrValues, maxAge: request.maxAge)
        } catch {
            throw Self.problem(error)
        }
        options.claims = request.claims
        return options
    }

    /// The problem an OIDC failure before the redirect stands for.
    static func problem(_ error: OIDCError) -> AuthProblem {
        switch error.kind {
        case .invalidRequest(let message):
            return AuthProblem(.invalidRequest, message)
        case .providerUnavailable(let retryAfter):
            return AuthProblem(
                .idpUnavailable,
                "The identity provider cannot be reached; try again shortly.",
                retryAfter: Int(retryAfter?.components.seconds ?? 30)
            )
        default:
            return AuthProblem(.idpUnavailable, "The identity provider is not usable right now; an operator has been told.", retryAfter: 60)
        }
    }
}

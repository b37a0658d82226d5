import Foundation
import HTTPTypes
import TGBase
import TGCrypto
import TGHTTPServer

/// What a successful grant produced, taken out of the lock to be signed and serialized.
struct IssuedTokens {
    var members: [String: Any]
    var idTokenClaims: [String: Any]?
    var keys: IDTokenKeys
}

extension FakeEndpoints {
    /// `/token`: misbehaviours first (a delay makes the answer async), then client
    /// authentication, then the grant.
    func token(_ request: ServerRequest, form pairs: [(name: String, value: String)], isForm: Bool) -> HTTPServer.Reply {
        let grantType = pairs.first { $0.name == "grant_type" }?.value
        let misbehaviours = state.withLock { state in
            if grantType == "refresh_token" { state.refreshCount += 1 }
            return state.takeMisbehaviours(grantType: grantType)
        }
        if misbehaviours.contains(where: \.needsUnpublishedKey) { prepareUnpublishedKey() }
        let delay = misbehaviours.reduce(Duration.zero) { total, misbehaviour in
            if case .delay(let delay) = misbehaviour { total + delay } else { total }
        }
        let gates = misbehaviours.compactMap { misbehaviour in
            if case .held(let gate) = misbehaviour { gate } else { nil }
        }
        guard delay > .zero || !gates.isEmpty else { return .response(tokenResponse(request, pairs, isForm: isForm, misbehaviours)) }
        return .async { request in
            if delay > .zero { try? await Task.sleep(for: delay) }
            for gate in gates { await gate.wait() }
            return self.tokenResponse(request, pairs, isForm: isForm, misbehaviours)
        }
    }

    /// Makes the never-published key for the current signing algorithm, once (the first in the
    /// process takes a while, so not under the state's lock).
    private func prepareUnpublishedKey() {
        let algorithm = state.withLock { $0.unpublishedKeys[$0.settings.signingAlgorithm] == nil ? $0.settings.signingAlgorithm : nil }
        guard let algorithm, let key = try? FakeSigningKey.make(algorithm, shared: .unpublished) else { return }
        state.withLock { state in
            if state.unpublishedKeys[algorithm] == nil { state.unpublishedKeys[algorithm] = key }
        }
    }

    private func tokenResponse(
        _ request: ServerRequest,
        _ pairs: [(name: String, value: String)],
        isForm: Bool,
        _ misbehaviours: [FakeIdentityProvider.TokenMisbehaviour]
    ) -> ServerResponse {
        if let replacement = misbehaviours.first(where: \.replacesAnswer) { return Self.replacementAnswer(replacement) }
        guard isForm else { return Self.oauthError("invalid_request", "the body must be application/x-www-form-urlencoded") }
        guard let form = Self.uniqueParameters(pairs) else { return Self.oauthError("invalid_request", "a parameter is repeated") }
        let now = now()
        let outcome: Result<IssuedTokens, FakeAnswer> = state.withLock { state in
            let outcome = Self.tokenOutcome(request, form: form, state: &state, now: now)
            // glewlwyd answers a grant it does not honour with 400 and an empty body.
            if case .failure(let answer) = outcome, answer.rejectsGrant, let status = state.settings.rejectedGrantEmptyBodyStatus {
                return .failure(FakeAnswer(ServerResponse(status: HTTPResponse.Status(code: status))))
            }
            // glewlwyd 2.7 answers a wrong client secret at /token the same way (/revoke says 401).
            if case .failure(let answer) = outcome, answer.refusesClient, let status = state.settings.refusedClientEmptyBodyStatus {
                return .failure(FakeAnswer(ServerResponse(status: HTTPResponse.Status(code: status))))
            }
            return outcome
        }
        switch outcome {
        case .failure(let answer):
            return answer.response
        case .success(let issued):
            return Self.tokenAnswer(issued, misbehaviours: misbehaviours, now: now)
        }
    }

    private static func tokenOutcome(
        _ request: ServerRequest,
        form: [String: String],
        state: inout FakeState,
        now: Date
    ) -> Result<IssuedTokens, FakeAnswer> {
        let client: FakeClient
        switch Self.authenticateClient(request, form: form, state: &state, now: now) {
        case .refused(let answer, let method):
            if let method { state.tokenAuthenticationMethods.append(method) }
            return .failure(FakeAnswer(answer, refusesClient: true))
        case .authenticated(let authenticated, let method):
            state.tokenAuthenticationMethods.append(method)
            client = authenticated
        }
        switch form["grant_type"] {
        case "authorization_code": return Self.redeemCode(form, client: client, state: &state, now: now)
        case "refresh_token": return Self.refresh(form, client: client, state: &state, now: now)
        case nil: return .failure(FakeAnswer(Self.oauthError("invalid_request", "grant_type is required")))
        default: return .failure(FakeAnswer(Self.oauthError("unsupported_grant_type", nil)))
        }
    }

    /// The parameters by name, or nil when one is repeated (RFC 6749 §3.2).
    static func uniqueParameters(_ pairs: [(name: String, value: String)]) -> [String: String]? {
        var form: [String: String] = [:]
        for (name, value) in pairs {
            guard form[name] == nil else { return nil }
            form[name] = value
        }
        return form
    }

    private static func invalidGrant(_ description: String) -> Result<IssuedTokens, FakeAnswer> {
        .failure(FakeAnswer(oauthError("invalid_grant", description), rejectsGrant: true))
    }

    private static func redeemCode(
        _ form: [String: String],
        client: FakeClient,
        state: inout FakeState,
        now: Date
    ) -> Result<IssuedTokens, FakeAnswer> {
        guard let code = form["code"], let redirectURI = form["redirect_uri"] else {
            return .failure(FakeAnswer(oauthError("invalid_request", "code and redirect_uri are required")))
        }
        guard let record = state.codes[code] else { return invalidGrant("unknown authorization code") }
        guard !record.used else {
            // RFC 6749 §4.1.2: a code used twice revokes what was issued from it.
            state.grants[record.grantID]?.revoked = true
            return invalidGrant("the authorization code was already used")
        }
        guard record.expires > now else { return invalidGrant("the authorization code has expired") }
        guard let grant = state.grants[record.grantID], grant.clientID == client.id, !grant.revoked else {
            return invalidGrant("the authorization code was issued to another client")
        }
        guard record.redirectURI == redirectURI else { return invalidGrant("redirect_uri differs from the authorization request") }
        guard let verifier = form["code_verifier"], isPKCEValue(verifier),
            Base64URL.encode(Digest.sha256(Array(verifier.utf8))) == record.codeChallenge
        else { return invalidGrant("PKCE verification failed") }
        state.codes[code]?.used = true
        return .success(issue(grantID: record.grantID, grant: grant, includesNonce: true, newRefreshToken: true, state: &state, now: now))
    }

    private static func refresh(
        _ form: [String: String],
        client: FakeClient,
        state: inout FakeState,
        now: Date
    ) -> Result<IssuedTokens, FakeAnswer> {
        guard let token = form["refresh_token"] else {
            return .failure(FakeAnswer(oauthError("invalid_request", "refresh_token is required")))
        }
        guard let record = state.refreshTokens[token], let grant = state.grants[record.grantID], grant.clientID == client.id else {
            return invalidGrant("unknown refresh token")
        }
        switch record.status {
        case .active:
            break
        case .rotated:
            if state.settings.revokesGrantOnRefreshTokenReuse { state.grants[record.grantID]?.revoked = true }
            return invalidGrant("the refresh token was already used")
        case .revoked:
            return invalidGrant("the refresh token was revoked")
        }
        guard !grant.revoked else { return invalidGrant("the grant was revoked") }
        if let expires = record.expires, expires <= now { return invalidGrant("the refresh token has expired") }
        let rotates = state.settings.rotatesRefreshTokens
        if rotates { state.refreshTokens[token]?.status = .rotated }
        return .success(issue(grantID: record.grantID, grant: grant, includesNonce: false, newRefreshToken: rotates, state: &state, now: now))
    }

    /// Mints the tokens of one successful grant request and records them.
    private static func issue(
        grantID: Int,
        grant: FakeGrant,
        includesNonce: Bool,
        newRefreshToken: Bool,
        state: inout FakeState,
        now: Date
    ) -> IssuedTokens {
        let settings = state.settings
        let accessToken = SecureRandom.token()
        state.accessTokens[accessToken] = FakeAccessToken(
            grantID: grantID,
            expires: now.addingTimeInterval(settings.accessTokenLifetime.timeInterval)
        )
        var members: [String: Any] = [
            "access_token": accessToken,
            "token_type": "Bearer",
            "expires_in": Int(settings.accessTokenLifetime.timeInterval),
        ]
        if !grant.scope.isEmpty { members["scope"] = grant.scope }
        let offline = settings.refreshTokenPrompt.map(grant.prompt.contains) ?? true
        if settings.issuesRefreshTokens, newRefreshToken, offline {
            let refreshToken = SecureRandom.token()
            let lifetime = settings.refreshTokenLifetime?.timeInterval
            state.refreshTokens[refreshToken] = FakeRefreshToken(grantID: grantID, expires: lifetime.map { now.addingTimeInterval($0) })
            members["refresh_token"] = refreshToken
            if let lifetime { members["refresh_token_expires_in"] = Int(lifetime) }
        }
        let keys = IDTokenKeys(
            signing: state.signingKey(for: settings.signingAlgorithm),
            publishedRSA: state.signingKey(for: .rs256),
            unpublished: state.unpublishedKeys[settings.signingAlgorithm]
        )
        var issued = IssuedTokens(members: members, keys: keys)
        if grant.scope.split(separator: " ").contains("openid") {
            issued.idTokenClaims = idTokenClaims(grant: grant, includesNonce: includesNonce, accessToken: accessToken, state: state, now: now)
        }
        return issued
    }

    private static func idTokenClaims(grant: FakeGrant, includesNonce: Bool, accessToken: String, state: FakeState, now: Date) -> [String: Any] {
        let settings = state.settings
        let issuedAt = Int(now.timeIntervalSince1970)
        var claims: [String: Any] = [:]
        for (name, value) in settings.extraClaims { claims[name] = value }
        claims["iss"] = state.issuer
        claims["sub"] = grant.subject
        claims["aud"] = settings.extraAudiences.isEmpty ? grant.clientID : [grant.clientID] + settings.extraAudiences
        if settings.includesAuthorizedParty || !settings.extraAudiences.isEmpty { claims["azp"] = grant.clientID }
        claims["iat"] = issuedAt
        claims["exp"] = issuedAt + Int(settings.idTokenLifetime.timeInterval)
        claims["auth_time"] = Int(grant.authTime.timeIntervalSince1970)
        if let acr = grant.acr { claims["acr"] = acr }
        if settings.includesNotBefore { claims["nbf"] = issuedAt }
        if includesNonce, let nonce = grant.nonce { claims["nonce"] = nonce }
        if settings.includesSessionID { claims["sid"] = grant.sessionID }
        // OIDC Core §3.1.3.6: the left half of the SHA-256 of the access token (RS256 and ES256).
        claims["at_hash"] = Base64URL.encode(Array(Digest.sha256(Array(accessToken.utf8)).prefix(16)))
        return claims
    }
}

/// A finished error answer, passed out of a locked section.
struct FakeAnswer: Error {
    var response: ServerResponse
    /// A refresh or code the provider does not honour (answered per `rejectedGrantAnswer`).
    var rejectsGrant = false
    /// The client did not authenticate (answered per `refusedClientEmptyBodyStatus`).
    var refusesClient = false

    init(_ response: ServerResponse, rejectsGrant: Bool = false, refusesClient: Bool = false) {
        self.response = response
        self.rejectsGrant = rejectsGrant
        self.refusesClient = refusesClient
    }
}

import Foundation
import HTTPTypes
import TGHTTPServer

extension FakeEndpoints {
    /// `/revoke` (RFC 7009): authenticates the client like `/token`, then answers 200 whether or
    /// not the token was known. Revoking a refresh token revokes its whole grant (§2.1: the access
    /// tokens too); revoking an access token revokes only that token. Tokens of other clients are
    /// left alone.
    func revoke(_ request: ServerRequest, form pairs: [(name: String, value: String)], isForm: Bool) -> ServerResponse {
        guard isForm else { return Self.oauthError("invalid_request", "the body must be application/x-www-form-urlencoded") }
        guard let form = Self.uniqueParameters(pairs) else { return Self.oauthError("invalid_request", "a parameter is repeated") }
        let now = now()
        return state.withLock { state in
            let client: FakeClient
            switch Self.authenticateClient(request, form: form, state: &state, now: now) {
            case .refused(let answer, _): return answer
            case .authenticated(let authenticated, _): client = authenticated
            }
            guard let token = form["token"] else { return Self.oauthError("invalid_request", "token is required") }
            state.revokedTokens.append(token)
            if let failure = state.settings.revocationFailure {
                return Self.response(for: failure, malformedBody: "{")
            }
            if let refresh = state.refreshTokens[token], state.grants[refresh.grantID]?.clientID == client.id {
                state.refreshTokens[token]?.status = .revoked
                state.grants[refresh.grantID]?.revoked = true
            } else if let access = state.accessTokens[token], state.grants[access.grantID]?.clientID == client.id {
                state.accessTokens[token]?.revoked = true
            }
            return ServerResponse(status: .ok, headerFields: [.cacheControl: "no-store"])
        }
    }
}

import Foundation
import TGAuth
import TGHTTPServer

/// The name the proxy's routes (`Sources/TGApp/Proxy/`) give what they call on the auth side,
/// kept while the proxy moves to a module of its own; the proxy's calls are ``UpstreamTokens``'
/// and ``DPoPBinding``'s, which it should take itself.
typealias AuthService = ProxyAuth

/// The two pieces of the auth flow an API call uses: its session and upstream token
/// (``UpstreamTokens``) and its session's DPoP binding (``DPoPBinding``), under the names the
/// proxy calls them by.
struct ProxyAuth: Sendable {
    let upstream: UpstreamTokens
    let dpop: DPoPBinding

    func authenticateForAPI(accessToken: String) async throws -> SessionContext {
        try await upstream.authenticateForAPI(accessToken: accessToken)
    }

    func cachedSessionForAPI(accessToken: String) throws -> SessionContext? {
        try upstream.cachedSessionForAPI(accessToken: accessToken)
    }

    func cachedSessionForAPI(accessToken: Substring) throws -> SessionContext? {
        try upstream.cachedSessionForAPI(accessToken: accessToken)
    }

    func cachedUpstreamAccessToken(for context: SessionContext, scopes: [String]) -> UpstreamAccessToken? {
        upstream.cachedUpstreamAccessToken(for: context, scopes: scopes)
    }

    func cachedUpstreamAccessToken(for context: SessionContext, scopes: UpstreamScopes) -> UpstreamAccessToken? {
        upstream.cachedUpstreamAccessToken(for: context, scopes: scopes)
    }

    func upstreamAccessToken(for context: SessionContext, scopes: [String], rejected: String? = nil) async throws -> UpstreamAccessToken {
        try await upstream.upstreamAccessToken(for: context, scopes: scopes, rejected: rejected)
    }
}

extension DPoPGate {
    /// ``check(_:session:token:dpop:)`` for the proxy's routes.
    static func check(_ request: ServerRequest, session: SessionContext, token: PresentedToken, auth: ProxyAuth) async throws {
        try await check(request, session: session, token: token, dpop: auth.dpop)
    }

    /// ``needsProof(session:token:dpop:)`` for the proxy's routes.
    static func needsProof(session: SessionContext, token: PresentedToken, auth: ProxyAuth) throws(DPoPError) -> Bool {
        try needsProof(session: session, token: token, dpop: auth.dpop)
    }
}

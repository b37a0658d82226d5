import HTTPTypes
import Logging
import TGAuth
import TGHTTPServer

/// `POST /auth/backchannel-logout/{provider}`: where a provider sends logout tokens when its user
/// signs out there or an administrator ends their sessions (OpenID Connect Back-Channel Logout
/// 1.0 §2.5–2.8). Register `<public_base_url>/auth/backchannel-logout/<name>` at the provider as
/// the client's `backchannel_logout_uri` (`tokengate check-config` prints each).
///
/// Answers: 200 with `Cache-Control: no-store` once the token is acted on (also when it matched
/// no session); 400 `invalid_request` (RFC 6749 §5.2 JSON) for a request or token that is not
/// valid, a replayed one included; 404 for a provider that is not configured or takes no logout
/// tokens; 503 `temporarily_unavailable` when the provider's keys or the database cannot be
/// reached (the provider may send it again); 429 past the rate limit.
enum BackChannelLogoutRoute {
    static let pattern = "/auth/backchannel-logout/{provider}"
    /// The largest request acted on: a logout token is well under this (a few hundred bytes to
    /// 2 KB with the providers of docs/providers.md). A larger one is refused unread past
    /// ``serverBodyLimit`` (413), and with a 400 below it.
    static let maxBodySize = 16 * 1024
    static let serverBodyLimit = 64 * 1024

    static func add(to router: inout Router, logouts: Logouts, rateLimit: RateLimiter, requestTimeout: Duration) {
        let policy = RoutePolicy(
            rateLimit: rateLimit,
            refusal: .oauth,
            limits: .fixed(HTTPServer.RequestLimits(maxBodySize: serverBodyLimit, requestTimeout: requestTimeout))
        )
        router.add(
            .post,
            pattern,
            policy: policy,
            .async { request, info in
                let provider = info.parameters["provider"] ?? ""
                guard logouts.acceptsBackChannelLogout(provider: provider) else {
                    return Problem(
                        status: .notFound,
                        code: "not_found",
                        detail: "No configured provider of this name takes back-channel logout tokens (tokengate check-config lists them)."
                    ).response()
                }
                // A database that cannot answer is a 503 in this endpoint's error form (the
                // policy's `.oauth`), not problem+json: a provider reads RFC 6749 §5.2.
                _ = try await logouts.backChannelLogout(provider: provider, logoutToken: try logoutToken(request))
                return ServerResponse(status: .ok, headerFields: [.cacheControl: "no-store"])
            }
        )
    }

    /// The request's `logout_token` (§2.5: a form-encoded POST with that one parameter).
    static func logoutToken(_ request: ServerRequest) throws(OAuthError) -> String {
        guard request.body.count <= maxBodySize else {
            throw OAuthError(.invalidRequest, "The request is larger than any logout token (at most \(maxBodySize / 1024) KiB).")
        }
        // The token endpoint's form rules: form-encoded, UTF-8, each parameter once.
        let parameters = try TokenEndpoint.parameters(request)
        guard let token = parameters["logout_token"], !token.isEmpty else {
            throw OAuthError(.invalidRequest, "logout_token is required (a form-encoded POST, OpenID Connect Back-Channel Logout 1.0 §2.5).")
        }
        return token
    }
}

import Foundation
import HTTPTypes
import Logging
import TGAuth
import TGHTTPServer

/// `POST /auth/ssf/{provider}`: where a provider, as an OpenID Shared Signals Framework 1.0
/// transmitter, pushes security event tokens (RFC 8935) about its users: CAEP
/// `session-revoked`, `credential-change`, `token-claims-change`, RISC `account-disabled`,
/// `account-purged`, `sessions-revoked` (``SecurityEventType``). Off unless the provider has
/// `shared_signals: true`; the transmitter's stream then delivers to
/// `<public_base_url>/auth/ssf/<name>` with method `urn:ietf:rfc:8935` (`tokengate check-config`
/// prints it).
///
/// Answers (RFC 8935 §2.2–2.4): 202 with an empty body once the token is acted on (also when it
/// matched no one, or carried only events TokenGate does not act on, or was acted on before: a
/// transmitter's retry); 400 with `{"err": …, "description": …}` (`application/json`) for a
/// request or token that is not valid; 404 for a provider that takes no security event tokens; 503
/// `temporarily_unavailable` (RFC 6749 §5.2 JSON) when the provider's keys or the database cannot
/// be reached (the transmitter retries); 429 past the rate limit; 413 past the server's body limit.
enum SharedSignalsRoute {
    static let pattern = "/auth/ssf/{provider}"
    /// RFC 8935 §2: the SET itself is the body, of this media type.
    static let contentType = "application/secevent+jwt"
    /// The largest SET acted on (SETs are a few hundred bytes to a few KB). A larger one is
    /// refused unread past ``serverBodyLimit`` (413), and with a 400 below it.
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
                guard logouts.acceptsSecurityEvents(provider: provider) else {
                    return Problem(
                        status: .notFound,
                        code: "not_found",
                        detail:
                            "No configured provider of this name takes security event tokens (shared_signals: true; tokengate check-config lists them)."
                    ).response()
                }
                _ = try await logouts.receiveSecurityEvent(
                    provider: provider,
                    token: try securityEventToken(request),
                    authorization: request.fields.first(.authorization)
                )
                return ServerResponse(status: .accepted, headerFields: [.cacheControl: "no-store"])
            }
        )
    }

    /// The request's SET (RFC 8935 §2.1: the body, typed `application/secevent+jwt`).
    static func securityEventToken(_ request: ServerRequest) throws(SecurityEventRefusal) -> String {
        let type = request.fields.first(.contentType)?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
        guard type?.lowercased() == contentType else {
            throw SecurityEventRefusal(.invalidRequest, "Send the security event token as the body, typed \(contentType) (RFC 8935 §2.1).")
        }
        guard request.body.count <= maxBodySize else {
            throw SecurityEventRefusal(.invalidRequest, "The request is larger than any security event token (at most \(maxBodySize / 1024) KiB).")
        }
        guard let text = String(validating: request.body, as: UTF8.self) else {
            throw SecurityEventRefusal(.invalidRequest, "The body is not UTF-8; send the compact serialization of the token.")
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else { throw SecurityEventRefusal(.invalidRequest, "The body is empty; send the security event token.") }
        return token
    }
}

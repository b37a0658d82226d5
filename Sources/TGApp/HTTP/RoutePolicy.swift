import HTTPTypes
import TGAuth
import TGHTTPServer

/// What a route requires before its handler runs, declared with the route
/// (``Router/add(_:_:policy:_:)``) and applied by ``Application`` for every route alike: the
/// rate limit, the session a bearer token must name, and the body limit and deadline the server
/// enforces while the request arrives.
public struct RoutePolicy: Sendable {
    /// Requests per client address and minute; past it the handler does not run.
    var rateLimit: RateLimiter?
    /// How a refused request is answered, and the form of the route's other errors
    /// (``Application``'s one catch site).
    var refusal: Refusal = .problem
    /// The session the request's bearer access token must name (its handler finds it in
    /// ``RequestInfo/session``); a missing, unknown or expired token is refused with 401.
    var session: (@Sendable (ServerRequest) async throws -> SessionContext)?
    /// The body limit and deadline, when not the server's defaults.
    var limits: RouteLimits?

    /// The error form of a route's refusals: a request past its rate limit, a database that
    /// cannot answer now.
    enum Refusal: Sendable {
        /// `application/problem+json` (`rate_limited`).
        case problem
        /// RFC 6749 §5.2's error form (`temporarily_unavailable`), for the token endpoint.
        case oauth
    }

    /// Nothing required: the server's default limits.
    public static let none = RoutePolicy()

    init(
        rateLimit: RateLimiter? = nil,
        refusal: Refusal = .problem,
        session: (@Sendable (ServerRequest) async throws -> SessionContext)? = nil,
        limits: RouteLimits? = nil
    ) {
        self.rateLimit = rateLimit
        self.refusal = refusal
        self.session = session
        self.limits = limits
    }

    /// The 429 for a request `retryAfter` seconds too early.
    func refused(retryAfter: Int) -> ServerResponse {
        switch refusal {
        case .problem:
            return RateLimiter.tooManyRequests(retryAfter: retryAfter).response()
        case .oauth:
            var response = OAuthError(.temporarilyUnavailable, "Too many requests; try again later.", retryAfter: retryAfter).response()
            response.status = .tooManyRequests
            return response
        }
    }
}

/// A route's body limit and deadline, which the server needs before the body arrives.
enum RouteLimits: Sendable {
    /// The same for every request of the route.
    case fixed(HTTPServer.RequestLimits)
    /// By the value of the pattern's parameter `name` (an API's own limits), as bytes; a value
    /// not listed takes the server's defaults. The router binds that parameter only when it is
    /// sent without percent-escapes, so no spelling of a value reaches the route past its limits.
    case byParameter(String, [(value: [UInt8], limits: HTTPServer.RequestLimits)])
}

extension RequestInfo {
    /// The session the route's policy found (``RoutePolicy``); a route that declared none has none.
    func requireSession() throws -> SessionContext {
        guard let session else {
            throw AuthProblem(.invalidToken, "Send the TokenGate access token as Authorization: Bearer <token>.")
        }
        return session
    }
}

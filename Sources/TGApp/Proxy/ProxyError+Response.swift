import HTTPTypes
import TGBase
public import TGHTTPServer
public import TGProxy

/// Why a proxied call was not forwarded, or failed on the way, as problem+json (the API's own
/// errors pass through as they are).
extension ProxyError: HTTPResponseError {
    public func response() -> ServerResponse {
        let problem: Problem
        switch self {
        case .unknownUpstream:
            problem = Problem(status: .notFound, code: "unknown_upstream", detail: "No API is configured under this name.")
        case .methodNotAllowed(let allowed):
            let list = allowed.joined(separator: ", ")
            problem = Problem(
                status: .methodNotAllowed,
                code: "method_not_allowed",
                detail: "This API accepts \(list) through TokenGate.",
                headerFields: [.allow: list]
            )
        case .invalidPath(let what):
            problem = Problem(status: .badRequest, code: "invalid_path", detail: "The path is refused: \(what).")
        case .pathNotAllowed:
            problem = Problem(status: .forbidden, code: "path_not_allowed", detail: "This path of the API is not open through TokenGate.")
        case .upstreamUnavailable:
            problem = Problem(
                status: .badGateway,
                code: "upstream_unavailable",
                detail: "The API could not be reached; try again shortly.",
                headerFields: [.retryAfter: "5"]
            )
        case .upstreamTimeout:
            problem = Problem(status: .gatewayTimeout, code: "upstream_timeout", detail: "The API did not answer in time.")
        case .bodyTooLarge:
            problem = Problem(status: .contentTooLarge, code: "body_too_large", detail: "The request body is larger than this API accepts.")
        case .bodyIncomplete:
            problem = Problem(status: .badRequest, code: "body_incomplete", detail: "The request body did not arrive in full.")
        case .unusableToken:
            problem = Problem(
                status: .badGateway,
                code: "upstream_token_unusable",
                detail: "The provider issued a token for this API that cannot be sent in a header; tell the operator."
            )
        case .answerHeadTooLarge(let size, let room):
            problem = Problem(
                status: .badGateway,
                code: "upstream_head_too_large",
                detail:
                    "The API answered with \(size) bytes of header fields; beside this request's own, TokenGate can send back "
                    + "\(max(0, room)). Send a shorter request (fewer or smaller fields), or ask the API's owners for fewer fields."
            )
        case .stepUpRequired(let challenge, let upstream, let dpop):
            problem = Self.stepUp(challenge, upstream: upstream, dpop: dpop)
        case .webSocketNotEnabled:
            problem = Problem(
                status: .badRequest,
                code: "websocket_not_enabled",
                detail: "This API does not take WebSocket connections through TokenGate (its operator enables them with websocket: true)."
            )
        case .webSocketInvalid(let what):
            problem = Problem(status: .badRequest, code: "invalid_websocket_request", detail: "The WebSocket handshake is refused: \(what).")
        case .webSocketVersion:
            problem = Problem(
                status: .upgradeRequired,
                code: "websocket_version_not_supported",
                detail: "TokenGate relays WebSocket version 13 (RFC 6455); send Sec-WebSocket-Version: 13.",
                headerFields: [HTTPField.Name("Sec-WebSocket-Version")!: "13"]
            )
        case .webSocketOriginNotAllowed:
            problem = Problem(
                status: .forbidden,
                code: "origin_not_allowed",
                detail: "WebSocket connections to this API may not come from this Origin (the API's websocket_origins)."
            )
        case .webSocketRefused(let why):
            problem = Problem(
                status: .badGateway,
                code: "upstream_websocket_refused",
                detail: "The API did not switch to WebSocket: \(why)."
            )
        }
        return problem.response()
    }

    /// 401 `step_up_required`: what the app's next sign-in must ask for (`/auth/login` with these
    /// parameters, the account's id and `resource`), with RFC 9470's challenge beside it for
    /// clients that read only that.
    static func stepUp(_ challenge: StepUpChallenge, upstream: String, dpop: Bool) -> Problem {
        var members = ["login_endpoint": "/auth/login", "resource": upstream]
        var values: [String: JSONValue] = [:]
        var parameters = [#"error="insufficient_user_authentication""#]
        parameters.append(#"error_description="A stronger or more recent sign-in is required""#)
        if let acr = challenge.acrValues {
            members["acr_values"] = acr
            parameters.append(#"acr_values="\#(acr)""#)
        }
        if let age = challenge.maxAge {
            values["max_age"] = .number(Double(age))
            parameters.append("max_age=\(age)")
        }
        if let claims = challenge.claims { members["claims"] = claims }
        var problem = Problem(
            status: .unauthorized,
            code: "step_up_required",
            detail:
                "This API needs a stronger or more recent sign-in than the account's. Do not refresh: sign the user in again at "
                + "login_endpoint with acr_values, max_age or claims as given, resource, and account (the account's id), then retry.",
            headerFields: [.wwwAuthenticate: (dpop ? "DPoP " : "Bearer ") + parameters.joined(separator: ", ")],
            members: members
        )
        problem.values = values
        return problem
    }
}

import HTTPTypes
public import TGAuth
import TGBase
public import TGHTTPServer

/// How the auth domain's errors are answered: the token endpoint's per RFC 6749 §5.2, the others
/// as problem+json with their stable code.
extension OAuthError: HTTPResponseError {
    public func response() -> ServerResponse {
        let status: HTTPResponse.Status =
            switch code {
            case .invalidClient: .unauthorized
            case .temporarilyUnavailable: .serviceUnavailable
            default: .badRequest
            }
        var fields: HTTPFields = [.cacheControl: "no-store", .pragma: "no-cache"]
        if let retryAfter { fields[.retryAfter] = String(retryAfter) }
        if let dpopNonce { fields[.dpopNonce] = dpopNonce }
        var members = members
        members["error"] = .string(code.rawValue)
        members["error_description"] = .string(description)
        return JSON.response(status, JSONValue.object(members), headerFields: fields)
    }
}

extension AuthProblem: HTTPResponseError {
    public func response() -> ServerResponse {
        var fields = HTTPFields()
        if let retryAfter { fields[.retryAfter] = String(retryAfter) }
        let status: HTTPResponse.Status
        switch code {
        case .invalidRequest, .unknownClient, .redirectURINotRegistered, .unknownProvider, .loginExpired: status = .badRequest
        case .invalidToken:
            status = .unauthorized
            fields[.wwwAuthenticate] = #"Bearer realm="tokengate", error="invalid_token""#
        case .interactionRequired:
            status = .unauthorized
            fields[.wwwAuthenticate] = #"Bearer realm="tokengate", error="invalid_token""#
        case .wrongProvider, .consentRequired, .transferDisabled: status = .forbidden
        case .accountNotFound: status = .notFound
        case .idpUnavailable: status = .serviceUnavailable
        }
        return Problem(status: status, code: code.rawValue, detail: detail, headerFields: fields, members: details).response()
    }
}

extension HTTPField.Name {
    /// RFC 9111 §5.4: for HTTP/1.0 caches, next to `Cache-Control: no-store` (RFC 6749 §5.1).
    static let pragma = HTTPField.Name("Pragma")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
}

/// A refused security event token, answered as RFC 8935 §2.3 says: 400 with
/// `{"err": code, "description": …}`.
extension SecurityEventRefusal: HTTPResponseError {
    public func response() -> ServerResponse {
        let body = JSONValue.object(["err": .string(code.rawValue), "description": .string(description)])
        return JSON.response(.badRequest, body, headerFields: [.cacheControl: "no-store"])
    }
}

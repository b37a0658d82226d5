import Foundation
import HTTPTypes
import TGBase
import TGCrypto
import TGHTTPServer

/// The fake's request handling: routes by path below the issuer and records every request.
struct FakeEndpoints: Sendable {
    let state: Locked<FakeState>
    let clock: @Sendable () -> Date
    /// `""` or `/a/b`: the issuer's path.
    let pathPrefix: String

    func now() -> Date {
        let offset = state.withLock { $0.clockOffset }
        return clock().addingTimeInterval(offset.timeInterval)
    }

    func handle(_ request: ServerRequest) -> HTTPServer.Reply {
        let path = String(request.path)
        var endpoint: String?
        if path.hasPrefix(pathPrefix) {
            let rest = String(path.dropFirst(pathPrefix.count))
            if rest.isEmpty || rest.hasPrefix("/") { endpoint = rest }
        }
        let isForm = request.head.headerFields[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") ?? false
        let form = isForm ? FormURLEncoding.decode(String(decoding: request.body, as: UTF8.self)) : []
        let recorded = FakeIdentityProvider.RecordedRequest(
            method: request.head.method.rawValue,
            path: path,
            endpoint: endpoint,
            query: request.queryItems,
            form: form,
            headerFields: request.head.headerFields,
            receivedAt: now()
        )
        state.withLock { $0.requests.append(recorded) }
        let method = request.head.method
        switch endpoint {
        case "/.well-known/openid-configuration" where method == .get:
            return .response(discovery())
        case "/jwks" where method == .get:
            return .response(jwks())
        case "/authorize" where method == .get || method == .post:
            return .response(authorize(method == .get ? request.queryItems : form, wellFormed: method == .get || isForm))
        case "/token" where method == .post:
            return token(request, form: form, isForm: isForm)
        case "/revoke" where method == .post:
            return .response(revoke(request, form: form, isForm: isForm))
        case "/userinfo" where method == .get || method == .post:
            return .response(userInfo(request))
        case "/logout" where method == .get || method == .post:
            return .response(logout(method == .get ? request.queryItems : form))
        case "/.well-known/openid-configuration", "/jwks", "/authorize", "/token", "/revoke", "/userinfo", "/logout":
            return .response(Self.oauthError("invalid_request", "method not allowed", status: 405))
        default:
            return .response(Self.oauthError("not_found", "no such endpoint", status: 404))
        }
    }

    // MARK: Discovery and keys

    private func discovery() -> ServerResponse {
        let (issuer, settings) = state.withLock { state in
            state.discoveryFetchCount += 1
            return (state.issuer, state.settings)
        }
        if let failure = settings.discoveryFailure { return Self.response(for: failure, malformedBody: #"{"issuer":"#) }
        let secretMethods = ["client_secret_basic", "client_secret_post", "private_key_jwt"]
        var document: [String: Any] = [
            "issuer": issuer,
            "authorization_endpoint": issuer + "/authorize",
            "token_endpoint": issuer + "/token",
            "jwks_uri": issuer + "/jwks",
            "userinfo_endpoint": issuer + "/userinfo",
            "revocation_endpoint": issuer + "/revoke",
            "end_session_endpoint": issuer + "/logout",
            "response_types_supported": ["code"],
            "response_modes_supported": ["query", "form_post"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": secretMethods,
            "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256", "PS256", "EdDSA"],
            "revocation_endpoint_auth_methods_supported": secretMethods,
            "authorization_response_iss_parameter_supported": true,
            "subject_types_supported": ["public"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "claims_supported": ["sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "azp", "email", "name"],
        ]
        for (name, value) in settings.discoveryOverrides {
            if let value { document[name] = value } else { document.removeValue(forKey: name) }
        }
        return Self.json(document)
    }

    private func jwks() -> ServerResponse {
        let (keys, failure) = state.withLock { state in
            state.jwksFetchCount += 1
            return (state.keys.map(\.jwk), state.settings.jwksFailure)
        }
        if let failure { return Self.response(for: failure, malformedBody: #"{"keys":["#) }
        return ServerResponse(
            status: .ok,
            headerFields: [.contentType: "application/json"],
            body: .bytes(JWKSet(keys: keys).json())
        )
    }

    // MARK: UserInfo and logout

    private func userInfo(_ request: ServerRequest) -> ServerResponse {
        let now = now()
        let settings = state.withLock { $0.settings }
        if let failure = settings.userInfoFailure { return Self.response(for: failure, malformedBody: #"{"sub":"#) }
        guard let authorization = request.head.headerFields[.authorization],
            authorization.lowercased().hasPrefix("bearer ")
        else {
            // RFC 6750 §3.1: no error code when the request carried no token at all.
            return Self.oauthError("invalid_token", "no bearer token", status: 401, headers: [.wwwAuthenticate: "Bearer"])
        }
        let token = String(authorization.dropFirst("bearer ".count)).trimmingCharacters(in: .whitespaces)
        guard let grant = state.withLock({ $0.liveGrant(accessToken: token, at: now) }) else {
            return Self.oauthError(
                "invalid_token",
                "the access token is unknown, revoked or expired",
                status: 401,
                headers: [.wwwAuthenticate: #"Bearer error="invalid_token""#]
            )
        }
        var claims: [String: Any] = [:]
        for (name, value) in settings.userInfoOnlyClaims { claims[name] = value }
        for (name, value) in settings.extraClaims { claims[name] = value }
        claims["sub"] = settings.userInfoSubject ?? grant.subject
        return Self.json(claims)
    }

    private func logout(_ parameters: [(name: String, value: String)]) -> ServerResponse {
        var query: [String: String] = [:]
        for (name, value) in parameters where query[name] == nil { query[name] = value }
        state.withLock { $0.logoutRequests.append(query) }
        guard let destination = query["post_logout_redirect_uri"] else {
            return ServerResponse(status: .ok, contentType: "text/plain; charset=utf-8", body: "Signed out.")
        }
        if let registered = state.withLock({ $0.settings.registeredPostLogoutRedirectURIs }),
            !registered.contains(destination) || query["id_token_hint"] == nil
        {
            return ServerResponse(status: .badRequest, contentType: "text/plain; charset=utf-8", body: "post_logout_redirect_uri not registered")
        }
        var added: [(name: String, value: String)] = []
        if let state = query["state"] { added.append(("state", state)) }
        return ServerResponse(status: .found, headerFields: [.location: Self.appendingQuery(added, to: destination)])
    }

    // MARK: Building answers

    static func json(_ object: [String: Any], status: Int = 200, headers: HTTPFields = [:]) -> ServerResponse {
        guard JSONSerialization.isValidJSONObject(object),
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else {
            return oauthError("server_error", "fake: a configured value is not JSON-serializable", status: 500)
        }
        var fields = headers
        fields[.contentType] = "application/json"
        fields[.cacheControl] = "no-store"
        return ServerResponse(status: HTTPResponse.Status(code: status), headerFields: fields, body: .bytes(Array(data)))
    }

    static func oauthError(_ code: String, _ description: String?, status: Int = 400, headers: HTTPFields = [:]) -> ServerResponse {
        var object: [String: Any] = ["error": code]
        if let description { object["error_description"] = description }
        return json(object, status: status, headers: headers)
    }

    static func response(for failure: FakeIdentityProvider.EndpointFailure, malformedBody: String) -> ServerResponse {
        switch failure {
        case .status(let status, let retryAfter):
            var headers: HTTPFields = [:]
            if let retryAfter { headers[.retryAfter] = String(retryAfter) }
            return oauthError(status >= 500 ? "server_error" : "invalid_request", "fake: configured failure", status: status, headers: headers)
        case .malformedJSON:
            return ServerResponse(status: .ok, contentType: "application/json", body: malformedBody)
        case .raw(let status, let contentType, let body):
            return ServerResponse(status: HTTPResponse.Status(code: status), contentType: contentType, body: body)
        }
    }

    /// `url` with `parameters` added to its query (before any fragment).
    static func appendingQuery(_ parameters: [(name: String, value: String)], to url: String) -> String {
        guard !parameters.isEmpty else { return url }
        var base = url
        var fragment = ""
        if let hash = base.firstIndex(of: "#") {
            fragment = String(base[hash...])
            base = String(base[..<hash])
        }
        let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
        return base + separator + FormURLEncoding.encode(parameters) + fragment
    }
}

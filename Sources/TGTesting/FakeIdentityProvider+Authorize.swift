import Foundation
import HTTPTypes
import TGBase
import TGCrypto
import TGHTTPServer

extension FakeEndpoints {
    /// `/authorize`: the browser step. The user is logged in at once; the answer is the redirect
    /// back to the client (or a `form_post` page), or a 400 JSON for a request that names no
    /// registered client or redirect URI (RFC 6749 §4.1.2.1: never redirect to an unverified URI).
    func authorize(_ parameters: [(name: String, value: String)], wellFormed: Bool) -> ServerResponse {
        guard wellFormed else { return Self.oauthError("invalid_request", "an authorization POST must be form-encoded") }
        var query: [String: String] = [:]
        var duplicated: String?
        for (name, value) in parameters {
            if query[name] != nil { duplicated = name } else { query[name] = value }
        }
        let now = now()
        return state.withLock { state in
            state.lastAuthorizationQuery = query
            guard let clientID = query["client_id"], let client = state.clients[clientID] else {
                return Self.oauthError("invalid_request", "unknown or missing client_id")
            }
            guard let redirectURI = query["redirect_uri"], Self.isAbsoluteURL(redirectURI),
                client.redirectURIs?.contains(redirectURI) ?? true
            else {
                return Self.oauthError("invalid_request", "missing, malformed or unregistered redirect_uri")
            }
            let settings = state.settings
            let responseMode = query["response_mode"] ?? "query"
            let answer = AuthorizationAnswer(
                redirectURI: redirectURI,
                formPost: responseMode == "form_post",
                state: query["state"],
                issuer: settings.authorizationResponseIssuer,
                providerIssuer: state.issuer
            )
            if let name = duplicated { return answer.error("invalid_request", "\(name) is repeated") }
            guard responseMode == "query" || responseMode == "form_post" else {
                return answer.error("invalid_request", "unsupported response_mode")
            }
            if let error = settings.authorizationError { return answer.error(error.code, error.description) }
            guard query["response_type"] == "code" else { return answer.error("unsupported_response_type", "only code") }
            guard query["state"] != nil else { return answer.error("invalid_request", "state is required") }
            guard let challenge = query["code_challenge"], query["code_challenge_method"] == "S256",
                Self.isPKCEValue(challenge)
            else { return answer.error("invalid_request", "PKCE with code_challenge_method=S256 is required") }

            let grant = FakeGrant(
                clientID: clientID,
                subject: query["login_hint"] ?? settings.fakeUser,
                scope: query["scope"] ?? "",
                nonce: query["nonce"],
                authTime: now,
                prompt: (query["prompt"] ?? "").split(separator: " ").map(String.init),
                acr: Self.askedACR(query)
            )
            let grantID = state.nextGrantID
            state.nextGrantID += 1
            state.grants[grantID] = grant
            let code = SecureRandom.token()
            state.codes[code] = FakeCode(
                grantID: grantID,
                redirectURI: redirectURI,
                codeChallenge: challenge,
                expires: now.addingTimeInterval(settings.authorizationCodeLifetime.timeInterval)
            )
            return answer.respond([("code", code)])
        }
    }

    /// The `acr` a sign-in asked for: `acr_values`' first, else the `acrs` value of a `claims`
    /// request's access token (`{"access_token":{"acrs":{"essential":true,"value":"c1"}}}`).
    static func askedACR(_ query: [String: String]) -> String? {
        if let first = query["acr_values"]?.split(separator: " ").first { return String(first) }
        guard let claims = query["claims"], let object = try? JSONSerialization.jsonObject(with: Data(claims.utf8)) as? [String: Any],
            let access = object["access_token"] as? [String: Any], let acrs = access["acrs"] as? [String: Any]
        else { return nil }
        return acrs["value"] as? String ?? (acrs["values"] as? [String])?.first
    }

    static func isAbsoluteURL(_ text: String) -> Bool {
        guard let components = URLComponents(string: text), let scheme = components.scheme, !scheme.isEmpty else { return false }
        return components.fragment == nil
    }

    /// A PKCE verifier or S256 challenge: 43 to 128 unreserved characters (RFC 7636 §4.1).
    static func isPKCEValue(_ text: String) -> Bool {
        (43...128).contains(text.utf8.count)
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                    UInt8(ascii: "_"), UInt8(ascii: "~"):
                    true
                default: false
                }
            }
    }
}

/// The answer to an authorization request that names a valid client and redirect URI.
private struct AuthorizationAnswer {
    var redirectURI: String
    var formPost: Bool
    var state: String?
    var issuer: FakeIdentityProvider.AuthorizationResponseIssuer
    var providerIssuer: String

    func error(_ code: String, _ description: String?) -> ServerResponse {
        var parameters = [(name: "error", value: code)]
        if let description { parameters.append(("error_description", description)) }
        return respond(parameters)
    }

    /// Redirects (or posts) `parameters` plus `state` and `iss` to the client.
    func respond(_ parameters: [(name: String, value: String)]) -> ServerResponse {
        var parameters = parameters
        if let state { parameters.append(("state", state)) }
        switch issuer {
        case .issuer: parameters.append(("iss", providerIssuer))
        case .value(let value): parameters.append(("iss", value))
        case .omitted: break
        }
        guard formPost else {
            return ServerResponse(status: .found, headerFields: [.location: FakeEndpoints.appendingQuery(parameters, to: redirectURI)])
        }
        let inputs = parameters.map { #"<input type="hidden" name="\#(escape($0.name))" value="\#(escape($0.value))"/>"# }
        let page = """
            <!DOCTYPE html>
            <html><head><title>Signing in</title></head>
            <body onload="document.forms[0].submit()">
            <form method="post" action="\(escape(redirectURI))">
            \(inputs.joined(separator: "\n"))
            <noscript><button type="submit">Continue</button></noscript>
            </form>
            </body></html>
            """
        return ServerResponse(status: .ok, contentType: "text/html; charset=utf-8", body: page, headerFields: [.cacheControl: "no-store"])
    }

    private func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}

import Foundation
import HTTPTypes
import TGBase
import TGCrypto
import TGHTTPServer

/// The outcome of authenticating the client of a token or revocation request.
enum ClientAuthenticationOutcome {
    case authenticated(FakeClient, FakeIdentityProvider.ClientAuthenticationMethod)
    /// The answer to send, and the method the client tried when it could be told.
    case refused(ServerResponse, FakeIdentityProvider.ClientAuthenticationMethod?)
}

extension FakeEndpoints {
    static let jwtBearerAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    /// Authenticates the client (RFC 6749 §2.3, OIDC Core §9): exactly one of HTTP Basic, a
    /// secret in the form, a `private_key_jwt` assertion, or a bare `client_id` for a public
    /// client. Call with the state locked (a used assertion `jti` is remembered).
    static func authenticateClient(
        _ request: ServerRequest,
        form: [String: String],
        state: inout FakeState,
        now: Date
    ) -> ClientAuthenticationOutcome {
        let authorization = request.head.headerFields[.authorization]
        let basic = authorization.flatMap { $0.lowercased().hasPrefix("basic ") ? String($0.dropFirst(6)) : nil }
        let presented = [basic != nil, form["client_assertion"] != nil, form["client_secret"] != nil].filter { $0 }.count
        guard presented <= 1 else {
            return .refused(oauthError("invalid_request", "more than one client authentication method"), nil)
        }
        let method: FakeIdentityProvider.ClientAuthenticationMethod
        let clientID: String
        if let basic {
            method = .clientSecretBasic
            guard let data = Data(base64Encoded: basic.trimmingCharacters(in: .whitespaces)),
                let pair = String(data: data, encoding: .utf8), let colon = pair.firstIndex(of: ":"),
                let id = FormURLEncoding.percentDecode(pair[..<colon].utf8, plusAsSpace: true),
                let secret = FormURLEncoding.percentDecode(pair[pair.index(after: colon)...].utf8, plusAsSpace: true)
            else { return refuse("malformed Basic credentials", method) }
            guard form["client_id"] == nil || form["client_id"] == id else { return refuse("client_id differs from Basic", method) }
            guard let client = state.clients[id], let expected = client.secret,
                Digest.constantTimeEqual(Array(expected.utf8), Array(secret.utf8))
            else { return refuse("unknown client or wrong secret", method) }
            clientID = id
        } else if let assertion = form["client_assertion"] {
            method = .privateKeyJWT
            guard form["client_assertion_type"] == jwtBearerAssertionType else { return refuse("wrong client_assertion_type", method) }
            switch verifyAssertion(assertion, claimedClientID: form["client_id"], state: &state, now: now) {
            case .success(let id): clientID = id
            case .failure(let problem): return refuse(problem.reason, method)
            }
        } else if let secret = form["client_secret"] {
            method = .clientSecretPost
            guard let id = form["client_id"], let client = state.clients[id], let expected = client.secret,
                Digest.constantTimeEqual(Array(expected.utf8), Array(secret.utf8))
            else { return refuse("unknown client or wrong secret", method) }
            clientID = id
        } else if let id = form["client_id"] {
            method = .none
            guard state.clients[id] != nil else { return refuse("unknown client", method) }
            clientID = id
        } else {
            return refuse("no client authentication", nil)
        }
        guard let client = state.clients[clientID] else { return refuse("unknown client", method) }
        let allowed = client.methods ?? [.clientSecretBasic, .clientSecretPost]
        guard allowed.contains(method) else { return refuse("\(method.rawValue) is not allowed for this client", method) }
        return .authenticated(client, method)
    }

    private static func refuse(_ reason: String, _ method: FakeIdentityProvider.ClientAuthenticationMethod?) -> ClientAuthenticationOutcome {
        // RFC 6749 §5.2: a client that tried Basic gets a Basic challenge back.
        let headers: HTTPFields = method == .clientSecretBasic ? [.wwwAuthenticate: #"Basic realm="fake-idp""#] : [:]
        return .refused(oauthError("invalid_client", reason, status: 401, headers: headers), method)
    }

    private struct AssertionProblem: Error {
        var reason: String
    }

    /// Checks a `private_key_jwt` assertion (RFC 7523 §3); returns the client ID.
    private static func verifyAssertion(
        _ assertion: String,
        claimedClientID: String?,
        state: inout FakeState,
        now: Date
    ) -> Result<String, AssertionProblem> {
        func fail(_ reason: String) -> Result<String, AssertionProblem> { .failure(AssertionProblem(reason: reason)) }
        guard let jws = try? JWS(compactSerialization: assertion),
            let claims = (try? JSONSerialization.jsonObject(with: Data(jws.payload))) as? [String: Any]
        else { return fail("the client assertion is not a JWS with a JSON payload") }
        guard let issuer = claims["iss"] as? String, claims["sub"] as? String == issuer,
            claimedClientID == nil || claimedClientID == issuer
        else { return fail("the assertion's iss and sub must both be the client_id") }
        guard let client = state.clients[issuer], let jwk = client.publicKey, let key = try? PublicKey(jwk: jwk) else {
            return fail("unknown client or no registered key")
        }
        guard (try? jws.verify(using: key)) != nil else { return fail("the assertion's signature does not verify") }
        let audiences: [String] = (claims["aud"] as? [String]) ?? (claims["aud"] as? String).map { [$0] } ?? []
        guard audiences.contains(state.issuer + "/token") || audiences.contains(state.issuer) else {
            return fail("the assertion's aud is neither the token endpoint nor the issuer")
        }
        let time = now.timeIntervalSince1970
        guard let expiry = (claims["exp"] as? NSNumber)?.doubleValue, expiry > time else { return fail("the assertion has expired") }
        if let notBefore = (claims["nbf"] as? NSNumber)?.doubleValue, notBefore > time + 60 {
            return fail("the assertion is not valid yet")
        }
        guard let jti = claims["jti"] as? String, !jti.isEmpty else { return fail("the assertion has no jti") }
        guard state.seenAssertionIDs.insert(issuer + " " + jti).inserted else { return fail("the assertion's jti was used before") }
        return .success(issuer)
    }
}

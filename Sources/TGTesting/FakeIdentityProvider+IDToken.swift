import Foundation
import HTTPTypes
import TGCrypto
import TGHTTPServer

/// The keys an ID token may be signed with, taken out of the lock.
struct IDTokenKeys {
    /// The published key of the configured algorithm (nil: none of that algorithm).
    var signing: FakeSigningKey?
    /// The published RSA key (its JWK is the HMAC secret of the key-confusion forgery).
    var publishedRSA: FakeSigningKey?
    /// A key of the configured algorithm that is not in the JWKS.
    var unpublished: FakeSigningKey?
}

extension FakeIdentityProvider.TokenMisbehaviour {
    var needsUnpublishedKey: Bool {
        if case .idTokenSignedWithUnpublishedKey = self { true } else { false }
    }
}

extension FakeEndpoints {
    /// The whole answer of an answer-replacing misbehaviour.
    static func replacementAnswer(_ misbehaviour: FakeIdentityProvider.TokenMisbehaviour) -> ServerResponse {
        switch misbehaviour {
        case .error(let code, let description, let status):
            return oauthError(code, description, status: status)
        case .serverError:
            return oauthError("server_error", "fake: internal error", status: 500)
        case .tooManyRequests(let retryAfter):
            return oauthError("temporarily_unavailable", "fake: too many requests", status: 429, headers: [.retryAfter: String(retryAfter)])
        case .serviceUnavailable(let retryAfter):
            let headers: HTTPFields = retryAfter.map { [.retryAfter: String($0)] } ?? [:]
            return oauthError("temporarily_unavailable", "fake: unavailable", status: 503, headers: headers)
        case .malformedJSON(let body):
            return ServerResponse(status: .ok, contentType: "application/json", body: body, headerFields: [.cacheControl: "no-store"])
        case .raw(let status, let contentType, let body):
            return ServerResponse(status: HTTPResponse.Status(code: status), contentType: contentType, body: body)
        default:
            return oauthError("server_error", "fake: not an answer replacement", status: 500)
        }
    }

    /// The 200 answer for `issued`, with the misbehaviours that change it applied.
    static func tokenAnswer(_ issued: IssuedTokens, misbehaviours: [FakeIdentityProvider.TokenMisbehaviour], now: Date) -> ServerResponse {
        var members = issued.members
        if var claims = issued.idTokenClaims {
            for misbehaviour in misbehaviours { alter(&claims, misbehaviour, now: now) }
            switch signIDToken(claims, keys: issued.keys, misbehaviours: misbehaviours) {
            case .success(let idToken): members["id_token"] = idToken
            case .failure(let answer): return answer.response
            }
        }
        for misbehaviour in misbehaviours {
            switch misbehaviour {
            case .missingAccessToken: members.removeValue(forKey: "access_token")
            case .tokenType(let type): members["token_type"] = type
            case .withoutIDToken: members.removeValue(forKey: "id_token")
            case .responseMembers(let changes): apply(changes, to: &members)
            default: break
            }
        }
        return json(members)
    }

    private static func apply(_ changes: [String: (any Sendable)?], to object: inout [String: Any]) {
        for (name, value) in changes {
            if let value { object[name] = value } else { object.removeValue(forKey: name) }
        }
    }

    private static func alter(_ claims: inout [String: Any], _ misbehaviour: FakeIdentityProvider.TokenMisbehaviour, now: Date) {
        switch misbehaviour {
        case .idTokenAudience(let audience):
            claims["aud"] = audience
        case .expiredIDToken:
            let twoHoursAgo = Int(now.timeIntervalSince1970) - 7200
            claims["iat"] = twoHoursAgo
            claims["auth_time"] = twoHoursAgo
            claims["exp"] = twoHoursAgo + 3600
            if claims["nbf"] != nil { claims["nbf"] = twoHoursAgo }
        case .idTokenNonce(let nonce):
            claims["nonce"] = nonce
        case .idTokenIssuer(let issuer):
            claims["iss"] = issuer
        case .idTokenClaims(let changes):
            apply(changes, to: &claims)
        default:
            break
        }
    }

    /// Serializes and signs the claims as the misbehaviours say (normally: JWS with the
    /// configured algorithm's published key).
    private static func signIDToken(
        _ claims: [String: Any],
        keys: IDTokenKeys,
        misbehaviours: [FakeIdentityProvider.TokenMisbehaviour]
    ) -> Result<String, FakeAnswer> {
        func failure(_ description: String) -> Result<String, FakeAnswer> {
            .failure(FakeAnswer(oauthError("server_error", "fake: " + description, status: 500)))
        }
        guard JSONSerialization.isValidJSONObject(claims),
            let data = try? JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return failure("the ID token claims are not JSON-serializable") }
        let payload = Array(data)
        guard let signing = keys.signing else { return failure("no key for the configured signing algorithm") }

        for misbehaviour in misbehaviours {
            switch misbehaviour {
            case .unsignedIDToken:
                return .success(unsafeToken(header: #"{"alg":"none"}"#, payload: payload) { _ in [] })
            case .idTokenHMACSignedWithPublicKey:
                guard let rsa = keys.publishedRSA else { return failure("no RSA key") }
                let header = #"{"alg":"HS256","kid":"\#(rsa.keyID)","typ":"JWT"}"#
                return .success(
                    unsafeToken(header: header, payload: payload) { input in
                        Digest.hmacSHA256(key: rsa.jwk.json(), message: Array(input.utf8))
                    }
                )
            case .idTokenSignedWithUnpublishedKey(let keyID):
                guard let unpublished = keys.unpublished,
                    let token = try? JWS.sign(
                        payload: payload,
                        algorithm: signing.algorithm,
                        keyID: keyID ?? signing.keyID,
                        type: "JWT",
                        using: unpublished.privateKey
                    )
                else { return failure("could not make an unpublished key") }
                return .success(token)
            default:
                continue
            }
        }
        guard let token = try? JWS.sign(payload: payload, algorithm: signing.algorithm, keyID: signing.keyID, type: "JWT", using: signing.privateKey)
        else { return failure("signing failed") }
        return .success(token)
    }

    /// `base64url(header).base64url(payload).base64url(signature(input))` for a hand-made header.
    static func unsafeToken(header: String, payload: [UInt8], signature: (String) -> [UInt8]) -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(payload)
        return input + "." + Base64URL.encode(signature(input))
    }
}

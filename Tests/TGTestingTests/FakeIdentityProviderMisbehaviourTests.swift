import Foundation
import TGCrypto
import TGTesting
import Testing

@Suite struct FakeIdentityProviderMisbehaviourTests {
    @Test func answersAConfiguredOAuthErrorWithoutConsumingTheCode() async throws {
        try await withProvider { idp, http in
            idp.misbehave(.error(code: "interaction_required", description: "MFA needed", status: 400))
            let pkce = PKCE()
            let code = try await authorizationCode(idp, pkce: pkce)
            let refused = try await redeem(http, idp, code: code, verifier: pkce.verifier)
            #expect(refused.status == 400)
            #expect(refused.json["error"] as? String == "interaction_required")
            #expect(refused.json["error_description"] as? String == "MFA needed")
            #expect(try await redeem(http, idp, code: code, verifier: pkce.verifier).status == 200)
        }
    }

    @Test func answersServerErrorsRateLimitsAndUnavailability() async throws {
        try await withProvider { idp, http in
            let refreshToken = try #require(try await login(http, idp)["refresh_token"] as? String)
            idp.misbehave(.serverError)
            idp.misbehave(.tooManyRequests(retryAfter: 7))
            idp.misbehave(.serviceUnavailable(retryAfter: 3))
            // One answer replacement per request, in the order they were registered.
            let failed = try await refresh(http, idp, refreshToken)
            #expect(failed.status == 500)
            #expect(failed.json["error"] as? String == "server_error")
            let limited = try await refresh(http, idp, refreshToken)
            #expect(limited.status == 429)
            #expect(limited.header("Retry-After") == "7")
            let unavailable = try await refresh(http, idp, refreshToken)
            #expect(unavailable.status == 503)
            #expect(unavailable.header("Retry-After") == "3")
            #expect(unavailable.json["error"] as? String == "temporarily_unavailable")
            #expect(try await refresh(http, idp, refreshToken).status == 200)
        }
    }

    @Test func theFirstServerErrorHitsTheCodeRedemption() async throws {
        try await withProvider { idp, http in
            idp.misbehave(.serverError, .next(2))
            let pkce = PKCE()
            let code = try await authorizationCode(idp, pkce: pkce)
            #expect(try await redeem(http, idp, code: code, verifier: pkce.verifier).status == 500)
            #expect(try await redeem(http, idp, code: code, verifier: pkce.verifier).status == 500)
            #expect(try await redeem(http, idp, code: code, verifier: pkce.verifier).status == 200)
        }
    }

    @Test func answersMalformedOrIncompleteTokenResponses() async throws {
        try await withProvider { idp, http in
            idp.misbehave(.malformedJSON())
            let malformed = try await loginReply(http, idp)
            #expect(malformed.status == 200)
            #expect(malformed.text == #"{"access_token":"#)

            idp.misbehave(.missingAccessToken)
            let missing = try await loginReply(http, idp).json
            #expect(missing["access_token"] == nil)
            #expect(missing["id_token"] != nil)

            idp.misbehave(.tokenType("mac"))
            #expect(try await loginReply(http, idp).json["token_type"] as? String == "mac")

            idp.misbehave(.withoutIDToken)
            idp.misbehave(.responseMembers(["expires_in": "soon", "scope": nil]))
            let altered = try await loginReply(http, idp).json
            #expect(altered["id_token"] == nil)
            #expect(altered["expires_in"] as? String == "soon")
            #expect(altered["scope"] == nil)
        }
    }

    @Test func appliesUntilResetAndOnlyToTheGivenGrantType() async throws {
        try await withProvider { idp, http in
            idp.misbehave(.error(code: "invalid_grant", description: "revoked upstream"), .untilReset, grantType: "refresh_token")
            let refreshToken = try #require(try await login(http, idp)["refresh_token"] as? String)
            #expect(try await refresh(http, idp, refreshToken).json["error_description"] as? String == "revoked upstream")
            #expect(try await refresh(http, idp, refreshToken).json["error_description"] as? String == "revoked upstream")
            idp.resetMisbehaviours()
            #expect(try await refresh(http, idp, refreshToken).status == 200)
            #expect(idp.refreshCount == 3)
        }
    }

    @Test func answersSlowlyWithoutHoldingUpOtherRequests() async throws {
        try await withProvider { idp, http in
            idp.misbehave(.delay(.milliseconds(300)))
            let pkce = PKCE()
            let code = try await authorizationCode(idp, pkce: pkce)
            let clock = ContinuousClock()
            let start = clock.now
            let slow = Task {
                let reply = try await redeem(http, idp, code: code, verifier: pkce.verifier)
                return (reply, clock.now)
            }
            // Once the token request is in, another request is answered while it waits.
            while idp.requests(to: "/token").isEmpty { try await Task.sleep(for: .milliseconds(5)) }
            #expect(try await http.get(idp.discoveryURL).status == 200)
            let discoveryAnswered = clock.now
            let (reply, tokenAnswered) = try await slow.value
            #expect(reply.status == 200)
            #expect(discoveryAnswered < tokenAnswered)
            #expect(clock.now - start >= .milliseconds(300))
        }
    }

    @Test func signsWithAKeyOutsideTheJWKSWhenAsked() async throws {
        try await withProvider { idp, http in
            idp.misbehave(.idTokenSignedWithUnpublishedKey())
            let sameKid = try #require(try await loginReply(http, idp).json["id_token"] as? String)
            #expect(try JWS(compactSerialization: sameKid).header.keyID == idp.signingKeyID(for: .rs256))
            await #expect(throws: CryptoError.invalidSignature) { try await verifyWithJWKS(sameKid, http, idp) }

            idp.misbehave(.idTokenSignedWithUnpublishedKey(keyID: "ghost"))
            let ghost = try #require(try await loginReply(http, idp).json["id_token"] as? String)
            #expect(try JWS(compactSerialization: ghost).header.keyID == "ghost")
            #expect(idp.publishedKeys.keys(withID: "ghost").isEmpty)
        }
    }

    @Test func forgesUnsignedAndKeyConfusionIDTokens() async throws {
        try await withProvider { idp, http in
            idp.misbehave(.unsignedIDToken)
            let unsigned = try #require(try await loginReply(http, idp).json["id_token"] as? String)
            #expect(unsigned.hasSuffix("."))
            #expect(try header(of: unsigned)["alg"] as? String == "none")

            idp.misbehave(.idTokenHMACSignedWithPublicKey)
            let forged = try #require(try await loginReply(http, idp).json["id_token"] as? String)
            let jws = try JWS(compactSerialization: forged)
            #expect(jws.header.algorithm == "HS256")
            let rsaKeyID = try #require(idp.signingKeyID(for: .rs256))
            #expect(jws.header.keyID == rsaKeyID)
            let published = try JWKSet(json: try await http.get(idp.jwksURI).body)
            let secret = try #require(published.keys(withID: rsaKeyID).first).json()
            let input = forged.split(separator: ".").prefix(2).joined(separator: ".")
            #expect(jws.signature == Digest.hmacSHA256(key: secret, message: Array(input.utf8)))
        }
    }

    @Test func altersIDTokenClaimsAsAsked() async throws {
        try await withProvider { idp, http in
            idp.misbehave(.idTokenAudience("someone-else"))
            idp.misbehave(.idTokenNonce("replayed-nonce"))
            idp.misbehave(.idTokenIssuer("https://evil.example"))
            idp.misbehave(.idTokenClaims(["tid": "t-9", "auth_time": nil]))
            let altered = try #require(try await loginReply(http, idp).json["id_token"] as? String)
            try await verifyWithJWKS(altered, http, idp)
            let alteredClaims = try claims(of: altered)
            #expect(alteredClaims["aud"] as? String == "someone-else")
            #expect(alteredClaims["nonce"] as? String == "replayed-nonce")
            #expect(alteredClaims["iss"] as? String == "https://evil.example")
            #expect(alteredClaims["tid"] as? String == "t-9")
            #expect(alteredClaims["auth_time"] == nil)

            idp.misbehave(.expiredIDToken)
            let expired = try #require(try await loginReply(http, idp).json["id_token"] as? String)
            try await verifyWithJWKS(expired, http, idp)
            let exp = try #require(try claims(of: expired)["exp"] as? Int)
            #expect(exp < Int(idp.now.timeIntervalSince1970) - 3000)

            // One-shot knobs are spent: the next token is clean.
            let clean = try claims(of: try #require(try await loginReply(http, idp).json["id_token"] as? String))
            #expect(clean["aud"] as? String == clientID)
            #expect(clean["iss"] as? String == idp.issuer)
        }
    }

    /// A whole login's token response, whatever it is.
    private func loginReply(_ http: TestHTTP, _ idp: FakeIdentityProvider) async throws -> Reply {
        let pkce = PKCE()
        let code = try await authorizationCode(idp, pkce: pkce)
        return try await redeem(http, idp, code: code, verifier: pkce.verifier)
    }
}

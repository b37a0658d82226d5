import Foundation
import TGCrypto
import TGTesting
import Testing

@Suite struct FakeIdentityProviderCodeFlowTests {
    @Test func completesTheCodeFlowByHandWithAVerifiableIDToken() async throws {
        try await withProvider(pathPrefix: "/tenant-a/v2.0") { idp, http in
            let pkce = PKCE()
            let authorize = try await http.get(authorizationURL(idp, pkce: pkce, state: "st-42", nonce: "n-42"))
            #expect(authorize.status == 302)
            let location = try #require(authorize.header("Location"))
            #expect(location.hasPrefix(redirectURI + "?"))
            let callback = FakeIdentityProvider.queryParameters(of: location)
            #expect(callback["state"] == "st-42")
            #expect(callback["iss"] == idp.issuer)
            let code = try #require(callback["code"])
            #expect(idp.lastAuthorizationQuery?["nonce"] == "n-42")

            let reply = try await redeem(http, idp, code: code, verifier: pkce.verifier)
            #expect(reply.status == 200)
            #expect(reply.header("Cache-Control") == "no-store")
            let tokens = reply.json
            #expect(tokens["token_type"] as? String == "Bearer")
            #expect(tokens["expires_in"] as? Int == 3600)
            #expect(tokens["scope"] as? String == "openid profile")
            #expect(tokens["access_token"] is String)
            #expect(tokens["refresh_token"] is String)
            #expect(tokens["refresh_token_expires_in"] == nil)
            let idToken = try #require(tokens["id_token"] as? String)
            try await verifyWithJWKS(idToken, http, idp)
            #expect(try JWS(compactSerialization: idToken).header.algorithm == "RS256")

            let idClaims = try claims(of: idToken)
            let now = Int(idp.now.timeIntervalSince1970)
            #expect(idClaims["iss"] as? String == idp.issuer)
            #expect(idClaims["sub"] as? String == "alice")
            #expect(idClaims["aud"] as? String == clientID)
            #expect(idClaims["nonce"] as? String == "n-42")
            #expect(idClaims["azp"] == nil)
            #expect(idClaims["nbf"] == nil)
            let issuedAt = try #require(idClaims["iat"] as? Int)
            #expect(abs(issuedAt - now) <= 2)
            #expect(idClaims["exp"] as? Int == issuedAt + 3600)
            let authTime = try #require(idClaims["auth_time"] as? Int)
            #expect(authTime <= issuedAt && issuedAt - authTime <= 5)
            let accessToken = try #require(tokens["access_token"] as? String)
            #expect(idClaims["at_hash"] as? String == Base64URL.encode(Array(Digest.sha256(Array(accessToken.utf8)).prefix(16))))
        }
    }

    @Test func logsInTheLoginHintAndHonoursTheIDTokenSettings() async throws {
        try await withProvider { idp, http in
            idp.configure {
                $0.signingAlgorithm = .es256
                $0.extraClaims = ["tid": "tenant-1", "email": "bob@example.com", "groups": ["a", "b"]]
                $0.extraAudiences = ["api://other"]
                $0.includesNotBefore = true
                $0.idTokenLifetime = .seconds(300)
                $0.fakeUser = "carol"
            }
            let pkce = PKCE()
            let code = try await authorizationCode(idp, pkce: pkce, extra: [("login_hint", "bob")])
            let tokens = try await redeem(http, idp, code: code, verifier: pkce.verifier).json
            let idToken = try #require(tokens["id_token"] as? String)
            try await verifyWithJWKS(idToken, http, idp)
            #expect(try JWS(compactSerialization: idToken).header.keyID == idp.signingKeyID(for: .es256))
            let idClaims = try claims(of: idToken)
            #expect(idClaims["sub"] as? String == "bob")
            #expect(idClaims["tid"] as? String == "tenant-1")
            #expect(idClaims["groups"] as? [String] == ["a", "b"])
            #expect(idClaims["aud"] as? [String] == [clientID, "api://other"])
            #expect(idClaims["azp"] as? String == clientID)
            #expect(idClaims["nbf"] as? Int == idClaims["iat"] as? Int)
            #expect((idClaims["exp"] as? Int).map { $0 - (idClaims["iat"] as? Int ?? 0) } == 300)

            // Without login_hint the configured user logs in.
            let second = PKCE()
            let other = try await redeem(http, idp, code: try await authorizationCode(idp, pkce: second), verifier: second.verifier).json
            #expect(try claims(of: try #require(other["id_token"] as? String))["sub"] as? String == "carol")
        }
    }

    @Test func refusesAWrongPKCEVerifierAndASecondUseOfTheCode() async throws {
        try await withProvider { idp, http in
            let pkce = PKCE()
            let code = try await authorizationCode(idp, pkce: pkce)
            let wrong = try await redeem(http, idp, code: code, verifier: PKCE().verifier)
            #expect(wrong.status == 400)
            #expect(wrong.json["error"] as? String == "invalid_grant")
            let first = try await redeem(http, idp, code: code, verifier: pkce.verifier)
            #expect(first.status == 200)
            let again = try await redeem(http, idp, code: code, verifier: pkce.verifier)
            #expect(again.status == 400)
            #expect(again.json["error"] as? String == "invalid_grant")
            // A code used twice revokes what it produced (RFC 6749 §4.1.2).
            let accessToken = try #require(first.json["access_token"] as? String)
            #expect(!idp.isAccessTokenActive(accessToken))
        }
    }

    @Test func bindsTheCodeToItsRedirectURIAndClientAndExpiresItOnTheFakeClock() async throws {
        try await withProvider { idp, http in
            idp.registerClient(id: "other", secret: "other-secret")
            let pkce = PKCE()
            let code = try await authorizationCode(idp, pkce: pkce)
            let form: [(name: String, value: String)] = [
                ("grant_type", "authorization_code"), ("code", code), ("code_verifier", pkce.verifier),
            ]
            let otherURI = try await http.postForm(
                idp.tokenEndpoint,
                form + [("redirect_uri", "https://app.example/other")],
                headers: basicAuthorization()
            )
            #expect(otherURI.json["error"] as? String == "invalid_grant")
            let otherClient = try await http.postForm(
                idp.tokenEndpoint,
                form + [("redirect_uri", redirectURI)],
                headers: basicAuthorization("other", "other-secret")
            )
            #expect(otherClient.json["error"] as? String == "invalid_grant")
            // The refused attempts did not burn the code.
            #expect(try await redeem(http, idp, code: code, verifier: pkce.verifier).status == 200)

            let late = PKCE()
            let lateCode = try await authorizationCode(idp, pkce: late)
            idp.advanceClock(by: .seconds(601))
            let expired = try await redeem(http, idp, code: lateCode, verifier: late.verifier)
            #expect(expired.json["error"] as? String == "invalid_grant")
        }
    }

    @Test func refusesAuthorizationRequestsWithoutPKCEOrFromUnknownClients() async throws {
        try await withProvider { idp, http in
            idp.registerClient(id: "strict", secret: "x", redirectURIs: ["https://strict.example/cb"])
            let pkce = PKCE()
            let noPKCE = authorizationURL(idp, pkce: pkce).replacingOccurrences(of: "code_challenge_method=S256", with: "code_challenge_method=plain")
            let plain = try await idp.followAuthorization(noPKCE)
            #expect(plain.status == 302)
            #expect(plain.parameters["error"] == "invalid_request")
            #expect(plain.parameters["state"] == "st-1")
            #expect(plain.parameters["code"] == nil)

            let unknown = authorizationURL(idp, pkce: pkce).replacingOccurrences(of: "client_id=\(clientID)", with: "client_id=nobody")
            let refused = try await http.get(unknown)
            #expect(refused.status == 400)
            #expect(refused.header("Location") == nil)
            #expect(refused.json["error"] as? String == "invalid_request")

            let unregistered = authorizationURL(idp, pkce: pkce).replacingOccurrences(of: "client_id=\(clientID)", with: "client_id=strict")
            #expect(try await http.get(unregistered).status == 400)

            let token = authorizationURL(idp, pkce: pkce).replacingOccurrences(of: "response_type=code", with: "response_type=token")
            #expect(try await idp.followAuthorization(token).parameters["error"] == "unsupported_response_type")
        }
    }

    @Test func answersFormPostWithAnAutoSubmittingForm() async throws {
        try await withProvider { idp, _ in
            let result = try await idp.followAuthorization(authorizationURL(idp, pkce: PKCE(), extra: [("response_mode", "form_post")]))
            #expect(result.status == 200)
            #expect(result.destination == redirectURI)
            #expect(result.body.contains(#"<form method="post" action="https://app.example/callback">"#))
            #expect(result.parameters["code"] != nil)
            #expect(result.parameters["state"] == "st-1")
            #expect(result.parameters["iss"] == idp.issuer)
        }
    }

    @Test func redirectsWithAConfiguredErrorAndOmitsOrForgesTheIssuerParameter() async throws {
        try await withProvider { idp, _ in
            idp.settings.authorizationError = .init(code: "access_denied", description: "the user said no")
            let denied = try await idp.followAuthorization(authorizationURL(idp, pkce: PKCE()))
            #expect(denied.parameters["error"] == "access_denied")
            #expect(denied.parameters["error_description"] == "the user said no")
            #expect(denied.parameters["state"] == "st-1")
            #expect(denied.parameters["code"] == nil)
            idp.settings.authorizationError = nil

            idp.settings.authorizationResponseIssuer = .omitted
            let omitted = try await idp.followAuthorization(authorizationURL(idp, pkce: PKCE()))
            #expect(omitted.parameters["code"] != nil)
            #expect(omitted.parameters["iss"] == nil)

            idp.settings.authorizationResponseIssuer = .value("https://attacker.example")
            let forged = try await idp.followAuthorization(authorizationURL(idp, pkce: PKCE()))
            #expect(forged.parameters["iss"] == "https://attacker.example")
        }
    }

    @Test func servesPublicClientsAndLeavesOutTheIDTokenWithoutTheOpenIDScope() async throws {
        try await withProvider { idp, http in
            idp.registerPublicClient(id: "spa", redirectURIs: [redirectURI])
            idp.settings.issuesRefreshTokens = false
            let pkce = PKCE()
            let url = authorizationURL(idp, pkce: pkce)
                .replacingOccurrences(of: "client_id=\(clientID)", with: "client_id=spa")
                .replacingOccurrences(of: "scope=openid%20profile", with: "scope=api.read")
            let code = try #require(try await idp.followAuthorization(url).parameters["code"])
            let reply = try await http.postForm(
                idp.tokenEndpoint,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                    ("code_verifier", pkce.verifier), ("client_id", "spa"),
                ]
            )
            #expect(reply.status == 200)
            #expect(reply.json["scope"] as? String == "api.read")
            #expect(reply.json["id_token"] == nil)
            #expect(reply.json["refresh_token"] == nil)
            #expect(idp.tokenRequestAuthenticationMethods == [.none])
        }
    }
}

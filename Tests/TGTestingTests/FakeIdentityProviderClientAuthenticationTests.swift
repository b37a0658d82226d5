import Foundation
import TGCrypto
import TGTesting
import Testing

@Suite struct FakeIdentityProviderClientAuthenticationTests {
    @Test func acceptsClientSecretBasicAndPostAndRecordsWhichWasUsed() async throws {
        try await withProvider { idp, http in
            let basicPKCE = PKCE()
            let basicCode = try await authorizationCode(idp, pkce: basicPKCE)
            #expect(try await redeem(http, idp, code: basicCode, verifier: basicPKCE.verifier).status == 200)

            let postPKCE = PKCE()
            let postCode = try await authorizationCode(idp, pkce: postPKCE)
            let post = try await http.postForm(
                idp.tokenEndpoint,
                [
                    ("grant_type", "authorization_code"), ("code", postCode), ("redirect_uri", redirectURI),
                    ("code_verifier", postPKCE.verifier), ("client_id", clientID), ("client_secret", clientSecret),
                ]
            )
            #expect(post.status == 200)
            #expect(idp.tokenRequestAuthenticationMethods == [.clientSecretBasic, .clientSecretPost])
            // The secret travelled in the body or the header, never in the URL.
            for request in idp.requests(to: "/token") {
                #expect(request.query.isEmpty)
                #expect(request.path == "/token")
            }
            #expect(idp.requests(to: "/token").last?.formValue("client_secret") == clientSecret)
        }
    }

    @Test func decodesFormURLEncodedBasicCredentials() async throws {
        try await withProvider { idp, http in
            idp.registerClient(id: "app:1", secret: "p@ss word+%")
            let reply = try await http.postForm(
                idp.tokenEndpoint,
                [("grant_type", "refresh_token"), ("refresh_token", "unknown")],
                headers: basicAuthorization("app:1", "p@ss word+%")
            )
            // Authenticated: the refusal is about the grant, not the client.
            #expect(reply.json["error"] as? String == "invalid_grant")
        }
    }

    @Test func refusesUnknownClientsWrongSecretsDisallowedMethodsAndTwoMethodsAtOnce() async throws {
        try await withProvider { idp, http in
            let form: [(name: String, value: String)] = [("grant_type", "refresh_token"), ("refresh_token", "x")]
            let wrong = try await http.postForm(idp.tokenEndpoint, form, headers: basicAuthorization(clientID, "wrong"))
            #expect(wrong.status == 401)
            #expect(wrong.json["error"] as? String == "invalid_client")
            #expect(wrong.header("WWW-Authenticate")?.hasPrefix("Basic") == true)
            let unknown = try await http.postForm(idp.tokenEndpoint, form + [("client_id", "nobody"), ("client_secret", "x")])
            #expect(unknown.status == 401)
            #expect(unknown.json["error"] as? String == "invalid_client")
            let none = try await http.postForm(idp.tokenEndpoint, form)
            #expect(none.status == 401)

            let both = try await http.postForm(idp.tokenEndpoint, form + [("client_secret", clientSecret)], headers: basicAuthorization())
            #expect(both.status == 400)
            #expect(both.json["error"] as? String == "invalid_request")

            idp.registerClient(id: "post-only", secret: "pw", authenticationMethods: [.clientSecretPost])
            let basicRefused = try await http.postForm(idp.tokenEndpoint, form, headers: basicAuthorization("post-only", "pw"))
            #expect(basicRefused.status == 401)
            let postAccepted = try await http.postForm(idp.tokenEndpoint, form + [("client_id", "post-only"), ("client_secret", "pw")])
            #expect(postAccepted.json["error"] as? String == "invalid_grant")
        }
    }

    @Test func acceptsPrivateKeyJWTAndRefusesReplayedExpiredOrMisaddressedAssertions() async throws {
        try await withProvider { idp, http in
            let key = try PrivateKey.generate(.ec(.p256))
            idp.registerClient(id: "jwt-client", publicKey: key.publicJWK(keyID: "client-key", algorithm: "ES256"))
            let now = Int(idp.now.timeIntervalSince1970)
            func assertion(audience: String = idp.tokenEndpoint, expiry: Int = now + 120, jti: String = SecureRandom.token()) throws -> String {
                let claims: [String: Any] = [
                    "iss": "jwt-client", "sub": "jwt-client", "aud": audience, "exp": expiry, "iat": now, "jti": jti,
                ]
                let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
                return try JWS.sign(payload: Array(payload), algorithm: .es256, keyID: "client-key", using: key)
            }
            func send(_ assertion: String) async throws -> Reply {
                try await http.postForm(
                    idp.tokenEndpoint,
                    [
                        ("grant_type", "refresh_token"), ("refresh_token", "x"), ("client_id", "jwt-client"),
                        ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                        ("client_assertion", assertion),
                    ]
                )
            }
            let good = try assertion()
            // Authenticated: the refusal is about the (made-up) refresh token.
            #expect(try await send(good).json["error"] as? String == "invalid_grant")
            #expect(try await send(try assertion(audience: idp.issuer)).json["error"] as? String == "invalid_grant")
            #expect(idp.tokenRequestAuthenticationMethods == [.privateKeyJWT, .privateKeyJWT])

            let replayed = try await send(good)
            #expect(replayed.status == 401)
            #expect(replayed.json["error"] as? String == "invalid_client")
            #expect(try await send(try assertion(expiry: now - 1)).status == 401)
            #expect(try await send(try assertion(audience: "https://elsewhere.example/token")).status == 401)
            let stranger = try PrivateKey.generate(.ec(.p256))
            let claims = try JSONSerialization.data(withJSONObject: [
                "iss": "jwt-client", "sub": "jwt-client", "aud": idp.tokenEndpoint, "exp": now + 60, "jti": "j",
            ])
            let forged = try JWS.sign(payload: Array(claims), algorithm: .es256, keyID: "client-key", using: stranger)
            #expect(try await send(forged).status == 401)
        }
    }

    @Test func authenticatesRevocationLikeTheTokenEndpoint() async throws {
        try await withProvider { idp, http in
            let refused = try await http.postForm(idp.revocationEndpoint, [("token", "x")], headers: basicAuthorization(clientID, "wrong"))
            #expect(refused.status == 401)
            #expect(idp.revokedTokens.isEmpty)
            let accepted = try await http.postForm(idp.revocationEndpoint, [("token", "x")], headers: basicAuthorization())
            #expect(accepted.status == 200)
            #expect(idp.revokedTokens == ["x"])
        }
    }
}

import Foundation
import TGCrypto
import TGTesting
import Testing

@Suite struct FakeIdentityProviderDiscoveryTests {
    @Test func servesTheDiscoveryDocumentBelowThePathPrefixAndCountsFetches() async throws {
        try await withProvider(pathPrefix: "/tenant-a/v2.0") { idp, http in
            #expect(idp.issuer == "http://127.0.0.1:\(idp.port)/tenant-a/v2.0")
            let reply = try await http.get(idp.discoveryURL)
            #expect(reply.status == 200)
            let document = reply.json
            #expect(document["issuer"] as? String == idp.issuer)
            #expect(document["authorization_endpoint"] as? String == idp.issuer + "/authorize")
            #expect(document["token_endpoint"] as? String == idp.issuer + "/token")
            #expect(document["jwks_uri"] as? String == idp.issuer + "/jwks")
            #expect(document["userinfo_endpoint"] as? String == idp.issuer + "/userinfo")
            #expect(document["revocation_endpoint"] as? String == idp.issuer + "/revoke")
            #expect(document["end_session_endpoint"] as? String == idp.issuer + "/logout")
            #expect(document["response_types_supported"] as? [String] == ["code"])
            #expect(document["response_modes_supported"] as? [String] == ["query", "form_post"])
            #expect(document["code_challenge_methods_supported"] as? [String] == ["S256"])
            #expect(document["id_token_signing_alg_values_supported"] as? [String] == ["RS256", "ES256"])
            #expect(
                document["token_endpoint_auth_methods_supported"] as? [String] == [
                    "client_secret_basic", "client_secret_post", "private_key_jwt",
                ]
            )
            #expect(document["authorization_response_iss_parameter_supported"] as? Bool == true)
            #expect(document["subject_types_supported"] as? [String] == ["public"])
            #expect(document["grant_types_supported"] as? [String] == ["authorization_code", "refresh_token"])
            _ = try await http.get(idp.discoveryURL)
            #expect(idp.discoveryFetchCount == 2)
            // Outside the issuer's path there is nothing.
            #expect(try await http.get("http://127.0.0.1:\(idp.port)/.well-known/openid-configuration").status == 404)
            #expect(idp.discoveryFetchCount == 2)
        }
    }

    @Test func overridesReplaceOrRemoveDiscoveryMembers() async throws {
        try await withProvider { idp, http in
            idp.settings.discoveryOverrides = ["revocation_endpoint": nil, "issuer": "https://mix-up.example"]
            idp.removeDiscoveryMember("end_session_endpoint")
            idp.overrideDiscoveryMember("code_challenge_methods_supported", with: ["plain"])
            let document = try await http.get(idp.discoveryURL).json
            #expect(document["revocation_endpoint"] == nil)
            #expect(document["end_session_endpoint"] == nil)
            #expect(document["issuer"] as? String == "https://mix-up.example")
            #expect(document["code_challenge_methods_supported"] as? [String] == ["plain"])
            #expect(document["token_endpoint"] as? String == idp.tokenEndpoint)
        }
    }

    @Test func discoveryAnswersAConfiguredStatusOrMalformedJSONAndStillCounts() async throws {
        try await withProvider { idp, http in
            idp.settings.discoveryFailure = .status(503, retryAfter: 5)
            let unavailable = try await http.get(idp.discoveryURL)
            #expect(unavailable.status == 503)
            #expect(unavailable.header("Retry-After") == "5")
            idp.settings.discoveryFailure = .malformedJSON
            let malformed = try await http.get(idp.discoveryURL)
            #expect(malformed.status == 200)
            #expect((try? JSONSerialization.jsonObject(with: Data(malformed.body))) == nil)
            #expect(idp.discoveryFetchCount == 2)
        }
    }

    @Test func publishesAnRSAAndAnECKeyWithKidAlgAndUse() async throws {
        try await withProvider { idp, http in
            let reply = try await http.get(idp.jwksURI)
            #expect(reply.status == 200)
            let keys = try JWKSet(json: reply.body).keys
            #expect(keys.map(\.keyType) == ["RSA", "EC"])
            #expect(keys.map(\.algorithm) == ["RS256", "ES256"])
            #expect(keys.allSatisfy { $0.use == "sig" && $0.keyID?.isEmpty == false })
            #expect(keys.first?.keyID == idp.signingKeyID(for: .rs256))
            #expect(keys.last?.keyID == idp.signingKeyID(for: .es256))
            for key in keys { _ = try PublicKey(jwk: key) }
            #expect(idp.jwksFetchCount == 1)
        }
    }

    @Test func rotatingKeysReplacesThemOrKeepsTheOldOnesPublished() async throws {
        try await withProvider { idp, http in
            let original = Set(try JWKSet(json: try await http.get(idp.jwksURI).body).keys.compactMap(\.keyID))
            try idp.rotateKeys()
            let rotated = Set(try JWKSet(json: try await http.get(idp.jwksURI).body).keys.compactMap(\.keyID))
            #expect(rotated.count == 2)
            #expect(rotated.isDisjoint(with: original))
            try idp.rotateKeys(keepingOldKeys: true)
            let both = try JWKSet(json: try await http.get(idp.jwksURI).body).keys.compactMap(\.keyID)
            #expect(both.count == 4)
            #expect(Set(both).isSuperset(of: rotated))
            // The newest key signs: an ID token issued now names it.
            let tokens = try await login(http, idp)
            let idToken = try #require(tokens["id_token"] as? String)
            #expect(try JWS(compactSerialization: idToken).header.keyID == idp.signingKeyID(for: .rs256))
            #expect(!rotated.contains(try #require(idp.signingKeyID(for: .rs256))))
            #expect(idp.jwksFetchCount == 3)
        }
    }

    @Test func jwksAnswersAConfiguredFailure() async throws {
        try await withProvider { idp, http in
            idp.settings.jwksFailure = .status(500)
            #expect(try await http.get(idp.jwksURI).status == 500)
            idp.settings.jwksFailure = .raw(status: 200, contentType: "text/html", body: "<html>")
            let html = try await http.get(idp.jwksURI)
            #expect(html.text == "<html>")
            #expect(html.header("Content-Type") == "text/html")
            #expect(idp.jwksFetchCount == 2)
        }
    }
}

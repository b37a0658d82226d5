import Foundation
import HTTPTypes
import TGTesting
import Testing

@Suite struct FakeIdentityProviderRefreshTests {
    @Test func rotatesRefreshTokensAndRefusesARotatedOne() async throws {
        try await withProvider { idp, http in
            let tokens = try await login(http, idp)
            let first = try #require(tokens["refresh_token"] as? String)
            let refreshed = try await refresh(http, idp, first)
            #expect(refreshed.status == 200)
            let second = try #require(refreshed.json["refresh_token"] as? String)
            #expect(second != first)
            #expect(refreshed.json["access_token"] as? String != tokens["access_token"] as? String)
            let idToken = try #require(refreshed.json["id_token"] as? String)
            try await verifyWithJWKS(idToken, http, idp)
            #expect(try claims(of: idToken)["nonce"] == nil)
            #expect(try claims(of: idToken)["sub"] as? String == "alice")

            let reused = try await refresh(http, idp, first)
            #expect(reused.status == 400)
            #expect(reused.json["error"] as? String == "invalid_grant")
            #expect(idp.isRefreshTokenActive(second))
            #expect(!idp.isRefreshTokenActive(first))
            #expect(try await refresh(http, idp, second).status == 200)
            #expect(idp.refreshCount == 3)
        }
    }

    @Test func keepsTheRefreshTokenWhenRotationIsOffAndExpiresItWhenConfigured() async throws {
        try await withProvider { idp, http in
            idp.configure {
                $0.rotatesRefreshTokens = false
                $0.refreshTokenLifetime = .seconds(600)
            }
            let tokens = try await login(http, idp)
            #expect(tokens["refresh_token_expires_in"] as? Int == 600)
            let refreshToken = try #require(tokens["refresh_token"] as? String)
            let refreshed = try await refresh(http, idp, refreshToken)
            #expect(refreshed.status == 200)
            #expect(refreshed.json["refresh_token"] == nil)
            #expect(try await refresh(http, idp, refreshToken).status == 200)
            idp.advanceClock(by: .seconds(601))
            #expect(try await refresh(http, idp, refreshToken).json["error"] as? String == "invalid_grant")
        }
    }

    @Test func reuseDetectionRevokesTheWholeGrantWhenEnabled() async throws {
        try await withProvider { idp, http in
            idp.settings.revokesGrantOnRefreshTokenReuse = true
            let first = try #require(try await login(http, idp)["refresh_token"] as? String)
            let second = try #require(try await refresh(http, idp, first).json["refresh_token"] as? String)
            #expect(try await refresh(http, idp, first).status == 400)
            #expect(try await refresh(http, idp, second).json["error"] as? String == "invalid_grant")
        }
    }

    @Test func revokingARefreshTokenEndsTheGrantAndIsRecorded() async throws {
        try await withProvider { idp, http in
            let tokens = try await login(http, idp)
            let refreshToken = try #require(tokens["refresh_token"] as? String)
            let accessToken = try #require(tokens["access_token"] as? String)
            let revoked = try await http.postForm(
                idp.revocationEndpoint,
                [("token", refreshToken), ("token_type_hint", "refresh_token")],
                headers: basicAuthorization()
            )
            #expect(revoked.status == 200)
            #expect(idp.revokedTokens == [refreshToken])
            #expect(try await refresh(http, idp, refreshToken).json["error"] as? String == "invalid_grant")
            #expect(try await http.get(idp.userInfoEndpoint, headers: [.authorization: "Bearer " + accessToken]).status == 401)
            // Unknown tokens are accepted too (RFC 7009 §2.2).
            #expect(try await http.postForm(idp.revocationEndpoint, [("token", "unknown")], headers: basicAuthorization()).status == 200)
        }
    }

    @Test func revokingEverythingOfASubjectEndsAllItsGrants() async throws {
        try await withProvider { idp, http in
            let one = try #require(try await login(http, idp)["refresh_token"] as? String)
            let two = try #require(try await login(http, idp)["refresh_token"] as? String)
            idp.revokeAllTokens(for: "alice")
            #expect(try await refresh(http, idp, one).json["error"] as? String == "invalid_grant")
            #expect(try await refresh(http, idp, two).json["error"] as? String == "invalid_grant")
        }
    }

    @Test func userInfoAnswersForLiveAccessTokensOnly() async throws {
        try await withProvider { idp, http in
            idp.settings.extraClaims = ["email": "alice@example.com"]
            let accessToken = try #require(try await login(http, idp)["access_token"] as? String)
            let info = try await http.get(idp.userInfoEndpoint, headers: [.authorization: "Bearer " + accessToken])
            #expect(info.status == 200)
            #expect(info.json["sub"] as? String == "alice")
            #expect(info.json["email"] as? String == "alice@example.com")
            let posted = try await http.send(.post, idp.userInfoEndpoint, headers: [.authorization: "Bearer " + accessToken], body: nil)
            #expect(posted.status == 200)

            idp.settings.userInfoSubject = "mallory"
            #expect(try await http.get(idp.userInfoEndpoint, headers: [.authorization: "Bearer " + accessToken]).json["sub"] as? String == "mallory")

            let missing = try await http.get(idp.userInfoEndpoint)
            #expect(missing.status == 401)
            #expect(missing.header("WWW-Authenticate") == "Bearer")
            let bogus = try await http.get(idp.userInfoEndpoint, headers: [.authorization: "Bearer nope"])
            #expect(bogus.status == 401)
            #expect(bogus.header("WWW-Authenticate") == #"Bearer error="invalid_token""#)
            idp.advanceClock(by: .seconds(3601))
            #expect(try await http.get(idp.userInfoEndpoint, headers: [.authorization: "Bearer " + accessToken]).status == 401)
        }
    }
}

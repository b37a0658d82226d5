import Foundation
import TGBase
import TGTesting
import Testing

@testable import TGOIDC

/// Refresh, keys, outages, revocation, logout and UserInfo against the fake provider.
@Suite struct FakeProviderGrantTests {
    @Test func followsRefreshTokenRotationAndSeesReuseOfAnOldOneAsFatal() async throws {
        let fixture = try FakeProviderFixture.start()
        let login = try await fixture.logIn()
        let first = try #require(login.tokens.refreshToken)
        let refreshed = try await fixture.provider.refresh(first, subject: "alice")
        let second = try #require(refreshed.tokens.refreshToken)
        #expect(second != first)
        #expect(refreshed.idToken?.subject == "alice")
        let reuse = await oidcError { _ = try await fixture.provider.refresh(first, subject: "alice") }
        #expect(reuse == OIDCError(.grantRejected(code: "invalid_grant")))
        #expect(reuse?.classification == .fatal)
        await fixture.stop()
    }

    @Test func classifiesEveryTokenEndpointFailureForTheGrantAndKeepsItOnTransientOnes() async throws {
        let fixture = try FakeProviderFixture.start()
        let token = try #require(try await fixture.logIn().tokens.refreshToken)
        // Answers the provider gives instead of processing the refresh.
        let cases: [(FakeIdentityProvider.TokenMisbehaviour, OIDCError)] = [
            (.error(code: "invalid_grant"), OIDCError(.grantRejected(code: "invalid_grant"))),
            (.error(code: "interaction_required"), OIDCError(.grantRejected(code: "interaction_required"))),
            (.error(code: "login_required"), OIDCError(.grantRejected(code: "login_required"))),
            (.error(code: "consent_required", description: "AADSTS65001"), OIDCError(.grantRejected(code: "consent_required"))),
            (.error(code: "temporarily_unavailable", status: 400), OIDCError(.providerUnavailable(retryAfter: nil))),
            (.serverError, OIDCError(.providerUnavailable(retryAfter: nil))),
            (.tooManyRequests(retryAfter: 30), OIDCError(.providerUnavailable(retryAfter: .seconds(30)))),
            (.serviceUnavailable(retryAfter: 5), OIDCError(.providerUnavailable(retryAfter: .seconds(5)))),
            (.malformedJSON(), OIDCError(.invalidResponse("token response is not a JSON object"))),
        ]
        for (misbehaviour, expected) in cases {
            fixture.fake.misbehave(misbehaviour, grantType: "refresh_token")
            let error = await oidcError { _ = try await fixture.provider.refresh(token, subject: "alice") }
            #expect(error == expected, "\(misbehaviour)")
        }
        // None of them cost the grant: the same token still refreshes.
        #expect(fixture.fake.isRefreshTokenActive(token))
        #expect(try await fixture.provider.refresh(token, subject: "alice").tokens.accessToken.isEmpty == false)
        await fixture.stop()
    }

    @Test func refusesA200ThatIsNotAUsableTokenResponse() async throws {
        let fixture = try FakeProviderFixture.start()
        let cases: [(FakeIdentityProvider.TokenMisbehaviour, String)] = [
            (.missingAccessToken, "token response lacks access_token"),
            (.tokenType("mac"), "token_type is not Bearer"),
            (.responseMembers(["expires_in": "soon"]), "expires_in is not a number of seconds"),
        ]
        for (misbehaviour, what) in cases {
            let token = try #require(try await fixture.logIn().tokens.refreshToken)
            fixture.fake.misbehave(misbehaviour, grantType: "refresh_token")
            let error = await oidcError { _ = try await fixture.provider.refresh(token, subject: "alice") }
            #expect(error == OIDCError(.invalidResponse(what)))
            #expect(error?.classification == .failed)
        }
        await fixture.stop()
    }

    @Test func givesUpOnASlowProviderAtTheDeadlineAsTransient() async throws {
        let fixture = try FakeProviderFixture.start(configure: { $0.requestTimeout = .milliseconds(300) })
        let token = try #require(try await fixture.logIn().tokens.refreshToken)
        // The answer is held until the test has seen the deadline pass.
        let gate = TestGate()
        fixture.fake.misbehave(.held(gate), grantType: "refresh_token")
        let started = ContinuousClock.now
        let error = await oidcError { _ = try await fixture.provider.refresh(token, subject: "alice") }
        #expect(error == OIDCError(.providerUnavailable(retryAfter: nil)))
        #expect(ContinuousClock.now - started < .seconds(2))
        gate.open()
        await fixture.stop()
    }

    @Test func followsKeyRotationAndRateLimitsRefetchesForUnknownKeys() async throws {
        let fixture = try FakeProviderFixture.start()
        _ = try await fixture.logIn()
        #expect(fixture.fake.jwksFetchCount == 1)
        // The provider rotates its keys: the next token names a new kid, fetched once.
        try fixture.fake.rotateKeys()
        fixture.fake.advanceClock(by: .seconds(120))
        #expect(try await fixture.logIn().idToken?.subject == "alice")
        #expect(fixture.fake.jwksFetchCount == 2)
        // Tokens naming kids nobody publishes do not make TokenGate hammer the JWKS.
        for attempt in 0..<5 {
            fixture.fake.misbehave(.idTokenSignedWithUnpublishedKey(keyID: "forged-\(attempt)"))
            #expect(await oidcError { _ = try await fixture.logIn() } == OIDCError(.invalidIDToken(.unknownKey)))
        }
        #expect(fixture.fake.jwksFetchCount == 2)
        // Once the interval has passed, an unknown kid may refetch again.
        fixture.fake.advanceClock(by: .seconds(61))
        fixture.fake.misbehave(.idTokenSignedWithUnpublishedKey(keyID: "forged-late"))
        _ = await oidcError { _ = try await fixture.logIn() }
        #expect(fixture.fake.jwksFetchCount == 3)
        await fixture.stop()
    }

    @Test func triesAFailingJWKSOnlyOncePerIntervalWhateverTheTokensClaim() async throws {
        let fixture = try FakeProviderFixture.start()
        _ = try await fixture.logIn()
        fixture.fake.configure { $0.jwksFailure = .status(503) }
        try fixture.fake.rotateKeys()
        fixture.fake.advanceClock(by: .seconds(120))
        // Every login now names a kid the cache lacks while the JWKS is down: one attempt only.
        for _ in 0..<4 {
            #expect(await oidcError { _ = try await fixture.logIn() } != nil)
        }
        #expect(fixture.fake.jwksFetchCount == 2)
        // The provider recovers; after the interval the rotated key is fetched and used.
        fixture.fake.configure { $0.jwksFailure = nil }
        fixture.fake.advanceClock(by: .seconds(61))
        #expect(try await fixture.logIn().idToken?.subject == "alice")
        #expect(fixture.fake.jwksFetchCount == 3)
        await fixture.stop()
    }

    @Test func cachesDiscoveryAndKeepsServingItWhenARefreshFails() async throws {
        let fixture = try FakeProviderFixture.start()
        _ = try await fixture.logIn()
        _ = try await fixture.logIn()
        #expect(fixture.fake.discoveryFetchCount == 1)
        fixture.fake.configure { $0.discoveryFailure = .status(503) }
        fixture.fake.advanceClock(by: .seconds(25 * 3600))
        #expect(try await fixture.logIn().idToken != nil)
        #expect(try await fixture.logIn().idToken != nil)
        // One failed attempt, then a pause: an outage does not turn every login into a fetch.
        #expect(fixture.fake.discoveryFetchCount == 2)
        fixture.fake.configure { $0.discoveryFailure = nil }
        fixture.fake.advanceClock(by: .seconds(61))
        _ = try await fixture.provider.metadata()
        #expect(fixture.fake.discoveryFetchCount == 3)
        await fixture.stop()
    }

    @Test func failsCleanlyWhenDiscoveryIsBrokenOrNamesAnotherIssuer() async throws {
        let fixture = try FakeProviderFixture.start()
        fixture.fake.configure { $0.discoveryFailure = .malformedJSON }
        #expect(await oidcError { _ = try await fixture.provider.authorizationRequest() }?.classification == .failed)
        fixture.fake.configure {
            $0.discoveryFailure = nil
            $0.discoveryOverrides = ["issuer": "https://attacker.example"]
        }
        let error = await oidcError { _ = try await fixture.provider.authorizationRequest() }
        #expect(error == OIDCError(.misconfigured("discovery document names another issuer than configured")))
        await fixture.stop()
    }

    @Test func revokesTheRefreshTokenAfterwhichItIsDead() async throws {
        let fixture = try FakeProviderFixture.start()
        let token = try #require(try await fixture.logIn().tokens.refreshToken)
        #expect(try await fixture.provider.revoke(refreshToken: token))
        #expect(fixture.fake.revokedTokens == [token])
        #expect(!fixture.fake.isRefreshTokenActive(token))
        #expect(await oidcError { _ = try await fixture.provider.refresh(token) }?.classification == .fatal)
        // A provider without a revocation endpoint: nothing to call, the caller forgets the token.
        let plain = try FakeProviderFixture.start()
        plain.fake.removeDiscoveryMember("revocation_endpoint")
        #expect(try await plain.provider.revoke(refreshToken: "whatever") == false)
        await plain.stop()
        await fixture.stop()
    }

    @Test func buildsTheEndSessionURLWithTheIDTokenHint() async throws {
        let fixture = try FakeProviderFixture.start()
        let idToken = try #require(try await fixture.logIn().idToken)
        let url = try #require(
            try await fixture.provider.endSessionURL(idTokenHint: idToken.raw, postLogoutRedirectURI: "com.example.app:/signed-out", state: "xyz")
        )
        let parameters = FakeIdentityProvider.queryParameters(of: url)
        #expect(url.hasPrefix(fixture.fake.endSessionEndpoint + "?"))
        #expect(parameters["id_token_hint"] == idToken.raw)
        #expect(parameters["post_logout_redirect_uri"] == "com.example.app:/signed-out")
        #expect(parameters["client_id"] == FakeProviderFixture.clientID)
        #expect(parameters["state"] == "xyz")
        let without = try FakeProviderFixture.start()
        without.fake.removeDiscoveryMember("end_session_endpoint")
        #expect(try await without.provider.endSessionURL(idTokenHint: nil, postLogoutRedirectURI: nil) == nil)
        await without.stop()
        await fixture.stop()
    }

    @Test func readsUserInfoAndRefusesAnswersAboutAnotherSubject() async throws {
        let fixture = try FakeProviderFixture.start(
            settings: {
                var s = FakeIdentityProvider.Settings()
                s.extraClaims = ["name": "Alice A."]
                return s
            }()
        )
        let login = try await fixture.logIn()
        let claims = try await fixture.provider.userInfo(accessToken: login.tokens.accessToken, subject: "alice")
        #expect(claims["name"] == .string("Alice A."))
        fixture.fake.configure { $0.userInfoSubject = "mallory" }
        let error = await oidcError { _ = try await fixture.provider.userInfo(accessToken: login.tokens.accessToken, subject: "alice") }
        #expect(error == OIDCError(.invalidResponse("userinfo is about another subject")))
        await fixture.stop()
    }
}

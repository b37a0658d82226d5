import Foundation
import TGCrypto
import TGTesting
import Testing

@testable import TGOIDC

/// The code flow against the fake provider, including each way it can misbehave.
@Suite struct FakeProviderLoginTests {
    @Test func logsInWithPKCEAndEachClientAuthenticationMethod() async throws {
        let key = try PrivateKey.generate(.ec(.p256))
        let methods: [ClientAuthentication] = [
            .clientSecretBasic(secret: FakeProviderFixture.secret),
            .clientSecretPost(secret: FakeProviderFixture.secret),
            .privateKeyJWT(key: key, keyID: "tg-2026", algorithm: .es256),
        ]
        for method in methods {
            let fixture = try FakeProviderFixture.start(authentication: method)
            if case .privateKeyJWT = method {
                fixture.fake.registerClient(id: FakeProviderFixture.clientID, publicKey: key.publicJWK(keyID: "tg-2026", algorithm: "ES256"))
            }
            let login = try await fixture.logIn(AuthorizationOptions(loginHint: "bob"))
            #expect(login.idToken?.subject == "bob")
            #expect(login.tokens.refreshToken != nil)
            #expect(fixture.fake.tokenRequestAuthenticationMethods.map(\.rawValue) == [method.description])
            // The secret travels only where the method puts it, never in a URL.
            for request in fixture.fake.requests {
                #expect(!request.path.contains(FakeProviderFixture.secret))
                #expect(!request.query.contains { $0.value.contains(FakeProviderFixture.secret) })
            }
            await fixture.stop()
        }
    }

    @Test func failsAsAClientRejectionWithAWrongClientSecret() async throws {
        let fixture = try FakeProviderFixture.start(authentication: .clientSecretBasic(secret: "wrong"))
        let error = await oidcError { _ = try await fixture.logIn() }
        #expect(error == OIDCError(.clientRejected(code: "invalid_client")))
        #expect(error?.classification == .clientRefused)
        await fixture.stop()
    }

    @Test func receivesTheCallbackByFormPostToo() async throws {
        let fixture = try FakeProviderFixture.start(configure: { $0.responseMode = .formPost })
        let login = try await fixture.logIn()
        #expect(login.idToken?.subject == "alice")
        #expect(fixture.fake.lastAuthorizationQuery?["response_mode"] == "form_post")
        await fixture.stop()
    }

    @Test func refusesACallbackWhoseIssuerIsAnotherProvidersOrMissing() async throws {
        let fixture = try FakeProviderFixture.start()
        fixture.fake.configure { $0.authorizationResponseIssuer = .value("https://attacker.example") }
        let (pending, callback) = try await fixture.authorize()
        let mixUp = await oidcError {
            _ = try await fixture.provider.redeem(code: callback["code"] ?? "", for: pending, callbackIssuer: callback["iss"])
        }
        #expect(mixUp == OIDCError(.issuerMismatch))
        // The provider promises `iss` (authorization_response_iss_parameter_supported): omitted is refused.
        fixture.fake.configure { $0.authorizationResponseIssuer = .omitted }
        let (second, bare) = try await fixture.authorize()
        #expect(bare["iss"] == nil)
        let missing = await oidcError { _ = try await fixture.provider.redeem(code: bare["code"] ?? "", for: second, callbackIssuer: nil) }
        #expect(missing == OIDCError(.issuerMismatch))
        // Neither attempt reached the token endpoint.
        #expect(fixture.fake.requests(to: "/token").isEmpty)
        await fixture.stop()
    }

    @Test func rejectsEachForgedOrWrongIDToken() async throws {
        let fixture = try FakeProviderFixture.start()
        let cases: [(FakeIdentityProvider.TokenMisbehaviour, IDTokenProblem)] = [
            (.idTokenSignedWithUnpublishedKey(), .badSignature),
            (.idTokenSignedWithUnpublishedKey(keyID: "not-published"), .unknownKey),
            (.idTokenAudience("another-client"), .audience),
            (.expiredIDToken, .expired),
            (.idTokenNonce("nonce-of-an-earlier-login"), .nonce),
            (.idTokenIssuer("http://127.0.0.1:1/other"), .issuer),
            (.unsignedIDToken, .algorithmNotAllowed),
            (.idTokenHMACSignedWithPublicKey, .algorithmNotAllowed),
        ]
        for (misbehaviour, problem) in cases {
            fixture.fake.misbehave(misbehaviour)
            let error = await oidcError { _ = try await fixture.logIn() }
            #expect(error == OIDCError(.invalidIDToken(problem)), "\(misbehaviour)")
        }
        fixture.fake.misbehave(.withoutIDToken)
        #expect(await oidcError { _ = try await fixture.logIn() } == OIDCError(.invalidResponse("token response lacks id_token")))
        // After all that, a correct login still works.
        #expect(try await fixture.logIn().idToken?.subject == "alice")
        await fixture.stop()
    }

    @Test func reportsTheProvidersRefusalOfTheLogin() async throws {
        let fixture = try FakeProviderFixture.start()
        fixture.fake.configure { $0.authorizationError = .init(code: "access_denied") }
        let (_, callback) = try await fixture.authorize()
        #expect(callback["error"] == "access_denied")
        #expect(callback["code"] == nil)
        await fixture.stop()
    }
}

import Foundation
import HTTPTypes
import TGBase
import TGHTTPClient
import TGTesting
import Testing

@testable import TGOIDC

/// Against `oidc-provider-mock`, an OpenID provider nobody in this project wrote (PyPI, on
/// loopback): the whole confidential-client code flow with its own tokens and keys.
@Suite(.serialized) struct RealProviderTests {
    static let redirectURI = "https://tokengate.example/auth/callback"

    /// A client for a provider that speaks plain http on loopback.
    static func openIDProvider(_ mock: OIDCProviderMock) -> (OpenIDProvider, HTTPClient) {
        var httpConfiguration = HTTPClient.Configuration()
        httpConfiguration.allowPlainHTTPToLoopbackForTesting = true
        let http = HTTPClient(configuration: httpConfiguration)
        let configuration = ProviderConfiguration(
            name: "mock",
            profile: .openIDConnect(issuer: mock.issuer),
            clientID: "tokengate-test",
            clientAuthentication: .clientSecretBasic(secret: "s3cret:with/odd&chars"),
            redirectURI: redirectURI
        )
        return (OpenIDProvider(configuration: configuration, httpClient: http), http)
    }

    /// The browser step: the user submits the provider's login form as `subject`; returns the
    /// callback's query parameters from the provider's redirect.
    static func logIn(_ subject: String, at authorizationURL: String, http: HTTPClient) async throws -> [String: String] {
        var request = try OpenIDProvider.request(.post, authorizationURL)
        request.headerFields[.contentType] = "application/x-www-form-urlencoded"
        let response = try await http.send(request, body: Array("sub=\(subject)".utf8), timeout: .seconds(10))
        #expect(response.head.status.code == 302)
        let location = try #require(response.head.headerFields[.location])
        #expect(location.hasPrefix(redirectURI + "?"))
        let query = location.split(separator: "?", maxSplits: 1).last.map(String.init) ?? ""
        var parameters: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            if parts.count == 2 { parameters[parts[0]] = parts[1] }
        }
        return parameters
    }

    @Test func completesTheCodeFlowRefreshesReadsUserInfoAndSeesARevokedGrantAsFatal() async throws {
        let mock = try await OIDCProviderMock.start()
        defer { mock.stop() }
        let (provider, http) = Self.openIDProvider(mock)

        let metadata = try await provider.metadata()
        #expect(metadata.issuer == mock.issuer)

        let authorization = try await provider.authorizationRequest(AuthorizationOptions(loginHint: "alice"))
        #expect(authorization.url.hasPrefix(metadata.authorizationEndpoint + "?"))
        #expect(authorization.url.contains("code_challenge_method=S256"))
        let callback = try await Self.logIn("alice", at: authorization.url, http: http)
        #expect(callback["state"] == authorization.pending.state)
        let code = try #require(callback["code"])

        let login = try await provider.redeem(code: code, for: authorization.pending, callbackIssuer: callback["iss"])
        let idToken = try #require(login.idToken)
        #expect(idToken.subject == "alice")
        #expect(idToken.issuer == mock.issuer)
        #expect(idToken.nonce == authorization.pending.nonce)
        let refreshToken = try #require(login.tokens.refreshToken)
        #expect(login.tokens.accessTokenExpiresAt != nil)

        // The code is single use at a real provider too: a replay is a fatal grant error.
        await #expect(throws: OIDCError(.grantRejected(code: "invalid_grant"))) {
            _ = try await provider.redeem(code: code, for: authorization.pending, callbackIssuer: callback["iss"])
        }

        let refreshed = try await provider.refresh(refreshToken, subject: "alice")
        #expect(refreshed.tokens.accessToken != login.tokens.accessToken)

        let claims = try await provider.userInfo(accessToken: refreshed.tokens.accessToken, subject: "alice")
        #expect(claims["sub"] == .string("alice"))
        #expect(claims["email"] == .string("alice"))

        // The provider's administrator revokes alice's tokens: the next refresh is fatal.
        let current = refreshed.tokens.refreshToken ?? refreshToken
        var revoke = try OpenIDProvider.request(.post, "\(mock.issuer)/users/alice/revoke-tokens")
        revoke.headerFields[.contentType] = "application/json"
        let revoked = try await http.send(revoke, body: Array("{}".utf8), timeout: .seconds(10))
        #expect(revoked.head.status.code == 204)
        do {
            _ = try await provider.refresh(current, subject: "alice")
            Issue.record("a refresh with a revoked grant succeeded")
        } catch {
            #expect(error.classification == .fatal)
        }
    }

    @Test func refusesACodeRedeemedWithAnotherLoginsNonce() async throws {
        let mock = try await OIDCProviderMock.start()
        defer { mock.stop() }
        let (provider, http) = Self.openIDProvider(mock)
        let first = try await provider.authorizationRequest()
        let second = try await provider.authorizationRequest()
        #expect(first.pending.state != second.pending.state)
        #expect(first.pending.nonce != second.pending.nonce)
        #expect(first.pending.codeVerifier != second.pending.codeVerifier)
        let callback = try await Self.logIn("bob", at: first.url, http: http)
        let code = try #require(callback["code"])
        // The code of the first login presented with the second login's state: its ID token
        // carries the first nonce, so it is refused.
        await #expect(throws: OIDCError(.invalidIDToken(.nonce))) {
            _ = try await provider.redeem(code: code, for: second.pending, callbackIssuer: callback["iss"])
        }
    }
}

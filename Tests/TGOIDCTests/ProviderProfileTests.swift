import Foundation
import TGCrypto
import TGHTTPClient
import Testing

@testable import TGOIDC

/// Provider quirks that need no server: where metadata comes from, which issuers are acceptable,
/// what each profile adds to an authorization request.
@Suite struct ProviderProfileTests {
    static let metadata = ProviderMetadata(
        issuer: "https://idp.example",
        authorizationEndpoint: "https://idp.example/authorize?tenant=a",
        tokenEndpoint: "https://idp.example/token"
    )

    func query(_ url: String) -> [String: String] {
        var result: [String: String] = [:]
        for pair in (url.split(separator: "?", maxSplits: 1).last ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
            result[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return result
    }

    @Test func findsEachProvidersDiscoveryDocument() throws {
        #expect(
            try ProviderProfile.entra(tenant: "organizations").discoveryURL(policy: nil)
                == "https://login.microsoftonline.com/organizations/v2.0/.well-known/openid-configuration"
        )
        #expect(
            try ProviderProfile.entra(tenant: "common", authority: "https://login.microsoftonline.us").discoveryURL(policy: nil)
                == "https://login.microsoftonline.us/common/v2.0/.well-known/openid-configuration"
        )
        let b2c = ProviderProfile.azureADB2C(
            host: "https://contoso.b2clogin.com",
            tenantDomain: "contoso.onmicrosoft.com",
            policies: ["B2C_1_signin", "B2C_1_edit"]
        )
        #expect(
            try b2c.discoveryURL(policy: nil)
                == "https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_signin/v2.0/.well-known/openid-configuration"
        )
        #expect(
            try b2c.discoveryURL(policy: "b2c_1_EDIT")
                == "https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_edit/v2.0/.well-known/openid-configuration"
        )
        #expect(throws: OIDCError(.misconfigured("unknown policy"))) { try b2c.discoveryURL(policy: "B2C_1_other") }
        #expect(throws: OIDCError.self) { try ProviderProfile.google().resolvedPolicy("B2C_1_signin") }
        #expect(try ProviderProfile.google().discoveryURL(policy: nil) == "https://accounts.google.com/.well-known/openid-configuration")
        #expect(try ProviderProfile.oauth2(Self.metadata).discoveryURL(policy: nil) == nil)
    }

    @Test func acceptsOnlyIssuersUnderTheConfiguredAuthority() {
        let entra = ProviderProfile.entra(tenant: "common")
        #expect(entra.acceptsDiscoveredIssuer("https://login.microsoftonline.com/{tenantid}/v2.0"))
        #expect(entra.acceptsDiscoveredIssuer("https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0"))
        #expect(!entra.acceptsDiscoveredIssuer("https://login.evil.example/{tenantid}/v2.0"))
        #expect(!entra.acceptsDiscoveredIssuer("https://login.microsoftonline.com.evil.example/x/v2.0"))
        let generic = ProviderProfile.openIDConnect(issuer: "https://idp.example/realms/a")
        #expect(generic.acceptsDiscoveredIssuer("https://idp.example/realms/a/"))
        #expect(!generic.acceptsDiscoveredIssuer("https://idp.example/realms/b"))
    }

    @Test func addsCognitosUnadvertisedRevocationAndLogoutEndpoints() {
        let cognito = ProviderProfile.cognito(
            issuer: "https://cognito-idp.eu-west-1.amazonaws.com/pool",
            domain: "https://shop.auth.eu-west-1.amazoncognito.com/"
        )
        let completed = cognito.completing(Self.metadata)
        #expect(completed.revocationEndpoint == "https://shop.auth.eu-west-1.amazoncognito.com/oauth2/revoke")
        #expect(completed.endSessionEndpoint == "https://shop.auth.eu-west-1.amazoncognito.com/logout")
        #expect(ProviderProfile.google().completing(Self.metadata).revocationEndpoint == nil)
    }

    @Test func buildsAnAuthorizationRequestWithStateNonceAndAnS256Challenge() async throws {
        let request = try await testProvider(.oauth2(Self.metadata)).authorizationRequest(
            AuthorizationOptions(extraScopes: ["api://app/read"], prompt: "select_account", loginHint: "a@b.example", domainHint: "b.example")
        )
        #expect(request.url.hasPrefix("https://idp.example/authorize?tenant=a&"))
        let parameters = query(request.url)
        #expect(parameters["response_type"] == "code")
        #expect(parameters["client_id"] == "client 1")
        #expect(parameters["redirect_uri"] == "https://gw.example/auth/callback")
        #expect(parameters["state"] == request.pending.state)
        #expect(parameters["nonce"] == request.pending.nonce)
        #expect(parameters["code_challenge_method"] == "S256")
        let expected = Base64URL.encode(Digest.sha256(Array(request.pending.codeVerifier.utf8)))
        #expect(parameters["code_challenge"] == expected)
        #expect(request.pending.codeVerifier.count >= 43)
        #expect(parameters["scope"] == "openid profile email offline_access api://app/read")
        #expect(parameters["prompt"] == "select_account")
        #expect(parameters["login_hint"] == "a@b.example")
        #expect(parameters["domain_hint"] == "b.example")
        // The verifier never leaves TokenGate.
        #expect(!request.url.contains(request.pending.codeVerifier))
    }

    @Test func asksGoogleForOfflineAccessWithConsentAndWithoutTheOfflineAccessScope() {
        let profile = ProviderProfile.google()
        #expect(profile.adjustedScopes(["openid", "offline_access", "email"]) == ["openid", "email"])
        let parameters = Dictionary(uniqueKeysWithValues: profile.authorizationParameters.map { ($0.name, $0.value) })
        #expect(parameters["access_type"] == "offline")
        #expect(profile.requiredPrompts == ["consent"])  // how an app's prompt adds to it: PromptMergeTests
    }

    @Test func neverLetsConfiguredExtraParametersReplaceTheProtocolsOwn() async throws {
        let request = try await testProvider(.oauth2(Self.metadata)) {
            $0.extraAuthorizationParameters = [("state", "fixed"), ("code_challenge_method", "plain"), ("resource", "https://api.example")]
            $0.responseMode = .formPost
        }.authorizationRequest()
        let parameters = query(request.url)
        #expect(parameters["state"] == request.pending.state)
        #expect(parameters["code_challenge_method"] == "S256")
        #expect(parameters["resource"] == "https://api.example")
        #expect(parameters["response_mode"] == "form_post")
    }

    @Test func refusesPromptValuesAndScopesThatWouldBreakTheRequest() async {
        let oauth = testProvider(.oauth2(Self.metadata))
        await #expect(throws: OIDCError.self) { _ = try await oauth.authorizationRequest(AuthorizationOptions(prompt: "consent&x=1")) }
        await #expect(throws: OIDCError.self) { _ = try await oauth.authorizationRequest(AuthorizationOptions(extraScopes: ["a b"])) }
        await #expect(throws: OIDCError.self) { _ = try await oauth.authorizationRequest(AuthorizationOptions(policy: "B2C_1_x")) }
    }

    @Test func givesEveryLoginFreshRandomValues() async throws {
        let oauth = testProvider(.oauth2(Self.metadata))
        var seen: Set<String> = []
        for _ in 0..<20 {
            let pending = try await oauth.authorizationRequest().pending
            for value in [pending.state, pending.nonce, pending.codeVerifier] {
                #expect(seen.insert(value).inserted)
                #expect(value.count >= 43)
            }
        }
    }
}

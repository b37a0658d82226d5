import Foundation
import TGTesting
import Testing

@testable import TGOIDC

/// Provider profiles end to end against the fake provider shaped like the real ones.
@Suite struct ProviderQuirkTests {
    static let contoso = "72f988bf-86f1-41af-91ab-2d7cd011db47"
    static let fabrikam = "f8cdef31-a31e-4b4a-93e4-5f571e91255a"

    /// An Entra-like multi-tenant authority: discovery at `/common/v2.0` names the `{tenantid}`
    /// template; tokens name their tenant in `iss` and `tid` (and the callback carries no `iss`).
    func entra(tenant: String, allowedTenants: Set<String>) throws -> FakeProviderFixture {
        let fixture = try FakeProviderFixture.start(
            pathPrefix: "/common/v2.0",
            profile: { fake in
                .entra(tenant: "common", authority: "http://127.0.0.1:\(fake.port)", allowedTenants: allowedTenants)
            }
        )
        let base = "http://127.0.0.1:\(fixture.fake.port)"
        fixture.fake.configure {
            $0.discoveryOverrides = ["issuer": "\(base)/{tenantid}/v2.0"]
            $0.discoveryOverrides["authorization_response_iss_parameter_supported"] = nil as (any Sendable)?
            $0.authorizationResponseIssuer = .omitted
            $0.extraClaims = ["tid": tenant]
        }
        fixture.fake.misbehave(.idTokenIssuer("\(base)/\(tenant)/v2.0"), .untilReset)
        return fixture
    }

    @Test func acceptsAnyTenantOfTheMultiTenantTemplateWithoutAnAllowlist() async throws {
        let fixture = try entra(tenant: Self.fabrikam, allowedTenants: [])
        let metadata = try await fixture.provider.metadata()
        #expect(metadata.issuer.hasSuffix("/{tenantid}/v2.0"))
        let login = try await fixture.logIn()
        #expect(login.idToken?.tenantID == Self.fabrikam)
        #expect(login.idToken?.issuer == "http://127.0.0.1:\(fixture.fake.port)/\(Self.fabrikam)/v2.0")
        await fixture.stop()
    }

    @Test func refusesATenantOutsideTheAllowlist() async throws {
        let allowed = try entra(tenant: Self.contoso, allowedTenants: [Self.contoso])
        #expect(try await allowed.logIn().idToken?.tenantID == Self.contoso)
        await allowed.stop()
        let other = try entra(tenant: Self.fabrikam, allowedTenants: [Self.contoso])
        #expect(await oidcError { _ = try await other.logIn() } == OIDCError(.invalidIDToken(.tenantNotAllowed)))
        await other.stop()
    }

    @Test func refusesATokenWhoseIssuerTenantDiffersFromItsTid() async throws {
        let fixture = try entra(tenant: Self.contoso, allowedTenants: [])
        // `tid` says contoso, `iss` says fabrikam: the template filled with `tid` does not match.
        fixture.fake.resetMisbehaviours()
        fixture.fake.misbehave(.idTokenIssuer("http://127.0.0.1:\(fixture.fake.port)/\(Self.fabrikam)/v2.0"), .untilReset)
        #expect(await oidcError { _ = try await fixture.logIn() } == OIDCError(.invalidIDToken(.issuer)))
        // A `tid` that is not a GUID cannot smuggle a path into the issuer compared.
        fixture.fake.configure { $0.extraClaims = ["tid": "x/../\(Self.fabrikam)"] }
        #expect(await oidcError { _ = try await fixture.logIn() } == OIDCError(.invalidIDToken(.issuer)))
        await fixture.stop()
    }

    @Test func redeemsOneEntraRefreshTokenForAnotherResourcesScopes() async throws {
        let fixture = try entra(tenant: Self.contoso, allowedTenants: [])
        let token = try #require(try await fixture.logIn().tokens.refreshToken)
        let graph = try await fixture.provider.refresh(token, scopes: ["https://graph.microsoft.com/User.Read", "offline_access"], subject: "alice")
        #expect(fixture.fake.requests(to: "/token").last?.formValue("scope") == "https://graph.microsoft.com/User.Read offline_access")
        #expect(graph.tokens.refreshToken != nil)
        await fixture.stop()
    }

    @Test func revokesAndLogsOutAtCognitosUnadvertisedEndpoints() async throws {
        // Cognito's hosted UI serves /oauth2/revoke and /logout; its discovery names neither.
        let fixture = try FakeProviderFixture.start(
            pathPrefix: "/oauth2",
            profile: { fake in .cognito(issuer: fake.issuer, domain: "http://127.0.0.1:\(fake.port)") }
        )
        fixture.fake.removeDiscoveryMember("revocation_endpoint")
        fixture.fake.removeDiscoveryMember("end_session_endpoint")
        let token = try #require(try await fixture.logIn().tokens.refreshToken)
        #expect(try await fixture.provider.revoke(refreshToken: token))
        #expect(fixture.fake.revokedTokens == [token])
        let logout = try #require(try await fixture.provider.endSessionURL(idTokenHint: "ignored", postLogoutRedirectURI: "https://app.example/bye"))
        #expect(logout.hasPrefix("http://127.0.0.1:\(fixture.fake.port)/logout?"))
        let parameters = FakeIdentityProvider.queryParameters(of: logout)
        #expect(parameters["client_id"] == FakeProviderFixture.clientID)
        #expect(parameters["logout_uri"] == "https://app.example/bye")
        #expect(parameters["id_token_hint"] == nil)
        await fixture.stop()
    }

    @Test func logsInThroughTheChosenB2CPolicyAndRefreshesAtThatPolicysAuthority() async throws {
        let tenantGUID = "775527ff-9a37-4307-8b3d-cc311f58d925"
        let fixture = try FakeProviderFixture.start(
            pathPrefix: "/contoso.onmicrosoft.com/B2C_1_edit/v2.0",
            profile: { fake in
                .azureADB2C(host: "http://127.0.0.1:\(fake.port)", tenantDomain: "contoso.onmicrosoft.com", policies: ["B2C_1_signin", "B2C_1_edit"])
            }
        )
        // B2C's issuer names the tenant GUID (with a trailing slash), not the policy path.
        let issuer = "http://127.0.0.1:\(fixture.fake.port)/\(tenantGUID)/v2.0/"
        fixture.fake.configure {
            $0.discoveryOverrides = ["issuer": issuer]
            $0.authorizationResponseIssuer = .value(issuer)
        }
        fixture.fake.misbehave(.idTokenIssuer(issuer), .untilReset)
        // The default policy's authority is not served by this fake: proof the policy picks the authority.
        #expect(await oidcError { _ = try await fixture.provider.authorizationRequest() } != nil)
        let (pending, callback) = try await fixture.authorize(AuthorizationOptions(policy: "b2c_1_EDIT"))
        #expect(pending.policy == "B2C_1_edit")
        let login = try await fixture.provider.redeem(code: try #require(callback["code"]), for: pending, callbackIssuer: callback["iss"])
        #expect(login.idToken?.issuer == issuer)
        let token = try #require(login.tokens.refreshToken)
        _ = try await fixture.provider.refresh(token, policy: pending.policy, subject: "alice")
        #expect(fixture.fake.refreshCount == 1)
        await fixture.stop()
    }
}

import Foundation
import TGAppTesting
import TGPostgres
import TGTesting
import Testing

/// Azure AD B2C: a grant belongs to the policy (user flow) it was issued under.
@Suite struct B2CPolicyTests {
    static let tenantGUID = "775527ff-9a37-4307-8b3d-cc311f58d925"

    /// The fake serves only `B2C_1_edit`, not the default (first) policy: anything sent to the
    /// default policy's endpoints fails.
    @Test func aGrantIsRefreshedAndLoggedOutAtThePolicyItWasIssuedUnder() async throws {
        try await AuthFlowHarness.run(
            fakePathPrefix: "/contoso.onmicrosoft.com/B2C_1_edit/v2.0",
            providerEntry: """
                { name: fake, kind: b2c, tenant: contoso.onmicrosoft.com, authority: "http://127.0.0.1:{fake_port}", \
                policies: [B2C_1_signin, B2C_1_edit], client_id: tokengate, client_secret: s3cret }
                """,
            withGraphAPI: true,
            upstreamOptions: ", path_prefixes: [\"/me\"]"
        ) { harness in
            // B2C's issuer names the tenant GUID, not the policy path.
            let issuer = "http://127.0.0.1:\(harness.fake.port)/\(Self.tenantGUID)/v2.0/"
            harness.fake.configure {
                $0.discoveryOverrides = ["issuer": issuer]
                $0.authorizationResponseIssuer = .value(issuer)
            }
            harness.fake.misbehave(.idTokenIssuer(issuer), .untilReset)
            var login = AuthFlowHarness.AppLogin()
            login.policy = "b2c_1_EDIT"
            let token = try #require(try await harness.logIn(login: login)["access_token"] as? String)
            let policy = try await harness.database.query("SELECT policy FROM upstream_grants").first?.decode(String?.self, "policy")
            #expect(policy == "B2C_1_edit")

            // The API's scope was not granted at login: the first call refreshes, at B2C_1_edit.
            let before = harness.fake.refreshCount
            let call = try await harness.get("/api/graph/me", bearer: token)
            #expect(call.status == 200, "\(call.body)")
            #expect(harness.fake.refreshCount == before + 1)

            let logout = try await harness.post("/auth/logout", form: [], bearer: token)
            #expect(logout.status == 200)
            let endSession = try #require(logout.json["end_session_url"] as? String)
            #expect(endSession.contains("/B2C_1_edit/"), "\(endSession)")
        }
    }
}

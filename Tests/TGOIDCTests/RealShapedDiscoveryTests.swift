import Foundation
import HTTPTypes
import TGHTTPClient
import TGHTTPServer
import TGTesting
import Testing

@testable import TGOIDC

/// Discovery documents with the real providers' field layout (`ProviderDiscoveryFixtures`), served
/// on loopback at the paths each profile fetches from: what the profile makes of each.
@Suite struct RealShapedDiscoveryTests {
    /// Serves fixed documents by path on 127.0.0.1.
    final class DocumentServer: Sendable {
        let server: HTTPServer
        let base: String

        init(_ documents: @escaping @Sendable (String) -> [String: String]) throws {
            let box = Documents()
            server = HTTPServer(configuration: HTTPServer.Configuration()) { request in
                guard let body = box.value[String(request.path)] else { return .response(ServerResponse(status: .notFound)) }
                return .response(ServerResponse(status: .ok, contentType: "application/json", body: body))
            }
            try server.start()
            base = "http://127.0.0.1:\(server.port)"
            box.set(documents(base))
        }

        func stop() async { await server.shutdown() }

        /// Documents by path, set once right after the server learned its port.
        final class Documents: @unchecked Sendable {
            // Invariant: `documents` is written once under `lock` before any request is sent.
            private let lock = NSLock()
            private var documents: [String: String] = [:]
            var value: [String: String] { lock.withLock { documents } }
            func set(_ value: [String: String]) { lock.withLock { documents = value } }
        }
    }

    @Test func readsEntrasMultiTenantConsumerAndTenantDocuments() async throws {
        let tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"
        let server = try DocumentServer { base in
            [
                "/common/v2.0/.well-known/openid-configuration": ProviderDiscoveryFixtures.entraCommon(base: base),
                "/organizations/v2.0/.well-known/openid-configuration": ProviderDiscoveryFixtures.entraOrganizations(base: base),
                "/consumers/v2.0/.well-known/openid-configuration": ProviderDiscoveryFixtures.entraConsumers(base: base),
                "/\(tenant)/v2.0/.well-known/openid-configuration": ProviderDiscoveryFixtures.entraTenant(base: base, tenantID: tenant),
            ]
        }
        let common = try await testProvider(.entra(tenant: "common", authority: server.base)).metadata()
        #expect(common.issuer == "\(server.base)/{tenantid}/v2.0")
        #expect(common.authorizationEndpoint == "\(server.base)/common/oauth2/v2.0/authorize")
        #expect(common.revocationEndpoint == nil)
        #expect(common.endSessionEndpoint != nil)
        #expect(try await testProvider(.entra(tenant: "organizations", authority: server.base)).metadata().issuer.contains("{tenantid}"))
        let consumers = try await testProvider(.entra(tenant: "consumers", authority: server.base)).metadata()
        #expect(consumers.issuer == "\(server.base)/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0")
        let single = try await testProvider(.entra(tenant: tenant, authority: server.base)).metadata()
        #expect(single.issuer == "\(server.base)/\(tenant)/v2.0")
        // The same documents under another authority than configured are refused.
        let elsewhere = try DocumentServer { base in
            ["/common/v2.0/.well-known/openid-configuration": ProviderDiscoveryFixtures.entraCommon(base: "https://login.microsoftonline.com")]
        }
        #expect(await oidcError { _ = try await testProvider(.entra(tenant: "common", authority: elsewhere.base)).metadata() } != nil)
        await elsewhere.stop()
        await server.stop()
    }

    @Test func keepsOneDocumentPerB2CPolicy() async throws {
        let server = try DocumentServer { base in
            [
                "/contoso.onmicrosoft.com/B2C_1_signupsignin/v2.0/.well-known/openid-configuration":
                    ProviderDiscoveryFixtures.azureADB2C(base: base, tenant: "contoso", policy: "B2C_1_signupsignin"),
                "/contoso.onmicrosoft.com/B2C_1_passwordreset/v2.0/.well-known/openid-configuration":
                    ProviderDiscoveryFixtures.azureADB2CPasswordReset(base: base, tenant: "contoso"),
            ]
        }
        let b2c = testProvider(
            .azureADB2C(host: server.base, tenantDomain: "contoso.onmicrosoft.com", policies: ["B2C_1_signupsignin", "B2C_1_passwordreset"])
        )
        let signIn = try await b2c.metadata(policy: "B2C_1_signupsignin")
        let reset = try await b2c.metadata(policy: "B2C_1_passwordreset")
        #expect(signIn.issuer == reset.issuer)
        #expect(signIn.issuer.hasSuffix("/v2.0/"))
        #expect(signIn.authorizationEndpoint.contains("b2c_1_signupsignin"))
        #expect(reset.authorizationEndpoint.contains("b2c_1_passwordreset"))
        #expect(signIn.userinfoEndpoint == nil)
        let login = try await b2c.authorizationRequest(AuthorizationOptions(policy: "B2C_1_passwordreset"))
        #expect(login.url.hasPrefix(reset.authorizationEndpoint + "?"))
        #expect(login.pending.policy == "B2C_1_passwordreset")
        await server.stop()
    }

    @Test func completesCognitosDocumentWithTheHostedUIsRevokeAndLogout() async throws {
        let server = try DocumentServer { base in
            ["/us-east-1_4OqDoWVrZ/.well-known/openid-configuration": ProviderDiscoveryFixtures.cognito(issuerBase: base, domainBase: base + "/ui")]
        }
        let cognito = testProvider(.cognito(issuer: "\(server.base)/us-east-1_4OqDoWVrZ", domain: "\(server.base)/ui"))
        let metadata = try await cognito.metadata()
        #expect(metadata.tokenEndpoint == "\(server.base)/ui/oauth2/token")
        #expect(metadata.revocationEndpoint == "\(server.base)/ui/oauth2/revoke")
        #expect(metadata.endSessionEndpoint == "\(server.base)/ui/logout")
        await server.stop()
    }

    @Test func asksGoogleAndYahooJapanForWhatTheyNeed() async throws {
        let server = try DocumentServer { base in
            [
                "/.well-known/openid-configuration": ProviderDiscoveryFixtures.google(base: base),
                "/yconnect/v2/.well-known/openid-configuration": ProviderDiscoveryFixtures.yahooJapan(base: base),
            ]
        }
        let google = try await testProvider(.google(issuer: server.base)).authorizationRequest()
        let googleQuery = FakeIdentityProvider.queryParameters(of: google.url)
        #expect(googleQuery["access_type"] == "offline")
        #expect(googleQuery["prompt"] == "consent")
        #expect(googleQuery["scope"] == "openid profile email")
        #expect(try await testProvider(.google(issuer: server.base)).metadata().revocationEndpoint != nil)
        let yahoo = try await testProvider(.yahooJapan(issuer: "\(server.base)/yconnect/v2")).authorizationRequest()
        let yahooQuery = FakeIdentityProvider.queryParameters(of: yahoo.url)
        #expect(yahooQuery["nonce"] == yahoo.pending.nonce)
        #expect(yahoo.url.hasPrefix("\(server.base)/yconnect/v2/authorization?"))
        await server.stop()
    }
}

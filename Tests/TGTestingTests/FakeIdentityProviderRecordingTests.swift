import Foundation
import HTTPTypes
import TGTesting
import Testing

@Suite struct FakeIdentityProviderRecordingTests {
    @Test func logoutRecordsItsParametersAndRedirectsWithTheState() async throws {
        try await withProvider { idp, http in
            let query = formEncode([
                ("id_token_hint", "the-id-token"), ("post_logout_redirect_uri", "https://app.example/bye?x=1"), ("state", "s-9"),
            ])
            let reply = try await http.get(idp.endSessionEndpoint + "?" + query)
            #expect(reply.status == 302)
            #expect(reply.header("Location") == "https://app.example/bye?x=1&state=s-9")
            #expect(
                idp.logoutRequests == [
                    ["id_token_hint": "the-id-token", "post_logout_redirect_uri": "https://app.example/bye?x=1", "state": "s-9"]
                ]
            )
            let plain = try await http.get(idp.endSessionEndpoint)
            #expect(plain.status == 200)
            #expect(idp.logoutRequests.count == 2)
        }
    }

    @Test func recordsEveryRequestWithMethodPathHeadersAndForm() async throws {
        try await withProvider(pathPrefix: "/b2c/policy") { idp, http in
            _ = try await http.get(idp.discoveryURL, headers: [HTTPField.Name("X-Probe")!: "1"])
            _ = try await http.postForm(idp.revocationEndpoint, [("token", "t-1")], headers: basicAuthorization())
            let requests = idp.requests
            #expect(requests.map(\.method) == ["GET", "POST"])
            #expect(requests.map(\.path) == ["/b2c/policy/.well-known/openid-configuration", "/b2c/policy/revoke"])
            #expect(requests.map(\.endpoint) == ["/.well-known/openid-configuration", "/revoke"])
            #expect(requests.first?.header("x-probe") == "1")
            #expect(requests.last?.formValue("token") == "t-1")
            #expect(requests.last?.header("Authorization")?.hasPrefix("Basic ") == true)
            idp.clearRecords()
            #expect(idp.requests.isEmpty)
            #expect(idp.discoveryFetchCount == 0)
            #expect(idp.revokedTokens.isEmpty)
        }
    }

    @Test func answersMalformedRequestsWith400JSONAndUnknownOnesWith404Or405() async throws {
        try await withProvider { idp, http in
            var jsonHeaders = basicAuthorization()
            jsonHeaders[.contentType] = "application/json"
            let notForm = try await http.send(
                .post,
                idp.tokenEndpoint,
                headers: jsonHeaders,
                body: Array(#"{"grant_type":"authorization_code"}"#.utf8)
            )
            #expect(notForm.status == 400)
            #expect(notForm.json["error"] as? String == "invalid_request")
            let repeated = try await http.postForm(
                idp.tokenEndpoint,
                [("grant_type", "refresh_token"), ("grant_type", "authorization_code")],
                headers: basicAuthorization()
            )
            #expect(repeated.json["error"] as? String == "invalid_request")
            let noGrant = try await http.postForm(idp.tokenEndpoint, [], headers: basicAuthorization())
            #expect(noGrant.json["error"] as? String == "invalid_request")
            let password = try await http.postForm(idp.tokenEndpoint, [("grant_type", "password")], headers: basicAuthorization())
            #expect(password.json["error"] as? String == "unsupported_grant_type")
            let garbage = try await http.postForm(
                idp.tokenEndpoint,
                [("grant_type", "authorization_code")],
                headers: [.authorization: "Basic %%%not-base64"]
            )
            #expect(garbage.status == 401)
            let emptyAuthorize = try await http.get(idp.authorizationEndpoint)
            #expect(emptyAuthorize.status == 400)
            #expect(emptyAuthorize.json["error"] as? String == "invalid_request")
            #expect(try await http.get(idp.tokenEndpoint).status == 405)
            #expect(try await http.get(idp.issuer + "/nothing-here").status == 404)
        }
    }
}

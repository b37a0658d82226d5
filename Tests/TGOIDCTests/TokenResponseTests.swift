import Foundation
import TGBase
import Testing

@testable import TGOIDC

/// Token responses parsed strictly, and error answers classified the way the gateway acts on them.
@Suite struct TokenResponseTests {
    let received = Date(timeIntervalSince1970: 1_800_000_000)

    func parse(_ json: String) throws(OIDCError) -> TokenResponse {
        try TokenResponse(json: Array(json.utf8), receivedAt: received)
    }

    @Test func readsLifetimesRotationAndGrantedScopes() throws {
        let response = try parse(
            #"{"access_token":"at","token_type":"bearer","expires_in":3599,"refresh_token":"rt2","refresh_token_expires_in":"86400","scope":"openid User.Read","id_token":"x.y.z"}"#
        )
        #expect(response.accessToken == "at")
        #expect(response.accessTokenExpiresAt == received.addingTimeInterval(3599))
        #expect(response.accessTokenLifetime == 3599)
        #expect(response.refreshToken == "rt2")
        #expect(response.refreshTokenExpiresAt == received.addingTimeInterval(86400))
        #expect(response.scopes == ["openid", "User.Read"])
        #expect(response.idToken == "x.y.z")
    }

    @Test func treatsAnAbsentRefreshTokenAsKeepTheOldOne() throws {
        let response = try parse(#"{"access_token":"at","token_type":"Bearer"}"#)
        #expect(response.refreshToken == nil)
        #expect(response.accessTokenExpiresAt == nil)
        #expect(response.accessTokenLifetime == nil)
    }

    @Test func refusesResponsesThatAreNotUsable() {
        let bad = [
            #"{"access_token":"#,
            #"[]"#,
            #"{"token_type":"Bearer"}"#,
            #"{"access_token":"","token_type":"Bearer"}"#,
            #"{"access_token":"at","token_type":"mac"}"#,
            #"{"access_token":"at"}"#,
            #"{"access_token":"at","token_type":"Bearer","expires_in":-5}"#,
            #"{"access_token":"at","token_type":"Bearer","expires_in":"soon"}"#,
            #"{"access_token":"at","token_type":"Bearer","refresh_token":42}"#,
            #"{"access_token":"at","token_type":"Bearer","scope":["a"]}"#,
        ]
        for json in bad {
            #expect(throws: OIDCError.self) { try parse(json) }
        }
    }

    @Test func classifiesGrantEndingErrorsAsFatal() {
        for code in ["invalid_grant", "interaction_required", "login_required", "account_selection_required"] {
            let error = ErrorResponse.classify(status: 400, body: Array(#"{"error":"\#(code)"}"#.utf8), retryAfter: nil)
            #expect(error == OIDCError(.grantRejected(code: code)))
            #expect(error.classification == .fatal)
        }
    }

    /// An OAuth error code that is not about the client, the scopes or "try later" rejects the
    /// grant, whatever the status.
    @Test func classifiesAnOAuthErrorOfAnyRejectingStatusAsARejectionOfTheGrant() {
        let answers: [(Int, String)] = [
            (400, #"{"error":"something_new"}"#), (400, #"{"error":"invalid_grant","error_description":"revoked"}"#),
            (401, #"{"error":"invalid_grant"}"#), (403, #"{"error":"interaction_required"}"#),
        ]
        for (status, body) in answers {
            let error = ErrorResponse.classify(status: status, body: Array(body.utf8), retryAfter: nil)
            #expect(error.classification == .fatal, "HTTP \(status) \(body) → \(error)")
        }
    }

    /// glewlwyd answers a revoked refresh token and a wrong client secret alike: 400, empty body.
    /// A 400 without an OAuth error is therefore unclear until the client itself is checked.
    @Test func classifiesA400WithoutAnOAuthErrorAsUnclear() {
        for body in ["", "not json", "<html>Bad Request</html>", #"{"error":42}"#, #"{"message":"no"}"#] {
            let error = ErrorResponse.classify(status: 400, body: Array(body.utf8), retryAfter: nil)
            #expect(error == OIDCError(.unclearRejection(code: "HTTP 400")), "\(body) → \(error)")
            #expect(error.classification == .unclear)
        }
    }

    /// A changed or wrong client credential, a firewall's HTML page, a 404 after a tenant move:
    /// the provider refuses TokenGate itself, not any grant. Named so that the log tells the
    /// operator to check the client's settings.
    @Test func classifiesARefusedClientAndAnyOther4xxWithoutAnOAuthErrorAsTheClientsFault() {
        let answers: [(Int, String, String)] = [
            (401, #"{"error":"invalid_client"}"#, "invalid_client"), (400, #"{"error":"invalid_client"}"#, "invalid_client"),
            (400, #"{"error":"unauthorized_client"}"#, "unauthorized_client"), (401, "", "HTTP 401"),
            (403, "<html><body>Request blocked</body></html>", "HTTP 403"), (404, "", "HTTP 404"), (405, "", "HTTP 405"),
            (410, "Gone", "HTTP 410"),
        ]
        for (status, body, code) in answers {
            let error = ErrorResponse.classify(status: status, body: Array(body.utf8), retryAfter: nil)
            #expect(error == OIDCError(.clientRejected(code: code)), "HTTP \(status) \(body) → \(error)")
            #expect(error.classification == .clientRefused)
            #expect(error.description.contains("client"))
        }
    }

    /// A refused scope is about the scopes asked for, not the grant (Entra says so in `suberror`).
    @Test func classifiesARefusedScopeApartFromTheGrant() {
        let bodies = [
            #"{"error":"invalid_scope"}"#, #"{"error":"consent_required"}"#,
            #"{"error":"invalid_grant","error_description":"AADSTS65001: consent","suberror":"consent_required"}"#,
        ]
        for body in bodies {
            let error = ErrorResponse.classify(status: 400, body: Array(body.utf8), retryAfter: nil)
            #expect(error.classification == .scopeRefused, "\(body) → \(error)")
        }
    }

    @Test func classifiesUnavailabilityAsTransientWithItsRetryAfter() {
        let tooMany = ErrorResponse.classify(status: 429, body: [], retryAfter: "7")
        #expect(tooMany == OIDCError(.providerUnavailable(retryAfter: .seconds(7))))
        #expect(tooMany.classification == .transient)
        for status in [500, 502, 503, 504] {
            #expect(ErrorResponse.classify(status: status, body: Array("<html>".utf8), retryAfter: nil).classification == .transient)
        }
        for code in ["temporarily_unavailable", "server_error", "slow_down"] {
            let busy = ErrorResponse.classify(status: 400, body: Array(#"{"error":"\#(code)"}"#.utf8), retryAfter: nil)
            #expect(busy.classification == .transient)
        }
    }

    @Test func neverRepeatsAnErrorCodeThatCouldCarryInjectedText() {
        let injected = ErrorResponse.classify(status: 400, body: Array(#"{"error":"invalid_grant\"\nFAKE LOG LINE"}"#.utf8), retryAfter: nil)
        #expect(!injected.description.contains("FAKE"))
    }

    @Test func boundsAnAbsurdRetryAfter() {
        #expect(ErrorResponse.classify(status: 503, body: [], retryAfter: "99999999") == OIDCError(.providerUnavailable(retryAfter: .seconds(3600))))
    }

    @Test func readsJSONBooleansAsBooleansAndNumbersAsNumbers() {
        let value = JSONValue(parsing: Array(#"{"t":true,"f":false,"one":1,"zero":0}"#.utf8))
        #expect(value?["t"] == .bool(true))
        #expect(value?["f"] == .bool(false))
        #expect(value?["one"] == .number(1))
        #expect(value?["zero"] == .number(0))
    }
}

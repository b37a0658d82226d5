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

    /// glewlwyd answers a refresh with a revoked or expired refresh token with 400 and an empty
    /// body: any 4xx of the token endpoint that is not a rate limit means the grant is unusable.
    @Test func classifiesEveryTokenEndpoint4xxButARateLimitAsARejectionWithOrWithoutABody() {
        let answers: [(Int, String)] = [
            (400, ""), (400, "not json"), (400, "<html>Bad Request</html>"), (401, ""), (403, "Forbidden"),
            (400, #"{"error":"something_new"}"#), (400, #"{"error":"invalid_grant","error_description":"revoked"}"#),
            (400, #"{"error":42}"#), (404, ""), (410, ""),
        ]
        for (status, body) in answers {
            let error = ErrorResponse.classify(status: status, body: Array(body.utf8), retryAfter: nil)
            #expect(error.classification == .fatal, "HTTP \(status) \(body) → \(error)")
        }
    }

    /// A changed or wrong client credential makes every grant unusable too; it is a rejection,
    /// named so that the log tells the operator to check the client's settings.
    @Test func classifiesAClientTheProviderNoLongerAcceptsAsARejection() {
        for (status, code) in [(401, "invalid_client"), (400, "invalid_client"), (400, "unauthorized_client")] {
            let error = ErrorResponse.classify(status: status, body: Array(#"{"error":"\#(code)"}"#.utf8), retryAfter: nil)
            #expect(error == OIDCError(.clientRejected(code: code)))
            #expect(error.classification == .fatal)
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

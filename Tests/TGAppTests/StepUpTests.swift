import Foundation
import HTTPTypes
import TGAppTesting
import TGBase
import TGPostgres
import TGTesting
import Testing

@testable import TGProxy

/// Step-up authentication (RFC 9470) through the proxy and the login: an API's challenge reaches
/// the app as `step_up_required` and is never answered with a refresh; the stronger sign-in is
/// checked at the callback (its `acr`, its `auth_time`, its user) and its token serves the call
/// again, shared with the account's grant or kept apart for the API (docs/proxy.md, "Step-up").
@Suite struct StepUpTests {
    static let mfa = "urn:example:acr:mfa"
    static let challenge = #"Bearer realm="graph", error="insufficient_user_authentication", acr_values="urn:example:acr:mfa", max_age=300"#
    static let paths = #", path_prefixes: ["/me", "/echo"]"#

    /// `/me` wants a token from a sign-in with ``mfa``; `/echo` takes any.
    static func demandMFA(_ h: AuthFlowHarness) throws {
        let fake = h.fake
        try #require(h.graph).demand("/me", challenge: challenge) { fake.authenticationContext(ofAccessToken: $0) == mfa }
    }

    /// A step-up login of `account` for the API, asking for ``mfa``: the token answer.
    static func stepUp(
        _ h: AuthFlowHarness,
        account: String,
        deviceSecret: String?,
        as user: String = "alice",
        asking: [(String, String)] = [("acr_values", mfa), ("max_age", "300")]
    ) async throws -> (parameters: [String: String], tokens: [String: Any]?) {
        let login = AuthFlowHarness.AppLogin()
        let query = asking + [("resource", "graph"), ("account", account)]
        let (_, parameters) = try await h.browserLogin(try await h.authorizationURL(login, extra: query), as: user)
        guard let code = parameters["code"] else { return (parameters, nil) }
        var form = [
            ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
            ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
        ]
        if let deviceSecret { form.append(("device_secret", deviceSecret)) }
        let answer = try await h.post("/auth/token", form: form)
        #expect(answer.status == 200, "token: \(answer.body)")
        return (parameters, answer.json)
    }

    static func accountID(_ tokens: [String: Any]) throws -> String {
        try #require((tokens["account"] as? [String: Any])?["id"] as? String)
    }

    @Test func anAPIsStepUpChallengeReachesTheAppAsStepUpRequiredWithoutARefresh() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths, transport: .sockets) { h in
            try Self.demandMFA(h)
            let token = try #require(try await h.logIn()["access_token"] as? String)
            #expect(try await h.get("/api/graph/echo", bearer: token).status == 200)
            let refreshes = h.fake.refreshCount
            let answer = try await h.get("/api/graph/me", bearer: token)
            #expect(answer.status == 401, "\(answer.body)")
            let problem = answer.json
            #expect(problem["code"] as? String == "step_up_required")
            #expect(problem["acr_values"] as? String == Self.mfa)
            #expect(problem["max_age"] as? Int == 300)
            #expect(problem["resource"] as? String == "graph")
            #expect(problem["login_endpoint"] as? String == "/auth/login")
            let header = try #require(answer.header("WWW-Authenticate"))
            #expect(header.hasPrefix("Bearer "))
            #expect(header.contains(#"error="insufficient_user_authentication""#))
            #expect(header.contains(#"acr_values="urn:example:acr:mfa""#) && header.contains("max_age=300"))
            // A refresh cannot raise how the user signed in: none was made, and the API was asked once.
            #expect(h.fake.refreshCount == refreshes)
            #expect(h.graph!.received.filter { $0.path == "/me" }.count == 1)
            // A POST with a body (not replayable as a GET is) gets the same answer.
            let post = try await curl(["-i", "-X", "POST", h.baseURL + "/api/graph/me", "-H", "Authorization: Bearer \(token)", "--data-raw", "x=1"])
            #expect(post.status == 401 && post.json["code"] as? String == "step_up_required", "\(post.body)")
            // Another path of the same API, and the account's session, are untouched.
            #expect(try await h.get("/api/graph/echo", bearer: token).status == 200)
            #expect(try await h.get("/auth/me", bearer: token).status == 200)
        }
    }

    @Test func aStepUpSignInUpdatesTheSameAccountAndItsTokenServesTheCallAgain() async throws {
        var settings = FakeIdentityProvider.Settings()
        settings.accessTokenLifetime = .seconds(600)
        // The account's username, which the fake provider signs in as when it comes as login_hint.
        settings.extraClaims = ["preferred_username": "alice"]
        try await AuthFlowHarness.run(settings: settings, withGraphAPI: true, upstreamOptions: Self.paths, transport: .sockets) { h in
            try Self.demandMFA(h)
            let first = try await h.logIn()
            let token = try #require(first["access_token"] as? String)
            let account = try Self.accountID(first)
            #expect(try await h.get("/api/graph/me", bearer: token).status == 401)
            // A second instance holds the weaker token in memory: the stronger sign-in reaches it too.
            let second = try await h.startInstance()
            #expect(try await h.get("/api/graph/echo", bearer: token, at: second).status == 200)

            let (parameters, stepped) = try await Self.stepUp(h, account: account, deviceSecret: first["device_secret"] as? String)
            let authorize = try #require(h.fake.lastAuthorizationQuery)
            #expect(authorize["acr_values"] == Self.mfa && authorize["max_age"] == "300")
            // The account's username is sent as login_hint when the app gives none.
            let tokens = try #require(stepped, "callback: \(parameters)")
            #expect(try Self.accountID(tokens) == account, "the same account, not a second one")
            #expect(try await h.count("SELECT count(*) AS n FROM accounts") == 1)
            #expect(authorize["login_hint"] == "alice")
            let newToken = try #require(tokens["access_token"] as? String)
            // The retried call goes with the stronger sign-in's token, on either instance (the
            // second held the weaker one in memory). The device's session of the account is the
            // new one: the earlier tokens are over.
            #expect(try await h.get("/api/graph/me", bearer: newToken).status == 200)
            #expect(try await h.get("/api/graph/me", bearer: newToken, at: second).status == 200)
            #expect(try await h.get("/api/graph/me", bearer: token).json["code"] as? String == "invalid_token")
            // Shared: the grant is the stronger sign-in's, so its refreshed tokens carry its acr.
            h.clock.advance(by: 590)
            let refreshes = h.fake.refreshCount
            #expect(try await h.get("/api/graph/me", bearer: newToken).status == 200)
            #expect(h.fake.refreshCount == refreshes + 1, "the upstream token was refreshed")
            await second.stop()
        }
    }

    @Test func aSignInThatDoesNotMeetTheAskedACROrMaxAgeIsRefusedAndStoresNothing() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths) { h in
            let first = try await h.logIn()
            let account = try Self.accountID(first)
            let grant = try await h.count("SELECT count(*) AS n FROM upstream_grants")
            let cases: [(String, [String: (any Sendable)?])] = [
                ("acr urn:example:acr:pwd", ["acr": "urn:example:acr:pwd"]),
                ("no acr", ["acr": nil]),
                ("no auth_time", ["auth_time": nil]),
                ("more than max_age", ["auth_time": Int(Date().timeIntervalSince1970) - 3600]),
            ]
            for (name, claims) in cases {
                h.fake.misbehave(.idTokenClaims(claims), grantType: "authorization_code")
                let (parameters, tokens) = try await Self.stepUp(h, account: account, deviceSecret: nil)
                #expect(tokens == nil, "\(name)")
                #expect(parameters["error"] == "insufficient_user_authentication", "\(name): \(parameters)")
                #expect(parameters["error_description"]?.contains("did not meet") == true, "\(name)")
                #expect(parameters["code"] == nil)
            }
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_grants") == grant)
            #expect(try await h.count("SELECT count(*) AS n FROM handoff_codes WHERE redeemed_at IS NULL") == 0)
            // Nothing was revoked at the provider: the account's everyday grant is still good.
            #expect(h.fake.revokedTokens.isEmpty)
            let refreshed = try await h.refresh(try #require(first["refresh_token"] as? String))
            #expect(refreshed.status == 200)
        }
    }

    @Test func aStepUpByAnotherUserThanTheAccountIsRefused() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths) { h in
            let account = try Self.accountID(try await h.logIn(as: "alice"))
            let (parameters, tokens) = try await Self.stepUp(h, account: account, deviceSecret: nil, as: "bob")
            #expect(tokens == nil)
            #expect(parameters["error"] == "access_denied", "\(parameters)")
            #expect(parameters["error_description"]?.contains("another user") == true)
            #expect(try await h.count("SELECT count(*) AS n FROM accounts") == 1, "bob's account is not made")
        }
    }

    @Test func anAPIThatKeepsStepUpApartUsesItsTokenUntilItExpiresAndTheGrantStays() async throws {
        var settings = FakeIdentityProvider.Settings()
        settings.accessTokenLifetime = .seconds(600)
        let options = Self.paths + ", step_up_tokens: separate"
        try await AuthFlowHarness.run(settings: settings, withGraphAPI: true, upstreamOptions: options, transport: .sockets) { h in
            try Self.demandMFA(h)
            let first = try await h.logIn()
            let weak = try #require(first["access_token"] as? String)
            let account = try Self.accountID(first)
            let everyday = try #require(try await h.get("/api/graph/echo", bearer: weak).json["headers"] as? [String: String])["authorization"]
            #expect(try await h.get("/api/graph/me", bearer: weak).status == 401)
            let second = try await h.startInstance()
            #expect(try await h.get("/api/graph/me", bearer: weak, at: second).status == 401)
            let grantBefore = try await h.database.query("SELECT version::text AS v, created_at::text AS c FROM upstream_grants").first.map {
                [try $0.decode(String.self, "v"), try $0.decode(String.self, "c")]
            }

            // Stepped up on another device: the first device's session stays, and the second
            // instance holds it in memory, with the knowledge that no step-up token was there.
            let (parameters, stepped) = try await Self.stepUp(h, account: account, deviceSecret: nil)
            let token = try #require(stepped?["access_token"] as? String, "\(parameters)")
            // The API's calls take the step-up token, for either session, on both instances.
            try await eventually("the second instance drops what it knew of the account") {
                try await h.get("/api/graph/me", bearer: weak, at: second).status == 200
            }
            #expect(try await h.get("/api/graph/me", bearer: token).status == 200)
            #expect(try await h.get("/api/graph/me", bearer: token, at: second).status == 200)
            let during = try #require(try await h.get("/api/graph/echo", bearer: token).json["headers"] as? [String: String])["authorization"]
            #expect(during != everyday)
            // The account's grant is the everyday sign-in's still.
            let grantAfter = try await h.database.query("SELECT version::text AS v, created_at::text AS c FROM upstream_grants").first.map {
                [try $0.decode(String.self, "v"), try $0.decode(String.self, "c")]
            }
            #expect(grantAfter == grantBefore)
            // Once it expires it is not refreshed: the everyday token serves and the API asks again.
            h.clock.advance(by: 601)
            let refreshes = h.fake.refreshCount
            #expect(try await h.get("/api/graph/me", bearer: token).json["code"] as? String == "step_up_required")
            #expect(
                h.fake.authenticationContext(
                    ofAccessToken: try #require(h.graph!.received.last?.headerFields[.authorization]).replacingOccurrences(of: "Bearer ", with: "")
                ) == nil
            )
            #expect(h.fake.refreshCount == refreshes + 1, "the everyday token was refreshed, the step-up one was not")
            await second.stop()
        }
    }

    @Test func entrasClaimsChallengeMapsOntoTheSameAnswerAndItsClaimsGoToTheProvider() async throws {
        let claims = #"{"access_token":{"acrs":{"essential":true,"value":"c1"}}}"#
        let encoded = Data(claims.utf8).base64EncodedString()
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths, transport: .sockets) { h in
            let fake = h.fake
            let challenge =
                #"Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", "#
                + #"client_id="00000003-0000-0000-c000-000000000000", error="insufficient_claims", claims="\#(encoded)""#
            try #require(h.graph).demand("/me", challenge: challenge) { fake.authenticationContext(ofAccessToken: $0) == "c1" }
            let first = try await h.logIn()
            let token = try #require(first["access_token"] as? String)
            let answer = try await h.get("/api/graph/me", bearer: token)
            #expect(answer.status == 401 && answer.json["code"] as? String == "step_up_required", "\(answer.body)")
            #expect(answer.json["claims"] as? String == claims)
            let (parameters, stepped) = try await Self.stepUp(
                h,
                account: try Self.accountID(first),
                deviceSecret: first["device_secret"] as? String,
                asking: [("claims", claims)]
            )
            #expect(h.fake.lastAuthorizationQuery?["claims"] == claims)
            let newToken = try #require(stepped?["access_token"] as? String, "\(parameters)")
            #expect(try await h.get("/api/graph/me", bearer: newToken).status == 200)
        }
    }

    @Test func loginRefusesStepUpParametersItCannotSendWithAReason() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true) { h in
            let login = AuthFlowHarness.AppLogin()
            let cases: [([(String, String)], String)] = [
                ([("acr_values", #"urn:"quoted""#)], "acr_values"),
                ([("acr_values", "")], "acr_values"),
                ([("max_age", "soon")], "max_age"),
                ([("max_age", "-1")], "max_age"),
                ([("max_age", "99999999999")], "max_age"),
                ([("claims", "not json")], "claims"),
                ([("claims", "[1]")], "claims"),
                ([("resource", "nowhere")], "resource"),
                ([("account", "not-a-uuid")], "account"),
                ([("account", UUID().uuidString)], "account"),
            ]
            for (extra, name) in cases {
                let answer = try await h.get("/auth/login", query: login.query + extra, headers: ["Accept: application/json"])
                #expect(answer.status == 400, "\(extra): \(answer.body)")
                #expect(answer.json["code"] as? String == "invalid_request", "\(extra)")
                #expect((answer.json["detail"] as? String)?.contains(name) == true, "\(extra): \(answer.body)")
            }
        }
    }

    @Test func challengesAreReadAsRFC9470AndEntraWriteThem() throws {
        #expect(
            StepUpChallenge.parse(#"Bearer error="insufficient_user_authentication", error_description="x", acr_values="a b", max_age=5"#)
                == .init(acrValues: "a b", maxAge: 5)
        )
        #expect(StepUpChallenge.parse(#"DPoP algs="ES256", error="insufficient_user_authentication", max_age="60""#) == .init(maxAge: 60))
        // A challenge of another kind, one that asks for nothing, or values that cannot be passed on.
        #expect(StepUpChallenge.parse(#"Bearer error="invalid_token""#) == nil)
        #expect(StepUpChallenge.parse(#"Bearer error="insufficient_user_authentication""#) == nil)
        #expect(StepUpChallenge.parse(#"Bearer error="insufficient_user_authentication", acr_values="a\"b""#) == nil)
        #expect(StepUpChallenge.parse(#"Bearer error="insufficient_user_authentication", max_age=-3"#) == nil)
        #expect(StepUpChallenge.parse(#"Bearer error="insufficient_claims", claims="bm90IGpzb24=""#) == nil)
        let claims = Data(#"{"id_token":{"acrs":{"value":"c2"}}}"#.utf8).base64EncodedString()
        #expect(
            StepUpChallenge.parse(#"Bearer error="insufficient_claims", claims="\#(claims)""#)?.claims == #"{"id_token":{"acrs":{"value":"c2"}}}"#
        )
    }
}

import Foundation
import HTTPTypes
import TGAppTesting
import TGAuth
import TGBase
import TGTesting
import Testing

/// `POST /auth/backchannel-logout/{provider}` (OpenID Connect Back-Channel Logout 1.0 §2.5–2.8):
/// logout tokens the fake provider signs (or forges), sent as a provider sends them.
@Suite struct BackChannelLogoutTests {
    static let path = "/auth/backchannel-logout/fake"

    @Test func aValidLogoutTokenEndsTheSessionAndIsAnswered200NoStoreWithoutLoggingTheTokenOrSid() async throws {
        try await AuthFlowHarness.run { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let sid = try #require(harness.fake.sessionIDs(of: "alice").first)
            let logoutToken = try harness.fake.logoutToken(subject: "alice", sessionID: sid)
            let answer = try await harness.post(Self.path, form: [("logout_token", logoutToken)])
            #expect(answer.status == 200)
            #expect(answer.header("Cache-Control") == "no-store")
            #expect(answer.bytes.isEmpty)
            #expect(try await harness.get("/auth/me", bearer: token).status == 401)
            let logged = harness.logs.lines.joined(separator: "\n")
            #expect(logged.contains("back-channel logout") && logged.contains("\"sessions_ended\":1"))
            #expect(!logged.contains(logoutToken) && !logged.contains(sid))
            // A valid token that matches nothing signed in here is done too.
            let nobody = try await harness.post(Self.path, form: [("logout_token", try harness.fake.logoutToken(subject: "carol"))])
            #expect(nobody.status == 200)
            let samples = try await MetricsTests.parse(try await harness.scrapeMetrics())
            #expect(MetricsTests.value(samples, "tokengate_backchannel_logouts_total", ["provider": "fake", "outcome": "ended"]) == 1)
            #expect(MetricsTests.value(samples, "tokengate_backchannel_logouts_total", ["provider": "fake", "outcome": "no_match"]) == 1)
        }
    }

    /// Each way a logout token can be invalid, as the fake provider makes it.
    static func invalidTokens(_ fake: FakeIdentityProvider) throws -> [(String, String)] {
        let now = Int(Date().timeIntervalSince1970)
        let event = LogoutTokenEvent.name
        return [
            ("bad signature", try fake.logoutToken(subject: "alice", signing: .unpublishedKey())),
            ("unknown kid", try fake.logoutToken(subject: "alice", signing: .unpublishedKey(keyID: "rsa-unknown"))),
            ("alg none", try fake.logoutToken(subject: "alice", signing: .unsigned)),
            ("HS256 keyed with the public key", try fake.logoutToken(subject: "alice", signing: .hmacWithPublishedKey)),
            ("wrong iss", try fake.logoutToken(subject: "alice", claims: ["iss": "http://127.0.0.1:1/elsewhere"])),
            ("wrong aud", try fake.logoutToken(subject: "alice", audience: "another-client")),
            ("missing iat", try fake.logoutToken(subject: "alice", claims: ["iat": nil])),
            ("old iat", try fake.logoutToken(subject: "alice", claims: ["iat": now - 3600, "exp": nil])),
            ("future iat", try fake.logoutToken(subject: "alice", claims: ["iat": now + 3600, "exp": now + 3720])),
            ("expired", try fake.logoutToken(subject: "alice", claims: ["iat": now - 200, "exp": now - 100])),
            ("missing events", try fake.logoutToken(subject: "alice", claims: ["events": nil])),
            ("events without the back-channel member", try fake.logoutToken(subject: "alice", claims: ["events": ["\(event)x": [String: String]()]])),
            ("events as a list", try fake.logoutToken(subject: "alice", claims: ["events": [event]])),
            ("nonce present", try fake.logoutToken(subject: "alice", claims: ["nonce": "n-0S6_WzA2Mj"])),
            ("missing jti", try fake.logoutToken(subject: "alice", claims: ["jti": nil])),
            ("neither sid nor sub", try fake.logoutToken()),
            ("typ of another kind of token", try fake.logoutToken(subject: "alice", type: "at+jwt")),
            ("not a JWS", "not.a.jws"),
        ]
    }

    @Test func everyInvalidLogoutTokenIsRefusedWith400AndEndsNothing() async throws {
        try await AuthFlowHarness.run { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let variants = try Self.invalidTokens(harness.fake)
            for (name, logoutToken) in variants {
                let answer = try await harness.post(Self.path, form: [("logout_token", logoutToken)])
                #expect(answer.status == 400, "\(name): \(answer.status) \(answer.body)")
                #expect(answer.json["error"] as? String == "invalid_request", "\(name)")
                #expect((answer.json["error_description"] as? String)?.hasPrefix("The logout token is not valid") == true, "\(name)")
                #expect(answer.header("Cache-Control") == "no-store", "\(name)")
            }
            #expect(try await harness.get("/auth/me", bearer: token).status == 200)
            let samples = try await MetricsTests.parse(try await harness.scrapeMetrics())
            #expect(
                MetricsTests.value(samples, "tokengate_backchannel_logouts_total", ["provider": "fake", "outcome": "invalid"])
                    == Double(variants.count)
            )
        }
    }

    @Test func aReplayedTokenIsRefusedOnThisInstanceAndOnAnother() async throws {
        try await AuthFlowHarness.run { harness in
            _ = try await harness.logIn()
            let second = try await harness.startInstance()
            let logoutToken = try harness.fake.logoutToken(subject: "alice")
            #expect(try await harness.post(Self.path, form: [("logout_token", logoutToken)]).status == 200)
            let again = try await harness.post(Self.path, form: [("logout_token", logoutToken)])
            #expect(again.status == 400)
            #expect(again.json["error_description"] as? String == "The logout token is not valid: its jti was already used.")
            let elsewhere = await second.client.post(Self.path, form: [("logout_token", logoutToken)])
            #expect(elsewhere.status == 400 && elsewhere.json["error"] as? String == "invalid_request")
            await second.stop()
        }
    }

    @Test func malformedRequestsAreRefusedWith400() async throws {
        try await AuthFlowHarness.run { harness in
            let valid = try harness.fake.logoutToken(subject: "alice")
            let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
            let requests: [(String, HTTPFields, String)] = [
                ("JSON instead of a form", [.contentType: "application/json"], #"{"logout_token":"\#(valid)"}"#),
                ("no content type", [:], "logout_token=\(valid)"),
                ("bad percent-encoding", form, "logout_token=%zz"),
                ("no logout_token", form, "token=\(valid)"),
                ("an empty logout_token", form, "logout_token="),
                ("logout_token twice", form, "logout_token=\(valid)&logout_token=\(valid)"),
                ("an empty body", form, ""),
                ("a body larger than any logout token", form, "logout_token=" + String(repeating: "a", count: 20 * 1024)),
            ]
            for (name, fields, body) in requests {
                let answer = await harness.client.execute(uri: Self.path, method: .post, headers: fields, body: Array(body.utf8))
                #expect(answer.status == 400, "\(name): \(answer.status) \(answer.body)")
                #expect(answer.json["error"] as? String == "invalid_request", "\(name)")
            }
            // None of them spent the valid token.
            #expect(try await harness.post(Self.path, form: [("logout_token", valid)]).status == 200)
        }
    }

    @Test func anUnknownProviderIsNotFoundAndOnlyPOSTIsAllowed() async throws {
        try await AuthFlowHarness.run { harness in
            let token = try harness.fake.logoutToken(subject: "alice")
            let unknown = try await harness.post("/auth/backchannel-logout/nobody", form: [("logout_token", token)])
            #expect(unknown.status == 404 && unknown.json["code"] as? String == "not_found")
            #expect(try await harness.get(Self.path).status == 405)
        }
        // A provider configured without back-channel logout has no such route either.
        try await AuthFlowHarness.run(providerOptions: ", backchannel_logout: false") { harness in
            let answer = try await harness.post(Self.path, form: [("logout_token", try harness.fake.logoutToken(subject: "alice"))])
            #expect(answer.status == 404)
        }
    }

    @Test func aRequestPastTheServersBodyLimitIsRefusedUnread() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { harness in
            let answer = try await harness.post(Self.path, form: [("logout_token", String(repeating: "a", count: 100 * 1024))])
            #expect(answer.status == 413)
        }
    }

    @Test func theRouteIsRateLimitedPerAddressInTheProvidersErrorForm() async throws {
        try await AuthFlowHarness.run(serverOptions: ", backchannel_logout_rate_limit_per_minute: 2") { harness in
            for _ in 0..<2 { #expect(try await harness.post(Self.path, form: [("logout_token", "x")]).status == 400) }
            let refused = try await harness.post(Self.path, form: [("logout_token", "x")])
            #expect(refused.status == 429 && refused.header("Retry-After") != nil)
            #expect(refused.json["error"] as? String == "temporarily_unavailable")
        }
    }

    /// The provider ends the user's sessions and POSTs its logout token to instance A; instance
    /// B, which holds the session and the API's token in memory, stops serving them as soon as
    /// the invalidation reaches it.
    @Test func aLogoutTokenPostedToOneInstanceStopsAnotherInstancesCachedSession() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: UpstreamTokenTests.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let second = try await harness.startInstance()
            #expect(try await harness.get("/api/graph/me", bearer: token, at: second).status == 200)
            #expect(second.auth.cache.counts.sessions == 1)
            // Until the provider says so, the cached session keeps working there.
            #expect(try await harness.get("/api/graph/me", bearer: token, at: second).status == 200)
            harness.fake.registerBackChannelLogoutURI(harness.baseURL + Self.path, forClient: "tokengate")
            let started = ContinuousClock.now
            #expect(try await harness.fake.endSessions(of: "alice", using: harness.http) == [200])
            try await eventually("instance B refuses the session") {
                try await harness.get("/api/graph/me", bearer: token, at: second).status == 401
            }
            #expect(ContinuousClock.now - started < .seconds(2))
            #expect(second.auth.cache.counts.sessions == 0)
            #expect(try await harness.get("/auth/me", bearer: token, at: second).status == 401)
            await second.stop()
        }
    }
}

import Foundation
import HTTPTypes
import TGAppTesting
import TGAuth
import TGPostgres
import TGTesting
import Testing

/// A busy user's calls do not wait for the provider: an upstream token within twice its refresh
/// margin of expiry is still served, and one refresh for it runs in the background. The tokens
/// here live 120 s, so the margin is 30 s: from 60 s before expiry a call starts the refresh,
/// from 30 s before a call waits for it.
@Suite struct RefreshAheadTests {
    /// Upstream tokens stored in the database that expire later than `seconds` from now
    /// (TokenGate's clock): only a token refreshed after the clock moved does.
    static func tokensExpiringAfter(_ seconds: TimeInterval, _ harness: AuthFlowHarness) async throws -> Int {
        try await harness.count(
            "SELECT count(*) AS n FROM upstream_access_tokens WHERE expires_at > \(harness.clock.now.addingTimeInterval(seconds))"
        )
    }

    @Test func aTokenNearItsExpiryIsServedAtOnceAndRefreshedOnceInTheBackground() async throws {
        let settings = UpstreamTokenTests.rotatingProvider()
        try await AuthFlowHarness.run(settings: settings, withGraphAPI: true, upstreamOptions: UpstreamTokenTests.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            let first = harness.graph!.received.last?.headerFields[.authorization]
            let before = harness.fake.refreshCount
            // 50 s left: within twice the margin, not yet within it.
            harness.clock.advance(by: 70)
            let answer = TestGate()
            defer { answer.open() }
            harness.fake.misbehave(.held(answer), grantType: "refresh_token")
            let calls = try await UpstreamTokenTests.storm(harness, [nil], token: token, count: 20)
            #expect(calls == Array(repeating: 200, count: 20))
            #expect(try await Self.tokensExpiringAfter(100, harness) == 0, "the calls waited for the refresh")
            // The background refresh may reach the provider after the calls were answered (it
            // reads the grant from the database first); the provider holds it until released.
            try await eventually("the refresh reaches the provider") { harness.fake.refreshCount > before }
            #expect(harness.fake.refreshCount == before + 1, "one refresh for twenty calls")
            answer.open()
            try await eventually("the refreshed token is stored") { try await Self.tokensExpiringAfter(100, harness) == 1 }
            // 40 s on, the old token would be due (10 s left); the refreshed one is served.
            harness.clock.advance(by: 40)
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            #expect(harness.fake.refreshCount == before + 1)
            #expect(harness.graph!.received.last?.headerFields[.authorization] != first, "the API got the refreshed token")
        }
    }

    @Test func aFailedRefreshAheadKeepsServingTheTokenAndIsNotRetriedWithinTheBackoff() async throws {
        let settings = UpstreamTokenTests.rotatingProvider()
        try await AuthFlowHarness.run(settings: settings, withGraphAPI: true, upstreamOptions: UpstreamTokenTests.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            let before = harness.fake.refreshCount
            harness.clock.advance(by: 70)
            harness.fake.misbehave(.serviceUnavailable(retryAfter: 20), grantType: "refresh_token")
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            try await eventually("the provider's refusal is recorded") {
                try await harness.count("SELECT count(*) AS n FROM upstream_grants WHERE refresh_retry_at IS NOT NULL") == 1
            }
            // The background refresh is over, not only its refusal stored: a call that came while
            // it was still returning would join it and hear its outcome instead of refreshing.
            try await eventually("the refresh ahead has returned") { harness.auth.upstream.refreshesInFlight == 0 }
            for _ in 0..<5 { #expect(try await harness.get("/api/graph/me", bearer: token).status == 200) }
            #expect(harness.fake.refreshCount == before + 1, "asked again within the provider's Retry-After")
            // Past the Retry-After and within the margin: the call refreshes, and waits for it.
            harness.clock.advance(by: 25)
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            #expect(harness.fake.refreshCount == before + 2)
            #expect(try await Self.tokensExpiringAfter(100, harness) == 1)
        }
    }

    /// The async path (token exchange) serves and refreshes ahead the same way.
    @Test func aTokenExchangeNearExpiryGetsTheCachedTokenAndRefreshesItInTheBackground() async throws {
        let settings = UpstreamTokenTests.rotatingProvider()
        let options = UpstreamTokenTests.graph + ", token_exchange: true"
        try await AuthFlowHarness.run(settings: settings, withGraphAPI: true, upstreamOptions: options) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            func exchange() async throws -> String? {
                try await harness.post(
                    "/auth/token",
                    form: [
                        ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("subject_token", token),
                        ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"), ("resource", "graph"),
                    ]
                ).json["access_token"] as? String
            }
            let first = try #require(try await exchange())
            let before = harness.fake.refreshCount
            harness.clock.advance(by: 70)
            let answer = TestGate()
            defer { answer.open() }
            harness.fake.misbehave(.held(answer), grantType: "refresh_token")
            #expect(try await exchange() == first, "served the cached token at once")
            #expect(try await Self.tokensExpiringAfter(100, harness) == 0, "the exchange waited for the refresh")
            answer.open()
            try await eventually("the refreshed token is stored") { try await Self.tokensExpiringAfter(100, harness) == 1 }
            #expect(harness.fake.refreshCount == before + 1)
            // The instance's memory takes the token just after the database (UpstreamTokens.swift:
            // the refresh's flight stores it, then caches it); until then the exchange serves the
            // cached one and starts no other refresh (the flight is still running).
            var renewed = first
            try await eventually("the exchange gives the refreshed token") {
                renewed = try #require(try await exchange())
                return renewed != first
            }
            #expect(renewed != first)
            #expect(harness.fake.refreshCount == before + 1)
            #expect(harness.fake.subject(ofAccessToken: renewed) == "alice")
        }
    }

    /// bench/fleet found it: a retry after the API's 401 that joined a refresh ahead of expiry
    /// (which knew nothing of the refusal) was handed the refused token back when that refresh
    /// failed, sent it again, and the app got the API's 401 for a GET. The retry now asks on its
    /// own: 503 `idp_unavailable` while the provider cannot give another token.
    @Test func aRetryThatJoinedAFailingRefreshAheadIsNotHandedTheRefusedToken() async throws {
        let settings = UpstreamTokenTests.rotatingProvider()
        try await AuthFlowHarness.run(settings: settings, withGraphAPI: true, upstreamOptions: UpstreamTokenTests.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            let graph = try #require(harness.graph)
            let refused = graph.received.last?.headerFields[.authorization]
            // 50 s left: served, and refreshed in the background, where the provider holds the
            // refresh and then fails it.
            harness.clock.advance(by: 70)
            let answer = TestGate()
            defer { answer.open() }
            harness.fake.misbehave(.held(answer), grantType: "refresh_token")
            harness.fake.misbehave(.serverError, grantType: "refresh_token")
            let before = harness.fake.refreshCount
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            try await eventually("the refresh ahead reaches the provider") { harness.fake.refreshCount > before }
            // The API refuses the token (twice, if it were sent again); the retry joins the flight.
            graph.rejectNextTokens(2)
            let waits = { try await harness.scrapeMetrics().split(separator: "\n").count { $0.hasPrefix("tokengate_upstream_refresh_waits_total{") } }
            let call = Task { try await harness.get("/api/graph/me", bearer: token) }
            try await eventually("the retry joins the refresh ahead") { try await waits() > 0 }
            answer.open()
            let answered = try await call.value
            #expect(answered.status == 503, "\(answered.body)")
            #expect(answered.json["code"] as? String == "idp_unavailable")
            #expect(graph.received.filter { $0.headerFields[.authorization] == refused }.count == 3, "the refused token was not sent again")
        }
    }
}

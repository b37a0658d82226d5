import Foundation
import TGApp
import TGAppTesting
import TGAuth
import TGPostgres
import TGTesting
import Testing

/// A fault that is not the user's never costs the user their sign-in: a provider that refuses
/// TokenGate's client (an expired secret, a firewall's page, a moved tenant) keeps every grant
/// and backs off as a whole; an unclear refusal is settled by asking about the client alone; and
/// the safety valve stops a storm of rejections from ending every account.
@Suite struct ProviderFaultTests {
    static let graph = ", path_prefixes: [\"/me\"]"
    /// Upstream tokens live a minute, so every call past it needs a refresh; TokenGate's own
    /// access tokens outlive the test.
    static let longSessions = "sessions: { access_token_ttl_seconds: 7200 }"

    static func shortUpstreamTokens() -> FakeIdentityProvider.Settings {
        var settings = FakeIdentityProvider.Settings()
        settings.accessTokenLifetime = .seconds(60)
        return settings
    }

    /// The Graph-shaped API behind TokenGate, a minute's upstream tokens, long sessions.
    static func run(
        settings: FakeIdentityProvider.Settings = shortUpstreamTokens(),
        _ body: (AuthFlowHarness) async throws -> Void
    ) async throws {
        try await AuthFlowHarness.run(extraConfiguration: longSessions, settings: settings, withGraphAPI: true, upstreamOptions: graph, body)
    }

    /// How a provider refuses TokenGate itself.
    enum Refusal: String, CaseIterable, Sendable {
        /// An expired Entra secret: 401 `invalid_client`.
        case invalidClient
        /// A web application firewall's page.
        case html403
        /// The token endpoint moved (a tenant moved): 404, nothing else.
        case empty404

        var answer: FakeIdentityProvider.TokenMisbehaviour {
            switch self {
            case .invalidClient:
                .raw(status: 401, contentType: "application/json", body: #"{"error":"invalid_client","error_description":"AADSTS7000222"}"#)
            case .html403: .raw(status: 403, contentType: "text/html", body: "<html><body><h1>Request blocked</h1></body></html>")
            case .empty404: .raw(status: 404, contentType: "text/plain", body: "")
            }
        }
    }

    /// Alice and Bob signed in, then the provider refuses TokenGate's client; a minute on,
    /// Alice's call met the refusal (503), which started the provider's backoff (2 s).
    static func twoUsersWhileTheClientIsRefused(_ h: AuthFlowHarness) async throws -> (alice: String, bob: String) {
        let alice = try #require(try await h.logIn(as: "alice")["access_token"] as? String)
        let bob = try #require(try await h.logIn(as: "bob")["access_token"] as? String)
        h.fake.misbehave(Refusal.invalidClient.answer, .untilReset, grantType: "refresh_token")
        h.clock.advance(by: 60)
        #expect(try await h.get("/api/graph/me", bearer: alice).status == 503)
        return (alice, bob)
    }

    @Test(arguments: Refusal.allCases)
    func aProviderRefusingTheClientForTenMinutesLogsNobodyOutAndEveryoneIsBackWhenItAccepts(refusal: Refusal) async throws {
        try await Self.run { h in
            let second = try await h.startInstance()
            defer { Task { await second.stop() } }
            var tokens: [String] = []
            for user in ["alice", "bob", "carol"] { tokens.append(try #require(try await h.logIn(as: user)["access_token"] as? String)) }
            h.fake.misbehave(refusal.answer, .untilReset, grantType: "refresh_token")
            let before = h.fake.refreshCount
            h.clock.advance(by: 60)
            var calls = 0
            // Ten minutes of the injected clock, every user calling every 10 s on either instance.
            for step in 0..<60 {
                for (index, token) in tokens.enumerated() {
                    let answer = try await h.get("/api/graph/me", bearer: token, at: (step + index) % 2 == 0 ? nil : second)
                    #expect(answer.status == 503, "\(refusal) step \(step): \(answer.body)")
                    #expect(answer.json["code"] as? String == "idp_unavailable")
                    #expect(Int(answer.header("Retry-After") ?? "") ?? 0 >= 1)
                    calls += 1
                }
                h.clock.advance(by: 10)
            }
            // One attempt per backoff window of the provider (2, 4, 8 … 300 s), not one per grant.
            let attempts = h.fake.refreshCount - before
            #expect(attempts >= 5 && attempts <= 10, "\(attempts) attempts for \(calls) calls")
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE state = 'stale'") == 0)
            #expect(try await h.count("SELECT count(*) AS n FROM sessions") == 3)
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_grants") == 3)
            #expect(h.logs.lines.contains { $0.contains("refuses TokenGate's client") && $0.contains("client_secret") })
            let metrics = try await h.scrapeMetrics()
            #expect(metrics.split(separator: "\n").contains { $0.hasPrefix("tokengate_provider_faults_total{") && $0.contains(#"kind="client""#) })
            // The provider accepts again: past its window, every user's calls work, no sign-in.
            h.fake.resetMisbehaviours()
            h.clock.advance(by: 301)
            for (index, token) in tokens.enumerated() {
                let answer = try await h.get("/api/graph/me", bearer: token, at: index % 2 == 0 ? nil : second)
                #expect(answer.status == 200, "\(refusal): \(answer.body)")
            }
            #expect(h.logs.lines.contains { $0.contains("answers refreshes again") })
        }
    }

    /// bench/fleet found it: an instance that looked while another made the one attempt at a
    /// failing provider kept that attempt's 30-second hold in memory, and answered 503 for up to
    /// 30 s after the provider took the client again. It now looks again within a second.
    @Test func anInstanceThatSawAnotherAskTheProviderServesWithinASecondOfItsSuccess() async throws {
        try await Self.run { h in
            let second = try await h.startInstance()
            defer { Task { await second.stop() } }
            let (alice, bob) = try await Self.twoUsersWhileTheClientIsRefused(h)
            // Past the provider's window (2 s), it takes the client again, but holds its answer:
            // alice's call on the first instance has the attempt.
            h.fake.resetMisbehaviours()
            let answer = TestGate()
            defer { answer.open() }
            h.fake.misbehave(.held(answer), grantType: "refresh_token")
            h.clock.advance(by: 3)
            func refreshes() -> Int {
                h.fake.requests(to: "/token").count(where: { $0.form.contains { $0 == ("grant_type", "refresh_token") } })
            }
            let before = refreshes()
            let attempt = Task { try await h.get("/api/graph/me", bearer: alice).status }
            try await eventually("the attempt reaches the provider") { refreshes() != before }
            // Meanwhile bob, on the second instance, is told to come back in a second.
            let waiting = try await h.get("/api/graph/me", bearer: bob, at: second)
            #expect(waiting.status == 503, "\(waiting.body)")
            #expect(waiting.header("Retry-After") == "1")
            answer.open()
            #expect(try await attempt.value == 200)
            h.clock.advance(by: 1.5)
            let after = try await h.get("/api/graph/me", bearer: bob, at: second)
            #expect(after.status == 200, "\(after.body)")
        }
    }

    /// The one attempt at a failing provider that says nothing about the client (a 500 for one
    /// grant) does not hold the others off: its grant backs off alone, and the next caller asks.
    @Test func anAttemptThatSettlesOnlyItsGrantLetsTheNextCallerAskAtOnce() async throws {
        try await Self.run { h in
            let (alice, bob) = try await Self.twoUsersWhileTheClientIsRefused(h)
            h.fake.resetMisbehaviours()
            h.fake.misbehave(.serverError, grantType: "refresh_token")
            h.clock.advance(by: 3)
            let before = h.fake.refreshCount
            #expect(try await h.get("/api/graph/me", bearer: alice).status == 503)
            let after = try await h.get("/api/graph/me", bearer: bob)
            #expect(after.status == 200, "\(after.body)")
            #expect(h.fake.refreshCount == before + 2)
        }
    }

    /// glewlwyd 2.7 answers a refresh with a wrong client secret exactly as one with a revoked
    /// grant (400, empty body). An instance started with a wrong secret, sharing the database,
    /// must not end the account: its revocation endpoint, asked about the client alone, says 401.
    @Test func anInstanceWithAWrongSecretLogsNobodyOutWhenTheProviderAnswersBothWithAnEmpty400() async throws {
        var settings = Self.shortUpstreamTokens()
        settings.rejectedGrantEmptyBodyStatus = 400
        settings.refusedClientEmptyBodyStatus = 400
        try await Self.run(settings: settings) { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let misconfigured = try await h.startInstance { $0.providers[0].clientSecret = Secret("wrong") }
            defer { Task { await misconfigured.stop() } }
            h.clock.advance(by: 60)
            let answer = try await h.get("/api/graph/me", bearer: token, at: misconfigured)
            #expect(answer.status == 503, "\(answer.body)")
            #expect(answer.json["code"] as? String == "idp_unavailable")
            #expect(h.fake.requests(to: "/revoke").count == 1, "the client was checked once")
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE state = 'stale'") == 0)
            #expect(try await h.count("SELECT count(*) AS n FROM sessions") == 1)
            // The instance with the right secret carries on past the window, without a sign-in.
            h.clock.advance(by: 3)
            #expect(try await h.get("/api/graph/me", bearer: token).status == 200)
        }
    }

    /// The check of the client is shared through the database: an empty 400 met by a second
    /// instance within the check's lifetime is settled without asking the provider again.
    @Test func theClientIsCheckedOnceForAllInstances() async throws {
        var settings = Self.shortUpstreamTokens()
        settings.rejectedGrantEmptyBodyStatus = 400
        try await Self.run(settings: settings) { h in
            let second = try await h.startInstance()
            defer { Task { await second.stop() } }
            let alice = try #require(try await h.logIn(as: "alice")["access_token"] as? String)
            let bob = try #require(try await h.logIn(as: "bob")["access_token"] as? String)
            h.fake.revokeAllTokens(for: "alice")
            h.fake.revokeAllTokens(for: "bob")
            h.clock.advance(by: 60)
            #expect(try await h.get("/api/graph/me", bearer: alice).status == 401)
            #expect(try await h.get("/api/graph/me", bearer: bob, at: second).status == 401)
            #expect(h.fake.requests(to: "/revoke").count == 1)
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE state = 'stale'") == 2)
        }
    }

    /// The safety valve: 30 grants of one provider rejected inside a minute. The first 19 end
    /// (suspended, grant kept), the 20th trips the valve and no more are ended; on the provider's
    /// next success the 19 come back, signed in.
    @Test func thirtyGrantsRejectedInAMinuteTripTheValveAndTheEndedOnesComeBackOnTheNextSuccess() async throws {
        try await Self.run { h in
            var tokens: [String] = []
            for index in 0..<30 { tokens.append(try #require(try await h.logIn(as: "user\(index)")["access_token"] as? String)) }
            h.fake.misbehave(.error(code: "invalid_grant"), .untilReset, grantType: "refresh_token")
            h.clock.advance(by: 60)
            var statuses: [Int] = []
            for token in tokens {
                statuses.append(try await h.get("/api/graph/me", bearer: token).status)
                h.clock.advance(by: 1)
            }
            #expect(statuses == Array(repeating: 401, count: 19) + Array(repeating: 503, count: 11), "\(statuses)")
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE state = 'stale'") == 19)
            #expect(h.logs.lines.contains { $0.contains("safety valve") })
            // Nothing is revoked or removed within the grace period.
            _ = try await h.auth.sweeper.sweep()
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_grants") == 30)
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_revocations") == 0)
            // The provider accepts again: past its window (a few attempts so far, under a minute),
            // its next success brings everyone back.
            h.fake.resetMisbehaviours()
            h.clock.advance(by: 60)
            let first = try await h.get("/api/graph/me", bearer: tokens[29])
            #expect(first.status == 200, "\(first.body)")
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE state = 'stale'") == 0)
            #expect(try await h.count("SELECT count(*) AS n FROM sessions") == 30)
            for token in tokens {
                let answer = try await h.get("/api/graph/me", bearer: token)
                #expect(answer.status == 200, "\(answer.body)")
            }
        }
    }

    /// A grant really rejected is ended, but its account is kept through the grace period before
    /// the sweeper removes it and revokes the grant.
    @Test func aRejectedGrantIsRemovedAndRevokedOnlyAfterItsGracePeriod() async throws {
        try await Self.run { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            h.fake.revokeAllTokens(for: "alice")
            h.clock.advance(by: 60)
            #expect(try await h.get("/api/graph/me", bearer: token).status == 401)
            #expect(try #require(try await h.auth.sweeper.sweep()).accounts == 0)
            #expect(try await h.count("SELECT count(*) AS n FROM accounts WHERE state = 'stale'") == 1)
            h.clock.advance(by: 86400)
            #expect(try #require(try await h.auth.sweeper.sweep()).accounts == 1)
            #expect(try await h.count("SELECT count(*) AS n FROM accounts") == 0)
            #expect(try await h.count("SELECT count(*) AS n FROM suspended_sessions") == 0)
        }
    }
}

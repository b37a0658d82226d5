import Foundation
import TGAppTesting
import TGAuth
import TGPostgres
import TGTesting
import Testing

/// How TokenGate acts on a provider's answer to an upstream refresh: a rejection ends the
/// account, unavailability backs off per grant, a refused scope fails one call, and no pooled
/// database connection waits for the provider.
@Suite struct RefreshLifecycleTests {
    static let graph = ", path_prefixes: [\"/me\"]"

    /// How the provider answers a refresh token it no longer honours.
    enum RejectionStyle: String, CaseIterable, Sendable {
        /// glewlwyd: 400 and an empty body.
        case emptyBody400
        /// Most others: 400 with `{"error":"invalid_grant"}`.
        case invalidGrantJSON
    }

    @Test(arguments: RejectionStyle.allCases)
    func aGrantRevokedAtTheProviderEndsTheAccountAndAsksForASignIn(style: RejectionStyle) async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            if style == .emptyBody400 { harness.fake.configure { $0.rejectedGrantEmptyBodyStatus = 400 } }
            harness.fake.revokeAllTokens(for: "alice")
            let before = harness.fake.refreshCount
            let answer = try await harness.get("/api/graph/me", bearer: token)
            #expect(answer.status == 401, "\(answer.body)")
            #expect(answer.json["code"] as? String == "interaction_required")
            #expect((answer.json["detail"] as? String ?? "").contains("login"))
            #expect(try await harness.count("SELECT count(*) AS n FROM accounts WHERE state = 'stale'") == 1)
            #expect(try await harness.count("SELECT count(*) AS n FROM sessions") == 0)
            // Nobody asks the provider again for that grant.
            for _ in 0..<3 { #expect(try await harness.get("/api/graph/me", bearer: token).status == 401) }
            #expect(harness.fake.refreshCount == before + 1)
            #expect(harness.graph!.received.isEmpty)
        }
    }

    /// A provider that is down is asked once per grant per backoff window, by all instances
    /// together; callers meanwhile get 503 with the window's remaining time.
    @Test func anUnavailableProviderIsAskedOncePerGrantPerBackoffWindow() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let second = try await harness.startInstance()
            defer { Task { await second.stop() } }
            harness.fake.misbehave(.serverError, .untilReset, grantType: "refresh_token")
            let before = harness.fake.refreshCount
            var retryAfters: [Int] = []
            for instance in [nil, second, nil, second] {
                let answer = try await harness.get("/api/graph/me", bearer: token, at: instance)
                #expect(answer.status == 503)
                #expect(answer.json["code"] as? String == "idp_unavailable")
                retryAfters.append(Int(answer.header("Retry-After") ?? "") ?? 0)
            }
            #expect(harness.fake.refreshCount == before + 1, "one attempt for the window, whichever instance is asked")
            #expect(retryAfters.allSatisfy { $0 >= 1 })
            // Past the window: one more attempt, and a longer window after it fails again.
            harness.clock.advance(by: TimeInterval(retryAfters[0]) + 1)
            let again = try await harness.get("/api/graph/me", bearer: token)
            #expect(again.status == 503)
            #expect(harness.fake.refreshCount == before + 2)
            let longer = Int(again.header("Retry-After") ?? "") ?? 0
            #expect(longer > retryAfters[0])
            // The provider is back: past the window the call works; the grant was kept all along.
            harness.fake.resetMisbehaviours()
            harness.clock.advance(by: TimeInterval(longer) + 1)
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            #expect(harness.fake.refreshCount == before + 3)
            #expect(try await harness.count("SELECT count(*) AS n FROM accounts WHERE state = 'active'") == 1)
        }
    }

    /// `invalid_scope` or `consent_required` for the scopes an API needs fails that call only.
    @Test(arguments: [
        #"{"error":"invalid_scope"}"#, #"{"error":"consent_required"}"#,
        #"{"error":"invalid_grant","error_description":"AADSTS65001: The user has not consented","suberror":"consent_required"}"#,
    ])
    func aRefusedScopeFailsThatCallAndKeepsTheAccount(body: String) async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.graph + ", token_exchange: true") { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            harness.fake.misbehave(.raw(status: 400, contentType: "application/json", body: body), grantType: "refresh_token")
            let answer = try await harness.get("/api/graph/me", bearer: token)
            #expect(answer.status == 403, "\(answer.body)")
            #expect(answer.json["code"] as? String == "consent_required")
            #expect(answer.json["scope"] as? String == "User.Read")
            #expect((answer.json["detail"] as? String ?? "").contains("User.Read"))
            #expect(try await harness.count("SELECT count(*) AS n FROM accounts WHERE state = 'active'") == 1)
            #expect(try await harness.count("SELECT count(*) AS n FROM sessions") == 1)
            #expect(try await harness.get("/auth/me", bearer: token).status == 200)
            // The same through token exchange: RFC 8693's invalid_scope, naming the scope.
            harness.fake.misbehave(.raw(status: 400, contentType: "application/json", body: body), grantType: "refresh_token")
            let exchanged = try await harness.post(
                "/auth/token",
                form: [
                    ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("subject_token", token),
                    ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"), ("resource", "graph"),
                ]
            )
            #expect(exchanged.status == 400)
            #expect(exchanged.json["error"] as? String == "invalid_scope")
            #expect((exchanged.json["error_description"] as? String ?? "").contains("User.Read"))
            #expect(try await harness.count("SELECT count(*) AS n FROM accounts WHERE state = 'active'") == 1)
        }
    }

    /// While the provider takes its time with a refresh, no transaction is open and no row lock
    /// held: the instance's pooled connections serve everyone else.
    @Test func noPooledConnectionOrRowLockWaitsForTheProvider() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            // The provider holds its answer until the test has looked.
            let answer = TestGate()
            defer { answer.open() }
            harness.fake.misbehave(.held(answer), grantType: "refresh_token")
            let before = harness.fake.refreshCount
            let call = Task { try await harness.get("/api/graph/me", bearer: token) }
            try await eventually("the refresh reaches the provider") {
                harness.fake.requests(to: "/token").count(where: { $0.form.contains { $0 == ("grant_type", "refresh_token") } }) != before
            }
            let waiting = try await harness.count(
                """
                SELECT count(*) AS n FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'
                """
            )
            #expect(waiting == 0, "a transaction stays open while the provider answers")
            #expect(try await harness.count("SELECT count(*) AS n FROM pg_locks WHERE locktype IN ('tuple', 'transactionid')") == 0)
            answer.open()
            #expect(try await call.value.status == 200)
        }
    }

    /// An API that refuses every token makes TokenGate refresh once per cooldown, not per call.
    @Test func anAPIThatRefusesEveryTokenCausesOneForcedRefreshPerCooldown() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            let before = harness.fake.refreshCount
            harness.graph!.rejectNextTokens(1000)
            for _ in 0..<5 { #expect(try await harness.get("/api/graph/me", bearer: token).status == 401) }
            #expect(harness.fake.refreshCount == before + 1)
            harness.clock.advance(by: 31)
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 401)
            #expect(harness.fake.refreshCount == before + 2)
            harness.graph!.rejectNextTokens(0)
        }
    }
}

import Foundation
import Prometheus
import Synchronization
import TGAppTesting
import TGPostgres
import TGStore
import TGTesting
import Testing

@testable import TGApp

/// Rate limits shared by every instance through PostgreSQL (docs/scaling.md, "Rate limits").
@Suite struct SharedRateLimitTests {
    @Test func theLoginBudgetIsSharedByInstancesAndOutlivesARestart() async throws {
        // 4 a minute: one token every 15 s, leases of one token (exact).
        try await AuthFlowHarness.run(rateLimits: "login_rate_limit_per_minute: 4, callback_rate_limit_per_minute: 0, token_rate_limit_per_minute: 0")
        { h in
            let second = try await h.startInstance()
            func login(_ instance: AuthFlowHarness.Instance?) async throws -> Int {
                try await h.get("/auth/login", query: AuthFlowHarness.AppLogin().query, at: instance).status
            }
            #expect(try await login(nil) == 302)
            #expect(try await login(second) == 302)
            #expect(try await login(nil) == 302)
            #expect(try await login(second) == 302)
            // Four in all: either instance now refuses, each after its own statement.
            let refused = try await h.get("/auth/login", query: AuthFlowHarness.AppLogin().query, at: second)
            #expect(refused.status == 429 && refused.header("Retry-After") == "15")
            #expect(try await login(nil) == 429)
            // A restarted instance remembers nothing, and still refuses: the bucket is in PostgreSQL.
            await second.stop()
            let restarted = try await h.startInstance()
            #expect(try await login(restarted) == 429)
            h.clock.advance(by: 15)
            #expect(try await login(restarted) == 302)
            #expect(try await login(nil) == 429)
            await restarted.stop()
        }
    }

    @Test func theCallbackAndTheTransferEndpointHaveLimitsOfTheirOwn() async throws {
        try await AuthFlowHarness.run(rateLimits: "login_rate_limit_per_minute: 0, callback_rate_limit_per_minute: 2, token_rate_limit_per_minute: 1")
        { h in
            for _ in 0..<2 { #expect(try await h.get("/auth/callback", query: [("state", "unknown"), ("code", "x")]).status != 429) }
            let callback = try await h.get("/auth/callback", query: [("state", "unknown"), ("code", "x")])
            #expect(callback.status == 429 && callback.json["code"] as? String == "rate_limited")
            // /auth/token and /auth/transfer share the setting, not the bucket.
            #expect(try await h.refresh("x").status == 400)
            #expect(try await h.post("/auth/transfer", form: []).status == 401)
            #expect(try await h.refresh("x").status == 429)
            #expect(try await h.post("/auth/transfer", form: []).status == 429)
        }
    }

    @Test func leasesSpareTheDatabaseAndConcurrentRequestsNeverGetMoreThanTheBudget() async throws {
        try await TestDatabase.withFreshDatabase(migrations: SchemaMigrations.all) { database, _ in
            let store = Store(database: database).rateLimits
            let metrics = TokenGateMetrics()
            let at = Date(timeIntervalSince1970: 1_800_000_000)
            // 600 a minute: leases grow 1, 2, 4, … up to 30 tokens a statement.
            let busy = RateLimiter(scope: "busy", perMinute: 600, store: store, metrics: metrics, now: { at })
            for _ in 0..<200 { #expect(await Self.admit(busy, "192.0.2.1") == nil) }
            let statements = Self.takes(metrics, scope: "busy")
            #expect(statements <= 12, "\(statements) statements for 200 requests")
            // 40 requests at once from one address against a budget of 30, on two instances: never
            // more than 30; a token a take brought after its waiters left stays in that instance's
            // lease for the next request (a lapsed lease loses it: leases only under-admit).
            let instances = (0..<2).map { _ in RateLimiter(scope: "burst", perMinute: 30, store: store, metrics: metrics, now: { at }) }
            let burst = await withTaskGroup(of: Bool.self) { group in
                for index in 0..<40 { group.addTask { await Self.admit(instances[index % 2], "192.0.2.9") == nil } }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(burst <= 30)
            // Then 50 more: the total is the budget, and past it refusals come from memory (one
            // statement per instance finds the bucket empty, then none per request).
            let before = Self.takes(metrics, scope: "burst")
            var after = 0
            for index in 0..<50 where await Self.admit(instances[index % 2], "192.0.2.9") == nil { after += 1 }
            #expect(burst + after == 30)
            #expect(Self.takes(metrics, scope: "burst") - before <= 2)
        }
    }

    @Test func anInstanceRemembersOnlyTheAddressesOfTheLastFewSeconds() async throws {
        try await TestDatabase.withFreshDatabase(migrations: SchemaMigrations.all) { database, _ in
            let clock = ManualClock()
            let limiter = RateLimiter(scope: "login", perMinute: 60, store: Store(database: database).rateLimits, now: { clock.now })
            for index in 0..<100 { #expect(await Self.admit(limiter, "198.51.100.\(index)") == nil) }
            #expect(limiter.remembered == 100)
            // Their leases lapse after a second; a few seconds on, the next request forgets them.
            clock.advance(by: 6)
            #expect(await Self.admit(limiter, "198.51.100.200") == nil)
            #expect(limiter.remembered == 1)
        }
    }

    @Test func withoutTheDatabaseEachInstanceStillLimitsOnItsOwn() async throws {
        var configuration = PostgresClient.Configuration(url: "postgresql://tokengate@127.0.0.1:\(try freeLoopbackPort())/none")
        configuration.connectTimeout = .seconds(1)
        configuration.acquireTimeout = .seconds(1)
        let unreachable = PostgresClient(configuration: configuration)
        defer { unreachable.shutdown() }
        let metrics = TokenGateMetrics()
        let limiter = RateLimiter(
            scope: "login",
            perMinute: 3,
            store: Store(database: unreachable).rateLimits,
            metrics: metrics,
            now: { Date(timeIntervalSince1970: 0) }
        )
        var answers: [Int?] = []
        for _ in 0..<4 { answers.append(await Self.admit(limiter, "192.0.2.1")) }
        #expect(answers == [nil, nil, nil, 20])
        #expect(Self.takes(metrics, scope: "login", outcome: "unavailable") >= 1)
    }

    @Test func takesThatArriveWhileAStatementRunsGoTogetherInTheNextAndAClientAtMostOnceAStatement() async throws {
        let first = TestGate()
        let statements = Mutex<[[String: Int]]>([])
        let batcher = RateLimitBatcher { wants in
            let number = statements.withLock { sent in
                sent.append(wants)
                return sent.count
            }
            if number == 1 { await first.wait() }
            return wants.mapValues { RateLimitStore.Take(granted: $0, remaining: 0) }
        }
        let alone = Task { await batcher.take("a", want: 1) }
        while statements.withLock({ $0.count }) == 0 { await Task.yield() }
        // While the first statement runs: 20 clients, and "b" twice.
        let others = (0..<20).map { index in Task { await batcher.take("c\(index)", want: 2) } }
        let twice = [Task { await batcher.take("b", want: 1) }, Task { await batcher.take("b", want: 3) }]
        while batcher.waiting < 22 { await Task.yield() }
        first.open()
        #expect(await alone.value == RateLimitStore.Take(granted: 1, remaining: 0))
        for other in others { #expect(await other.value?.granted == 2) }
        #expect(Set([await twice[0].value?.granted, await twice[1].value?.granted]) == [1, 3])
        let sent = statements.withLock { $0 }
        #expect(sent.count == 3 && sent[0] == ["a": 1] && sent[1].count == 21 && sent[2].count == 1)
    }

    /// The limiter as `Application` drives it: memory first, the shared bucket when it cannot tell.
    static func admit(_ limiter: RateLimiter, _ client: String) async -> Int? {
        switch limiter.decide(client) {
        case .admitted: return nil
        case .refused(let wait): return wait
        case .ask: return await limiter.admit(client)
        }
    }

    /// `tokengate_rate_limit_takes_total` for `scope` (all outcomes, or one), from the registry.
    static func takes(_ metrics: TokenGateMetrics, scope: String, outcome: String? = nil) -> Int {
        let text = String(decoding: metrics.registry.emitToBuffer(), as: UTF8.self)
        return text.split(separator: "\n").filter { line in
            line.hasPrefix("tokengate_rate_limit_takes_total{") && line.contains("scope=\"\(scope)\"")
                && (outcome.map { line.contains("outcome=\"\($0)\"") } ?? true)
        }.reduce(0) { $0 + (Int($1.split(separator: " ").last ?? "") ?? 0) }
    }
}

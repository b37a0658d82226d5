import Foundation
import Synchronization
import TGAppTesting
import TGAuth
import TGPostgres
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The proxy under weight and without its database.
/// Over real sockets: the calls served from memory while the database is away are answered
/// from the connection's event loop (ProxyRoutes+Loop.swift), and a gibibyte streams.
@Suite struct ProxyResilienceTests {
    /// This process's resident memory, in bytes.
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
    }

    @Test func aOneGibibyteDownloadStreamsThroughWithFlatMemory() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", timeout_seconds: 300", transport: .sockets) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let baseline = Self.residentBytes()
            let peak = Mutex(baseline)
            let sampler = Task {
                while !Task.isCancelled {
                    let now = Self.residentBytes()
                    peak.withLock { $0 = max($0, now) }
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
            let size = 1 << 30
            let result = try await curl([
                "--max-time", "300", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                harness.baseURL + "/api/graph/bytes?count=\(size)", "-H", "Authorization: Bearer \(token)",
            ])
            sampler.cancel()
            #expect(result.stdout == "200 \(size)", "\(result.stdout) \(result.stderr)")
            let growth = peak.withLock { $0 } - baseline
            #expect(growth < 64 << 20, "resident memory grew by \(growth >> 20) MiB while 1 GiB passed")
        }
    }

    @Test func cachedCallsWorkWithoutTheDatabaseOthersGet503AndAllRecover() async throws {
        _ = try TestDatabase.adminURL()
        try await PrivateCluster.with { cluster, url in
            try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/me\"]", databaseURL: url, transport: .sockets) {
                harness in
                let alice = try #require(try await harness.logIn(as: "alice")["access_token"] as? String)
                let bob = try #require(try await harness.logIn(as: "bob")["access_token"] as? String)
                #expect(try await harness.get("/api/graph/me", bearer: alice).status == 200)

                try await cluster.run("stop")
                for _ in 0..<3 {
                    let cached = try await harness.get("/api/graph/me", bearer: alice)
                    #expect(cached.status == 200, "\(cached.body)")
                }
                let uncached = try await harness.get("/api/graph/me", bearer: bob)
                #expect(uncached.status == 503)
                #expect(uncached.json["code"] as? String == "database_unavailable")
                #expect(uncached.header("Retry-After") != nil)
                #expect(try await harness.get("/auth/me", bearer: alice).status == 503)

                try await cluster.run("start")
                try await eventually("the database is back for an uncached call", every: .milliseconds(20)) {
                    try await harness.get("/api/graph/me", bearer: bob).status == 200
                }
                #expect(try await harness.get("/api/graph/me", bearer: alice).status == 200)
                #expect(try await harness.get("/auth/me", bearer: alice).status == 200)
                // Nothing was deleted because the database was away.
                #expect(try await harness.count("SELECT count(*) AS n FROM upstream_grants") == 2)
                #expect(try await harness.count("SELECT count(*) AS n FROM sessions") == 2)
            }
        }
    }

    @Test func aRotationAnsweredWhileTheDatabaseWentAwayIsWrittenWhenItReturns() async throws {
        _ = try TestDatabase.adminURL()
        try await PrivateCluster.with { cluster, url in
            try await AuthFlowHarness.run(
                settings: UpstreamTokenTests.rotatingProvider(),
                withGraphAPI: true,
                upstreamOptions: ", path_prefixes: [\"/me\"]",
                databaseURL: url,
                transport: .sockets
            ) { harness in
                let token = try #require(try await harness.logIn()["access_token"] as? String)
                let before = harness.fake.refreshCount
                // The provider holds the refresh's answer; meanwhile the database goes away.
                let answer = TestGate()
                defer { answer.open() }
                harness.fake.misbehave(.held(answer), grantType: "refresh_token")
                let call = Task { try await harness.get("/api/graph/me", bearer: token) }
                try await eventually("the refresh reached the provider") { harness.fake.refreshCount == before + 1 }
                try await cluster.run("stop")
                answer.open()
                let served = try await call.value
                #expect(served.status == 200, "\(served.body)")
                #expect(harness.fake.refreshCount == before + 1)

                try await cluster.run("start")
                try await eventually("the rotated grant is written after the database came back", every: .milliseconds(20)) {
                    (try? await harness.database.query("SELECT version AS n FROM upstream_grants").first?.decode(Int.self, "n")) == 2
                }
                // The stored refresh token is the rotated one: the provider, which revokes the grant
                // when an old refresh token comes back, accepts the next refresh.
                harness.clock.advance(by: 100)
                #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
                #expect(harness.fake.refreshCount == before + 2)
                #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            }
        }
    }
}

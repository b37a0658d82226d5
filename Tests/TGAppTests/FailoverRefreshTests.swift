import Foundation
import TGAppTesting
import TGPostgres
import TGTesting
import Testing

/// What a PostgreSQL failover does to refreshes, shown without Patroni (bench/failover.sh does it
/// with Patroni): a grant's advisory lock taken from its holder while the provider answers, and a
/// rotation of TokenGate's own refresh token that the new primary never received.
@Suite struct FailoverRefreshTests {
    /// A failover ends the session that holds the grant's advisory lock while its holder still
    /// waits for the provider. The stand-in: terminating that backend frees the lock as a
    /// failover does, and the claim is made to look as if written on the former primary (a
    /// server with another start time). Another instance then takes the free lock, finds the
    /// holder's claim on the grant, and waits for its answer instead of sending the same refresh
    /// token again (which this provider, like those that detect reuse, would answer by revoking
    /// the grant). A claim made on the same server is void once its lock is free
    /// (CrashRecoveryTests: a process killed mid-refresh).
    @Test func aGrantLockLostToAFailoverDoesNotLetASecondInstanceReuseTheRefreshToken() async throws {
        let settings = UpstreamTokenTests.rotatingProvider()
        try await AuthFlowHarness.run(settings: settings, withGraphAPI: true, upstreamOptions: UpstreamTokenTests.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let second = try await harness.startInstance()
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            // The upstream token is due: the next call refreshes, and the provider takes 2 s.
            harness.clock.advance(by: 100)
            harness.fake.misbehave(.delay(.seconds(2)), .untilReset, grantType: "refresh_token")
            let before = harness.fake.refreshCount
            async let holderCall = harness.get("/api/graph/me", bearer: token)
            try await eventually("the first instance's refresh has claimed the grant") {
                try await harness.count("SELECT count(*) AS n FROM upstream_grants WHERE refresh_claimed_until IS NOT NULL") == 1
            }
            let ended = try await harness.count(
                """
                SELECT count(pg_terminate_backend(pid)) AS n FROM pg_locks
                WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """
            )
            #expect(ended == 1)
            try await harness.database.query("UPDATE upstream_grants SET refresh_claimed_on = refresh_claimed_on - interval '1 hour'")
            let waiter = try await harness.get("/api/graph/me", bearer: token, at: second)
            let holder = try await holderCall
            #expect(holder.status == 200, "\(holder.body)")
            #expect(waiter.status == 200, "\(waiter.body)")
            #expect(harness.fake.refreshCount == before + 1)
            harness.fake.resetMisbehaviours()
            // The grant is alive: the next refresh works, from either instance.
            harness.clock.advance(by: 100)
            #expect(try await harness.get("/api/graph/me", bearer: token, at: second).status == 200)
            #expect(harness.fake.refreshCount == before + 2)
            #expect(try await harness.count("SELECT count(*) AS n FROM upstream_grants WHERE refresh_claimed_until IS NOT NULL") == 0)
            await second.stop()
        }
    }

    /// A failover to an asynchronous replica can lose an upstream rotation: the provider spent
    /// the old refresh token, the new primary still holds it. The instance that wrote the
    /// rotation writes it again when its invalidation listener reconnects, so the next refresh
    /// presents the live token, not the spent one (which this provider, like those that detect
    /// reuse, would answer by revoking the grant).
    @Test func anUpstreamRotationTheNewPrimaryLostIsWrittenAgainWhenTheListenerReconnects() async throws {
        let settings = UpstreamTokenTests.rotatingProvider()
        try await AuthFlowHarness.run(settings: settings, withGraphAPI: true, upstreamOptions: UpstreamTokenTests.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            try await harness.database.query("CREATE TABLE grants_before_failover AS SELECT * FROM upstream_grants")
            let before = harness.fake.refreshCount
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            #expect(harness.fake.refreshCount == before + 1)
            // The new primary has the grant as it was before that refresh, and no access token.
            try await harness.database.query(
                """
                UPDATE upstream_grants g SET refresh_token = b.refresh_token, key_id = b.key_id, version = b.version,
                  expires_at = b.expires_at, id_token_hint = b.id_token_hint, updated_at = b.updated_at
                FROM grants_before_failover b WHERE g.account_id = b.account_id
                """
            )
            try await harness.database.query("DELETE FROM upstream_access_tokens")
            let lostVersion = try await harness.count("SELECT max(version) AS n FROM grants_before_failover")
            #expect(try await harness.count("SELECT max(version) AS n FROM upstream_grants") == lostVersion)

            let ended = try await harness.count(
                """
                SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
                WHERE application_name = 'tokengate-listener' AND datname = current_database()
                """
            )
            #expect(ended == 1)
            try await eventually("the rotation is written again", every: .milliseconds(50)) {
                try await harness.count("SELECT max(version) AS n FROM upstream_grants") == lostVersion + 1
            }
            harness.clock.advance(by: 100)
            let next = try await harness.get("/api/graph/me", bearer: token)
            #expect(next.status == 200, "\(next.body)")
            #expect(harness.fake.refreshCount == before + 2)
        }
    }

    /// With asynchronous replication a failover can lose the last commits: a refresh whose new
    /// token the app received may be missing on the new primary, which still holds the token it
    /// rotated. The app's new token is then unknown: it gets `invalid_grant` (log in again), and
    /// the family is not treated as reused — the session lives on, and the spent token, which an
    /// app whose answer was lost with the primary still holds, refreshes it normally.
    @Test func aRotationLostWithTheOldPrimaryIsAnUnknownTokenNotReuse() async throws {
        try await AuthFlowHarness.run { harness in
            let login = try await harness.logIn()
            let spent = try #require(login["refresh_token"] as? String)
            try await harness.database.query("CREATE TABLE before_failover AS SELECT * FROM sessions")
            try await harness.database.query("CREATE TABLE revoked_before_failover AS SELECT * FROM revoked_refresh_tokens")
            let rotated = try await harness.refresh(spent)
            #expect(rotated.status == 200)
            let lost = try #require(rotated.json["refresh_token"] as? String)
            // The new primary has the rows as they were before that refresh.
            try await harness.database.query(
                """
                UPDATE sessions s SET access_token_hash = b.access_token_hash, access_expires_at = b.access_expires_at,
                  refresh_token_hash = b.refresh_token_hash, previous_refresh_token_hash = b.previous_refresh_token_hash,
                  rotated_at = b.rotated_at, replay_response = b.replay_response, last_used_at = b.last_used_at,
                  expires_at = b.expires_at, dpop_jkt = b.dpop_jkt
                FROM before_failover b WHERE s.id = b.id
                """
            )
            try await harness.database.query(
                "DELETE FROM revoked_refresh_tokens WHERE token_hash NOT IN (SELECT token_hash FROM revoked_before_failover)"
            )

            let unknown = try await harness.refresh(lost)
            #expect(unknown.status == 400)
            #expect(unknown.json["error"] as? String == "invalid_grant")
            #expect(try await harness.count("SELECT count(*) AS n FROM sessions") == 1)
            #expect(!harness.logs.lines.contains { $0.contains("refresh token reuse") })
            let retried = try await harness.refresh(spent)
            #expect(retried.status == 200, "\(retried.body)")
            #expect(try await harness.count("SELECT count(*) AS n FROM sessions") == 1)
        }
    }
}

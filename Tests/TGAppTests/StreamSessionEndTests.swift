import Foundation
import TGApp
import TGAppTesting
import TGPostgres
import TGProxy
import TGTesting
import Testing

/// Streams end with the session (docs/proxy.md): a proxied event stream or long download ends,
/// on whichever instance relays it, within a bounded time of its session's end, whatever ended
/// it. Over real sockets: the subject is the open connections.
@Suite struct StreamSessionEndTests {
    /// How soon a stream must end after its session did (the announcement is at commit; the
    /// expiry check runs every second).
    static let bound: Duration = .seconds(3)

    static func openEvents(_ base: String, token: String) async throws -> StreamingGet {
        let port = try #require(base.split(separator: ":").last.flatMap { UInt16($0) })
        let stream = try await StreamingGet(port: port, target: "/api/graph/events", headers: ["Authorization: Bearer \(token)"])
        #expect(stream.status == 200, "\(stream.head)")
        return stream
    }

    /// The stream got `data` and is open (the upstream has it as well).
    static func expectFlowing(_ stream: StreamingGet, _ graph: FakeGraphAPI, _ data: String) async throws {
        graph.publish("data: \(data)\n\n")
        #expect(try await stream.nextEvent() == "data: \(data)")
    }

    /// Reads until the stream ends; its end must come within ``bound`` of `started` as an
    /// event stream's clean end after the session-ended event.
    static func expectEndedWithTheSession(_ stream: StreamingGet, since started: ContinuousClock.Instant) async throws {
        #expect(try await stream.nextEvent() == "event: tokengate.session_ended\ndata: {\"reason\":\"session_ended\"}")
        #expect(try await stream.drain() == .complete)
        #expect(ContinuousClock.now - started < bound)
    }

    @Test func aLogoutOnOneInstanceEndsTheEventStreamHeldOnAnotherWithinSeconds() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/events\"]", transport: .sockets) { h in
            let graph = try #require(h.graph)
            let alice = try #require(try await h.logIn(as: "alice")["access_token"] as? String)
            let bob = try #require(try await h.logIn(as: "bob")["access_token"] as? String)
            let second = try await h.startInstance()
            let onSecond = try await Self.openEvents(second.baseURL, token: alice)
            let bobs = try await Self.openEvents(h.baseURL, token: bob)
            #expect(second.gateway.assembly.streams.count == 1)
            try await Self.expectFlowing(onSecond, graph, "one")
            #expect(try await bobs.nextEvent() == "data: one")

            let started = ContinuousClock.now
            #expect(try await h.post("/auth/logout", form: [], bearer: alice).status == 200)
            try await Self.expectEndedWithTheSession(onSecond, since: started)
            #expect(second.gateway.assembly.streams.count == 0)
            // Another session's stream goes on; the ended one's upstream exchange was stopped.
            graph.publish("data: two\n\n")
            #expect(try await bobs.nextEvent() == "data: two")
            try await eventually("the upstream stream of the ended session is closed") {
                // A write finds the closed connection.
                graph.publish(": ping\n\n")
                return graph.openEventStreams == 1
            }
            // Bob's own logout ends his (nothing is left for the shutdown to wait for).
            let again = ContinuousClock.now
            #expect(try await h.post("/auth/logout", form: [], bearer: bob).status == 200)
            try await Self.expectEndedWithTheSession(bobs, since: again)
            await second.stop()
        }
    }

    @Test func aBackChannelLogoutEndsTheSessionsEventStream() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/events\"]", transport: .sockets) { h in
            let graph = try #require(h.graph)
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let stream = try await Self.openEvents(h.baseURL, token: token)
            try await Self.expectFlowing(stream, graph, "one")
            let sid = try #require(h.fake.sessionIDs(of: "alice").first)
            let started = ContinuousClock.now
            let answer = try await h.post(
                "/auth/backchannel-logout/fake",
                form: [("logout_token", try h.fake.logoutToken(subject: "alice", sessionID: sid))]
            )
            #expect(answer.status == 200)
            try await Self.expectEndedWithTheSession(stream, since: started)
            let samples = try await MetricsTests.parse(try await h.scrapeMetrics())
            #expect(MetricsTests.value(samples, "tokengate_proxy_streams_ended_total", ["cause": "session_ended"]) == 1)
            #expect(MetricsTests.value(samples, "tokengate_proxy_streams_open") == 0)
        }
    }

    /// Removing an account (its grant revoked at the provider) ends its sessions, and so their streams.
    @Test func removingTheAccountEndsItsStream() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/events\"]", transport: .sockets) { h in
            let graph = try #require(h.graph)
            let alice = try await h.logIn()
            let token = try #require(alice["access_token"] as? String)
            let id = try #require((alice["account"] as? [String: Any])?["id"] as? String)
            let stream = try await Self.openEvents(h.baseURL, token: token)
            try await Self.expectFlowing(stream, graph, "one")
            let started = ContinuousClock.now
            #expect(try await h.delete("/auth/accounts/\(id)", bearer: token).status == 204)
            try await Self.expectEndedWithTheSession(stream, since: started)
        }
    }

    /// A session ended while the instance's listener was away (its announcement missed) is found
    /// when the listener is back: every open stream's session is looked up again.
    @Test func aSessionEndMissedWhileTheListenerWasAwayIsFoundWhenItReconnects() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/events\"]", transport: .sockets) { h in
            let graph = try #require(h.graph)
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let stream = try await Self.openEvents(h.baseURL, token: token)
            try await Self.expectFlowing(stream, graph, "one")
            // Ended unannounced, as if while nobody listened.
            try await h.database.query("ALTER TABLE sessions DISABLE TRIGGER sessions_ended")
            try await h.database.query("DELETE FROM sessions")
            try await h.database.query("ALTER TABLE sessions ENABLE TRIGGER sessions_ended")
            try await Self.expectFlowing(stream, graph, "two")
            let started = ContinuousClock.now
            let ended = try await h.count(
                """
                SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
                WHERE application_name = 'tokengate-session-listener' AND datname = current_database()
                """
            )
            #expect(ended == 1)
            try await Self.expectEndedWithTheSession(stream, since: started)
            let samples = try await MetricsTests.parse(try await h.scrapeMetrics())
            #expect(MetricsTests.value(samples, "tokengate_proxy_streams_ended_total", ["cause": "session_expired"]) == 1)
        }
    }

    /// Nothing deletes an expired session until the sweeper runs: the instance finds it. A
    /// refresh that pushed the idle expiry on keeps its session's stream.
    @Test func aSessionThatExpiresEndsItsStreamAndOneRefreshedMeanwhileGoesOn() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/events\"]", transport: .sockets) { h in
            let graph = try #require(h.graph)
            let alice = try await h.logIn(as: "alice")
            let bob = try await h.logIn(as: "bob")
            let alices = try await Self.openEvents(h.baseURL, token: try #require(alice["access_token"] as? String))
            let bobs = try await Self.openEvents(h.baseURL, token: try #require(bob["access_token"] as? String))
            try await Self.expectFlowing(alices, graph, "one")
            #expect(try await bobs.nextEvent() == "data: one")
            let open = try await MetricsTests.parse(try await h.scrapeMetrics())
            #expect(MetricsTests.value(open, "tokengate_proxy_streams_open") == 2)
            // Twenty days on, Bob's app refreshes: his session's idle expiry moves to day 50.
            let idle = TimeInterval(h.configuration.sessions.refreshTokenIdleTTLSeconds)
            h.clock.advance(by: idle * 2 / 3)
            let refreshed = try await h.refresh(try #require(bob["refresh_token"] as? String))
            #expect(refreshed.status == 200)
            // Past Alice's idle expiry (day 30), before Bob's.
            h.clock.advance(by: idle / 3 + 60)
            let started = ContinuousClock.now
            try await Self.expectEndedWithTheSession(alices, since: started)
            graph.publish("data: two\n\n")
            #expect(try await bobs.nextEvent() == "data: two")
            #expect(try await h.count("SELECT count(*)::int AS n FROM sessions") == 2)
            let samples = try await MetricsTests.parse(try await h.scrapeMetrics())
            #expect(MetricsTests.value(samples, "tokengate_proxy_streams_ended_total", ["cause": "session_expired"]) == 1)
            let again = ContinuousClock.now
            #expect(try await h.post("/auth/logout", form: [], bearer: try #require(refreshed.json["access_token"] as? String)).status == 200)
            try await Self.expectEndedWithTheSession(bobs, since: again)
        }
    }

    /// A download is cut (the connection closed short of its length), never ended as if complete;
    /// so is an event stream whose session ends in the middle of an event.
    @Test func aLongDownloadAndAnEventStreamMidEventAreCutWhenTheirSessionEnds() async throws {
        try await AuthFlowHarness.run(
            withGraphAPI: true,
            upstreamOptions: ", path_prefixes: [\"/events\", \"/bytes\"], timeout_seconds: 60",
            transport: .sockets
        ) { h in
            let graph = try #require(h.graph)
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let port = try #require(h.baseURL.split(separator: ":").last.flatMap { UInt16($0) })
            let download = try await StreamingGet(
                port: port,
                target: "/api/graph/bytes?count=50000000&pause_ms=100",
                headers: ["Authorization: Bearer \(token)"]
            )
            #expect(download.status == 200)
            try await download.read(atLeast: 1)
            let events = try await Self.openEvents(h.baseURL, token: token)
            try await Self.expectFlowing(events, graph, "one")
            graph.publish("data: half of an ev")
            while !events.unread.contains("half of an ev") { try await events.read(atLeast: events.received + 1) }
            let started = ContinuousClock.now
            #expect(try await h.post("/auth/logout", form: [], bearer: token).status == 200)
            #expect(try await download.drain() == .cut)
            #expect(download.received < 50_000_000)
            #expect(try await events.drain() == .cut)
            #expect(!events.unread.contains("session_ended"))
            #expect(ContinuousClock.now - started < Self.bound)
        }
    }
}

import Foundation
import TGTesting
import Testing

/// Server-sent events through the proxy (docs/proxy.md, "Server-sent events"): each event
/// reaches the app as the API sends it, not when a buffer fills or the stream ends, and a stream
/// the API keeps alive with heartbeats outlives the API's `timeout_seconds`, which cuts a silent
/// one. Over real sockets: the subject is the connection's bytes as they come.
@Suite struct ServerSentEventsTests {
    @Test func eachEventReachesTheAppBeforeTheAPISendsTheNext() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/events\"]", transport: .sockets) { h in
            let graph = try #require(h.graph)
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let stream = try await StreamSessionEndTests.openEvents(h.baseURL, token: token)
            let head = stream.head.lowercased()
            #expect(head.contains("content-type: text/event-stream"))
            #expect(head.contains("transfer-encoding: chunked") && !head.contains("content-length"))
            // The gate between two events is the app having read the first: a proxy that held
            // events back (until a buffer filled, or the stream ended) would wait here forever.
            for index in 1...20 {
                let sent = ContinuousClock.now
                graph.publish("id: \(index)\nevent: tick\ndata: {\"n\":\(index)}\n\n")
                #expect(try await stream.nextEvent() == "id: \(index)\nevent: tick\ndata: {\"n\":\(index)}")
                #expect(ContinuousClock.now - sent < .seconds(1))
            }
            // An event in pieces is passed on piece by piece.
            graph.publish("data: first half")
            try await stream.read(atLeast: stream.received + 1)
            while !stream.unread.contains("first half") { try await stream.read(atLeast: stream.received + 1) }
            graph.publish(", second half\n\n")
            #expect(try await stream.nextEvent() == "data: first half, second half")
            _ = try await h.post("/auth/logout", form: [], bearer: token)
            #expect(try await stream.drain() == .complete)
        }
    }

    /// The API's `timeout_seconds` (1 s here) bounds how long its body may go quiet: a silent
    /// stream is cut after it, one with a `: heartbeat` comment every 200 ms lives on.
    @Test func heartbeatsKeepAStreamOpenPastTheAPIsTimeoutWhichCutsASilentOne() async throws {
        try await AuthFlowHarness.run(
            withGraphAPI: true,
            upstreamOptions: ", path_prefixes: [\"/events\"], timeout_seconds: 1",
            transport: .sockets
        ) { h in
            let graph = try #require(h.graph)
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let port = try #require(h.baseURL.split(separator: ":").last.flatMap { UInt16($0) })
            let beating = try await StreamingGet(
                port: port,
                target: "/api/graph/events?heartbeat_ms=200",
                headers: ["Authorization: Bearer \(token)"]
            )
            let opened = ContinuousClock.now
            let silent = try await StreamSessionEndTests.openEvents(h.baseURL, token: token)
            #expect(try await silent.drain() == .cut)
            // The idle deadline is checked on the loop's timer, to within a tick.
            #expect(ContinuousClock.now - opened >= .milliseconds(900))
            // Past the timeout, and half as long again: the stream with heartbeats is open.
            try await beating.read(atLeast: beating.received + 1)
            while ContinuousClock.now - opened < .milliseconds(1500) { try await beating.read(atLeast: beating.received + 1) }
            graph.publish("data: still here\n\n")
            #expect(try await beating.nextEvent() == "data: still here")
            // Ended (with the session) before the harness stops: nothing left for its drain.
            _ = try await h.post("/auth/logout", form: [], bearer: token)
            _ = try await beating.drain()
        }
    }

    /// A graceful shutdown (SIGTERM) ends an event stream cleanly at its next event boundary, so
    /// that its app reconnects elsewhere, instead of holding the drain (10 s here) until it is cut.
    @Test func aGracefulShutdownEndsAnEventStreamCleanlyAtItsNextEventWithoutWaitingForTheDrain() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/events\"]", transport: .sockets) { h in
            let graph = try #require(h.graph)
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let second = try await h.startInstance()
            let stream = try await StreamSessionEndTests.openEvents(second.baseURL, token: token)
            graph.publish("data: one\n\ndata: half")
            #expect(try await stream.nextEvent() == "data: one")
            while !stream.unread.contains("half") { try await stream.read(atLeast: stream.received + 1) }
            let started = ContinuousClock.now
            let stopping = Task { await second.stop() }
            // Mid-event when the shutdown began: the event is finished first.
            graph.publish(" and the rest\n\n")
            #expect(try await stream.nextEvent() == "data: half and the rest")
            #expect(try await stream.drain() == .complete)
            await stopping.value
            #expect(ContinuousClock.now - started < .seconds(5))
        }
    }
}

import Foundation
import TGApp
import TGAppTesting
import TGHTTPServer
import TGProxy
import TGTesting
import Testing

/// WebSocket through the proxy (docs/proxy.md, "WebSocket"): the app's connection and the API's
/// relayed both ways with the upstream token on the upgrade request, over real sockets; the
/// connection ends with its session, on whichever instance holds it, and with the instance.
@Suite struct WebSocketProxyTests {
    static let origin = "https://app.example.com"

    /// The harness with a WebSocket API `ws` beside `graph` (`options` adds to its settings).
    static func run(
        options: String = "",
        serverOptions: String = "",
        _ body: (AuthFlowHarness, FakeWebSocketAPI) async throws -> Void
    ) async throws {
        let api = try FakeWebSocketAPI()
        defer { api.stop() }
        let entry =
            "{ name: ws, base_url: \"\(api.baseURL)\", provider: fake, scopes: [User.Read], websocket: true, "
            + "websocket_origins: [\"\(origin)\"]\(options) }"
        try await AuthFlowHarness.run(serverOptions: serverOptions, withGraphAPI: true, moreUpstreams: [entry], transport: .sockets) { h in
            api.requireBearer { [fake = h.fake] token in fake.subject(ofAccessToken: token) != nil }
            try await body(h, api)
        }
    }

    static func port(_ base: String) throws -> UInt16 {
        try #require(base.split(separator: ":").last.flatMap { UInt16($0) })
    }

    /// Opens `path` on the gateway at `base` (off the cooperative pool: the client blocks).
    static func open(
        _ base: String,
        _ path: String,
        token: String?,
        headers: [(String, String)] = [],
        receiveBuffer: Int? = nil
    ) async throws -> (client: WebSocketTestClient?, answer: WebSocketTestClient.Answer) {
        let port = try port(base)
        let fields = (token.map { [("Authorization", "Bearer \($0)")] } ?? []) + headers
        return try await offPool { try WebSocketTestClient.connect(port: port, path: path, headers: fields, receiveBuffer: receiveBuffer) }
    }

    static func openEcho(_ base: String, token: String) async throws -> WebSocketTestClient {
        let (client, answer) = try await open(base, "/api/ws/echo", token: token)
        #expect(answer.status == 101, "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
        return try #require(client)
    }

    static func exchange(_ client: WebSocketTestClient, _ frame: WebSocketFrame) async throws -> WebSocketFrame {
        try await offPool {
            try client.send(frame)
            return try client.receive()
        }
    }

    static func problemCode(_ answer: WebSocketTestClient.Answer) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["code"] as? String
    }

    @Test func textBinaryPingFragmentsAndCloseEchoThroughTheProxyWithTheUpstreamTokenInsteadOfTheApps() async throws {
        try await Self.run { h, api in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let client = try await Self.openEcho(h.baseURL, token: token)
            // The API saw the upstream token (the fake provider's, for alice), never the app's.
            let upgrade = try #require(api.upgrades.first)
            let bearer = try #require(upgrade.header("authorization")?.split(separator: " ").last.map(String.init))
            #expect(bearer != token)
            #expect(h.fake.subject(ofAccessToken: bearer) == "alice")
            #expect(upgrade.header("x-request-id") != nil)
            #expect(upgrade.path == "/echo")

            #expect(try await Self.exchange(client, .text("hello")) == .text("hello"))
            let large = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
            #expect(try await Self.exchange(client, .binary(large)) == .binary(large))
            #expect(try await Self.exchange(client, .ping(Array("are you there".utf8))) == .pong(Array("are you there".utf8)))
            let parts = try await offPool {
                try client.send(WebSocketFrame(fin: false, opcode: 1, payload: Array("Hel".utf8)))
                try client.send(.ping([1, 2, 3]))
                try client.send(WebSocketFrame(fin: false, opcode: 0, payload: Array("lo, ".utf8)))
                try client.send(WebSocketFrame(fin: true, opcode: 0, payload: Array("world".utf8)))
                return try (0..<4).map { _ in try client.receive() }
            }
            #expect(
                parts == [
                    WebSocketFrame(fin: false, opcode: 1, payload: Array("Hel".utf8)), .pong([1, 2, 3]),
                    WebSocketFrame(fin: false, opcode: 0, payload: Array("lo, ".utf8)),
                    WebSocketFrame(fin: true, opcode: 0, payload: Array("world".utf8)),
                ]
            )
            let (frames, closed) = try await offPool {
                try client.send(.close(code: 1000, reason: "bye"))
                return try client.readUntilEOF()
            }
            #expect(frames == [.close(code: 1000, reason: "bye")])
            #expect(closed)
            #expect(api.closesReceived.map(\.code) == [1000])
            try await eventually("the gateway let both connections go") {
                h.server.requestsInFlight == 0 && api.openConnections == 0
            }
        }
    }

    @Test func handshakesTheProxyRefusesSayWhyAndNeverReachTheAPI() async throws {
        try await Self.run { h, api in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let foreign = try await Self.open(h.baseURL, "/api/ws/echo", token: token, headers: [("Origin", "https://evil.example")])
            #expect(foreign.answer.status == 403)
            #expect(Self.problemCode(foreign.answer) == "origin_not_allowed")
            let notEnabled = try await Self.open(h.baseURL, "/api/graph/me", token: token)
            #expect(notEnabled.answer.status == 400)
            #expect(Self.problemCode(notEnabled.answer) == "websocket_not_enabled")
            let version = try await Self.open(h.baseURL, "/api/ws/echo", token: token, headers: [("Sec-WebSocket-Version", "8")])
            #expect(version.answer.status == 426)
            #expect(version.answer.header("sec-websocket-version") == "13")
            let badKey = try await Self.open(h.baseURL, "/api/ws/echo", token: token, headers: [("Sec-WebSocket-Key", "short")])
            #expect(badKey.answer.status == 400)
            #expect(Self.problemCode(badKey.answer) == "invalid_websocket_request")
            let anonymous = try await Self.open(h.baseURL, "/api/ws/echo", token: nil)
            #expect(anonymous.answer.status == 401)
            let wrongToken = try await Self.open(h.baseURL, "/api/ws/echo", token: "not-a-token")
            #expect(wrongToken.answer.status == 401)
            #expect(api.upgrades.isEmpty)
            // A listed Origin (a web page of the app's) is taken.
            let listed = try await Self.open(h.baseURL, "/api/ws/echo", token: token, headers: [("Origin", Self.origin)])
            #expect(listed.answer.status == 101)
            #expect(api.upgrades.count == 1)
            listed.client?.close()
        }
    }

    @Test func anAPIThatRefusesTheUpgradeIsAnsweredAsAnyCallAStepUpChallengeIncluded() async throws {
        try await Self.run { h, api in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            api.refuseUpgrades(status: 403, headers: [("Content-Type", "application/json")], body: #"{"error":"not for you"}"#)
            let refused = try await Self.open(h.baseURL, "/api/ws/echo", token: token)
            #expect(refused.answer.status == 403)
            #expect(String(decoding: refused.answer.body, as: UTF8.self) == #"{"error":"not for you"}"#)
            api.refuseUpgrades(
                status: 401,
                headers: [("WWW-Authenticate", #"Bearer error="insufficient_user_authentication", acr_values="urn:example:mfa""#)]
            )
            let stepUp = try await Self.open(h.baseURL, "/api/ws/echo", token: token)
            #expect(stepUp.answer.status == 401)
            #expect(Self.problemCode(stepUp.answer) == "step_up_required")
            api.acceptUpgrades()
            let client = try await Self.openEcho(h.baseURL, token: token)
            #expect(try await Self.exchange(client, .text("again")) == .text("again"))
            client.close()
        }
    }

    @Test func anAPIThatRefusesTheTokenOnTheUpgradeGetsOneMoreTryWithAFreshOne() async throws {
        try await Self.run { h, api in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            try await Self.openEcho(h.baseURL, token: token).close()
            let refused = try #require(Self.bearer(of: api.upgrades.last))
            // The API stops taking that token (revoked, or its keys rotated).
            api.requireBearer { [fake = h.fake] presented in presented != refused && fake.subject(ofAccessToken: presented) != nil }
            let client = try await Self.openEcho(h.baseURL, token: token)
            #expect(api.upgrades.count == 3)
            let fresh = try #require(Self.bearer(of: api.upgrades.last))
            #expect(fresh != refused)
            #expect(try await Self.exchange(client, .text("with a fresh token")) == .text("with a fresh token"))
            client.close()
        }
    }

    static func bearer(of upgrade: FakeWebSocketAPI.Upgrade?) -> String? {
        upgrade?.header("authorization")?.split(separator: " ").last.map(String.init)
    }

    @Test func aSlowReaderHoldsTheAPIBackInsteadOfFillingTheGatewaysMemory() async throws {
        try await Self.run { h, api in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            // Frames of 4 MiB, each far larger than what the relay holds: frames are never held whole.
            let size = 4 << 20
            let count = 16  // 64 MiB in all
            let (opened, answer) = try await Self.open(h.baseURL, "/api/ws/flood?size=\(size)&count=\(count)", token: token, receiveBuffer: 16 * 1024)
            #expect(answer.status == 101)
            let client = try #require(opened)
            // The app reads nothing: the API's writes stall once the buffers on the way are full.
            var last = -1
            try await eventually("the flood stalls", every: .milliseconds(200)) {
                let now = api.floodBytesWritten
                defer { last = now }
                return now == last && now > 0
            }
            // Kernel buffers on both connections and the relay's 64 KiB: a few MiB, not 128.
            #expect(api.floodBytesWritten < 24 << 20, "\(api.floodBytesWritten) bytes written while the app read nothing")
            // Then the app reads it all, every frame whole and in order.
            let received = try await offPool {
                var frames = 0
                while frames < count {
                    let frame = try client.receive(timeout: .seconds(30))
                    guard frame.opcode == 2, frame.payload.count == size, frame.payload.allSatisfy({ $0 == UInt8(frames & 0xFF) }) else { break }
                    frames += 1
                }
                return frames
            }
            #expect(received == count)
            #expect(try await offPool { try client.receive() } == .close(code: 1000, reason: "done"))
            client.close()
        }
    }

    /// Reads what remains: the close frame the gateway sent, then the end of the connection.
    static func expectClosedByTheGateway(_ client: WebSocketTestClient, code: UInt16, since started: ContinuousClock.Instant) async throws {
        let (frames, closed) = try await offPool { try client.readUntilEOF() }
        #expect(frames.last?.closeCode == code, "\(frames)")
        #expect(closed)
        #expect(ContinuousClock.now - started < StreamSessionEndTests.bound)
    }

    @Test func aLogoutOnOneInstanceClosesTheWebSocketHeldOnAnotherWith1008() async throws {
        try await Self.run { h, api in
            let alice = try #require(try await h.logIn(as: "alice")["access_token"] as? String)
            let bob = try #require(try await h.logIn(as: "bob")["access_token"] as? String)
            let second = try await h.startInstance()
            let onSecond = try await Self.openEcho(second.baseURL, token: alice)
            let bobs = try await Self.openEcho(h.baseURL, token: bob)
            #expect(try await Self.exchange(onSecond, .text("one")) == .text("one"))
            #expect(second.gateway.assembly.streams.count == 1)

            let started = ContinuousClock.now
            #expect(try await h.post("/auth/logout", form: [], bearer: alice).status == 200)
            try await Self.expectClosedByTheGateway(onSecond, code: 1008, since: started)
            // The API heard it too, with the same code; another session's WebSocket goes on.
            try await eventually("the API got the close frame") { api.closesReceived.map(\.code) == [1008] }
            #expect(try await Self.exchange(bobs, .text("still here")) == .text("still here"))
            try await eventually("the second instance let the connection go") { second.gateway.assembly.streams.count == 0 }
            bobs.close()
            await second.stop()
        }
    }

    /// The other ways a session ends reach a WebSocket as they reach a stream: a back-channel
    /// logout, and an account removed (its grant revoked); the metric counts each end.
    @Test func aBackChannelLogoutAndARemovedAccountCloseTheirWebSocketsWith1008() async throws {
        try await Self.run { h, api in
            let alice = try await h.logIn(as: "alice")
            let aliceToken = try #require(alice["access_token"] as? String)
            let bob = try await h.logIn(as: "bob")
            let bobToken = try #require(bob["access_token"] as? String)
            let bobAccount = try #require((bob["account"] as? [String: Any])?["id"] as? String)
            let alices = try await Self.openEcho(h.baseURL, token: aliceToken)
            let bobs = try await Self.openEcho(h.baseURL, token: bobToken)

            var started = ContinuousClock.now
            let sid = try #require(h.fake.sessionIDs(of: "alice").first)
            let logout = try await h.post(
                "/auth/backchannel-logout/fake",
                form: [("logout_token", try h.fake.logoutToken(subject: "alice", sessionID: sid))]
            )
            #expect(logout.status == 200)
            try await Self.expectClosedByTheGateway(alices, code: 1008, since: started)
            #expect(try await Self.exchange(bobs, .text("bob goes on")) == .text("bob goes on"))

            started = ContinuousClock.now
            #expect(try await h.delete("/auth/accounts/\(bobAccount)", bearer: bobToken).status == 204)
            try await Self.expectClosedByTheGateway(bobs, code: 1008, since: started)
            try await eventually("the API got both close frames") { api.closesReceived.map(\.code) == [1008, 1008] }
            let samples = try await MetricsTests.parse(try await h.scrapeMetrics())
            #expect(MetricsTests.value(samples, "tokengate_proxy_streams_ended_total", ["cause": "session_ended"]) == 2)
            #expect(MetricsTests.value(samples, "tokengate_proxy_streams_open") == 0)
        }
    }

    @Test func aSessionEndMidFrameLetsTheFrameFinishBeforeTheAPIGetsItsCloseFrame() async throws {
        try await Self.run { h, api in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let client = try await Self.openEcho(h.baseURL, token: token)
            let frame = WebSocketFrames.encode(.binary([UInt8](repeating: 7, count: 10_000)), masked: true)
            try await offPool { try client.sendRaw(Array(frame[..<5_000])) }
            #expect(try await h.post("/auth/logout", form: [], bearer: token).status == 200)
            // The app's side was between frames: its close frame comes at once.
            let close = try await offPool { try client.receive() }
            #expect(close.closeCode == 1008)
            #expect(close.closeReason == "session ended")
            // The API's side waits for the frame to end; then its close frame follows it, which
            // the API reads as a frame of its own (a close put inside the frame would not be).
            try await offPool { try client.sendRaw(Array(frame[5_000...])) }
            try await eventually("the API got the close frame after the whole frame") { api.closesReceived.map(\.code) == [1008] }
            let (_, closed) = try await offPool { try client.readUntilEOF() }
            #expect(closed)
        }
    }

    @Test func aGracefulShutdownClosesWebSocketsWith1001WithoutWaitingForTheDrain() async throws {
        try await Self.run { h, api in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let second = try await h.startInstance()
            let client = try await Self.openEcho(second.baseURL, token: token)
            #expect(try await Self.exchange(client, .text("before")) == .text("before"))
            let started = ContinuousClock.now
            let stopping = Task { await second.stop() }
            try await Self.expectClosedByTheGateway(client, code: 1001, since: started)
            await stopping.value
            #expect(ContinuousClock.now - started < .seconds(5))
            try await eventually("the API got the close frame") { api.closesReceived.map(\.code) == [1001] }
        }
    }

    @Test func aQuietWebSocketOutlivesTheServersIdleConnectionTimeout() async throws {
        // The server closes idle HTTP connections after a second here; a WebSocket is not one.
        try await Self.run(serverOptions: ", connection_timeout_seconds: 1, request_head_timeout_seconds: 1") { h, _ in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let client = try await Self.openEcho(h.baseURL, token: token)
            try await Task.sleep(for: .milliseconds(2_500))
            #expect(try await Self.exchange(client, .text("still open")) == .text("still open"))
            client.close()
        }
    }

    @Test func aWebSocketOnWhichNothingMovesForTheIdleTimeoutIsClosedWith1001() async throws {
        try await Self.run(options: ", websocket_idle_timeout_seconds: 1") { h, api in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let client = try await Self.openEcho(h.baseURL, token: token)
            // Traffic keeps it open past the timeout...
            for index in 0..<3 {
                try await Task.sleep(for: .milliseconds(400))
                #expect(try await Self.exchange(client, .text("\(index)")) == .text("\(index)"))
            }
            // ...silence ends it.
            let (frames, closed) = try await offPool { try client.readUntilEOF(timeout: .seconds(3)) }
            #expect(frames.last?.closeCode == 1001)
            #expect(frames.last?.closeReason == "idle timeout")
            #expect(closed)
            try await eventually("the API got the close frame") { api.closesReceived.map(\.code) == [1001] }
        }
    }
}

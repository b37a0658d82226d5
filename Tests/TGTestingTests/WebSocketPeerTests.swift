import Foundation
import Testing

@testable import TGTesting

/// The WebSocket test peers against each other, without a gateway between them: the frame codec,
/// the handshake, and the fake API's echo, flood and refusals as the test client sees them.
@Suite struct WebSocketPeerTests {
    /// RFC 6455, section 1.3: the sample key and the accept value it gives.
    @Test func theAcceptValueOfRFC6455sSampleKeyIsItsSampleAnswer() {
        #expect(WebSocketFrames.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func sha1MatchesTheFIPSTestVectorsOfOneAndTwoBlocks() {
        let hex = { (bytes: [UInt8]) in bytes.map { String(format: "%02x", $0) }.joined() }
        #expect(hex(WebSocketFrames.sha1(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(hex(WebSocketFrames.sha1([])) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        let twoBlocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(hex(WebSocketFrames.sha1(Array(twoBlocks.utf8))) == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
    }

    @Test func randomKeysAreSixteenBytesInBase64AndDiffer() {
        let key = WebSocketFrames.randomKey()
        #expect(Data(base64Encoded: key)?.count == 16)
        #expect(key != WebSocketFrames.randomKey())
    }

    @Test(arguments: [(0, 2), (125, 2), (126, 4), (65_535, 4), (65_536, 10), (70_000, 10)])
    func framesRoundTripWithTheLengthEncodingTheirSizeNeeds(size: Int, headerBytes: Int) throws {
        let frame = WebSocketFrame(fin: false, opcode: 2, payload: (0..<size).map { UInt8(truncatingIfNeeded: $0 * 7) })
        for masked in [false, true] {
            var bytes = WebSocketFrames.encode(frame, masked: masked)
            #expect(bytes.count == headerBytes + (masked ? 4 : 0) + size)
            #expect(bytes[1] & 0x80 == (masked ? 0x80 : 0))
            var partial = Array(bytes.dropLast())
            #expect(try WebSocketFrames.decode(&partial) == nil)
            #expect(partial.count == bytes.count - 1)
            bytes += [0x89, 0x00]
            let decoded = try #require(try WebSocketFrames.decode(&bytes))
            #expect(decoded.frame == frame)
            #expect(decoded.masked == masked)
            #expect(bytes == [0x89, 0x00])
        }
    }

    @Test func closeFramesCarryTheirCodeAndReason() {
        let close = WebSocketFrame.close(code: 4001, reason: "bye")
        #expect(close.payload == [0x0F, 0xA1] + Array("bye".utf8))
        #expect(close.closeCode == 4001)
        #expect(close.closeReason == "bye")
        #expect(WebSocketFrame(opcode: 8, payload: []).closeCode == nil)
        #expect(WebSocketFrame.text("x").closeCode == nil)
    }

    @Test func theEchoPathUpgradesAndEchoesTextAndBinaryFramesUnmasked() throws {
        try withAPI { api in
            let (client, answer) = try WebSocketTestClient.connect(port: api.port, path: "/v1/echo", headers: [("Origin", "https://app.example")])
            let socket = try #require(client)
            #expect(answer.status == 101)
            #expect(answer.header("Upgrade")?.lowercased() == "websocket")
            #expect(answer.header("connection")?.lowercased() == "upgrade")
            try socket.send(.text("héllo"))
            #expect(try socket.receive() == .text("héllo"))
            #expect(throws: WebSocketTestError.self) { try socket.receive(timeout: .milliseconds(100)) }
            try socket.send(.binary([0, 1, 255]))
            #expect(try socket.receive() == .binary([0, 1, 255]))
            #expect(api.upgrades.map(\.path) == ["/v1/echo"])
            #expect(api.upgrades.first?.header("ORIGIN") == "https://app.example")
            #expect(api.openConnections == 1)
        }
    }

    @Test func fragmentsComeBackWithTheirFinAndOpcode() throws {
        try withAPI { api in
            let socket = try #require(try WebSocketTestClient.connect(port: api.port, path: "/echo").client)
            let parts = [WebSocketFrame(fin: false, opcode: 1, payload: Array("Hel".utf8)), WebSocketFrame(opcode: 0, payload: Array("lo".utf8))]
            try socket.sendRaw(parts.flatMap { WebSocketFrames.encode($0, masked: true) })
            #expect(try socket.receive() == parts[0])
            #expect(try socket.receive() == parts[1])
        }
    }

    @Test func aPingGetsAPongWithItsPayload() throws {
        try withAPI { api in
            let socket = try #require(try WebSocketTestClient.connect(port: api.port, path: "/echo").client)
            try socket.send(.ping([1, 2, 3]))
            #expect(try socket.receive() == .pong([1, 2, 3]))
        }
    }

    @Test func aCloseIsAnsweredWithItsCodeAndReasonAndTheConnectionEnds() throws {
        try withAPI { api in
            let socket = try #require(try WebSocketTestClient.connect(port: api.port, path: "/echo").client)
            try socket.send(.close(code: 4001, reason: "bye"))
            let (frames, closed) = try socket.readUntilEOF()
            #expect(frames == [.close(code: 4001, reason: "bye")])
            #expect(closed)
            #expect(api.closesReceived.map(\.code) == [4001])
            #expect(api.closesReceived.map(\.reason) == ["bye"])
            #expect(throws: WebSocketTestError.self) { try socket.receive() }
            #expect(eventually { api.openConnections == 0 })
        }
    }

    @Test func aFrameOf70000BytesTravelsWithA64BitLength() throws {
        try withAPI { api in
            let socket = try #require(try WebSocketTestClient.connect(port: api.port, path: "/echo").client)
            let frame = WebSocketFrame.binary((0..<70_000).map { UInt8(truncatingIfNeeded: $0) })
            #expect(WebSocketFrames.encode(frame, masked: true)[1] == 0x80 | 127)
            try socket.send(frame)
            #expect(try socket.receive() == frame)
        }
    }

    @Test func anUnmaskedFrameFromTheClientEndsTheConnectionWithClose1002() throws {
        try withAPI { api in
            let socket = try #require(try WebSocketTestClient.connect(port: api.port, path: "/echo").client)
            try socket.sendRaw(WebSocketFrames.encode(.text("plain"), masked: false))
            let (frames, closed) = try socket.readUntilEOF()
            #expect(frames.map(\.closeCode) == [1002])
            #expect(closed)
        }
    }

    @Test func aFloodOf100FramesOf1000BytesArrivesInFullThenCloses() throws {
        try withAPI { api in
            let socket = try #require(
                try WebSocketTestClient.connect(port: api.port, path: "/api/flood?size=1000&count=100", receiveBuffer: 4096).client
            )
            for index in 0..<100 {
                let frame = try socket.receive()
                #expect(frame == .binary([UInt8](repeating: UInt8(index), count: 1000)))
            }
            let close = try socket.receive()
            #expect(close.closeCode == 1000)
            #expect(close.closeReason == "done")
            #expect(api.floodBytesWritten == 100_000)
            try socket.send(.close(code: 1000, reason: ""))
            let (frames, closed) = try socket.readUntilEOF()
            #expect(frames.isEmpty)
            #expect(closed)
            #expect(api.closesReceived.map(\.code) == [1000])
        }
    }

    @Test func refusedUpgradesGetTheChosenStatusHeadersAndBodyUntilAcceptedAgain() throws {
        try withAPI { api in
            api.refuseUpgrades(status: 403, headers: [("X-Why", "closed today")], body: "no sockets")
            let (client, answer) = try WebSocketTestClient.connect(port: api.port, path: "/echo")
            #expect(client == nil)
            #expect(answer.status == 403)
            #expect(answer.header("x-why") == "closed today")
            #expect(answer.body == Array("no sockets".utf8))
            api.acceptUpgrades()
            #expect(try WebSocketTestClient.connect(port: api.port, path: "/echo").answer.status == 101)
            #expect(api.upgrades.count == 2)
        }
    }

    @Test func aTokenTheBearerCheckRefusesGets401WithInvalidToken() throws {
        try withAPI { api in
            api.requireBearer { $0 == "good" }
            let refused = try WebSocketTestClient.connect(port: api.port, path: "/echo", headers: [("Authorization", "Bearer bad")])
            #expect(refused.client == nil)
            #expect(refused.answer.status == 401)
            #expect(refused.answer.header("www-authenticate") == #"Bearer error="invalid_token""#)
            #expect(try WebSocketTestClient.connect(port: api.port, path: "/echo").answer.status == 401)
            let accepted = try WebSocketTestClient.connect(port: api.port, path: "/echo", headers: [("Authorization", "Bearer good")])
            #expect(accepted.answer.status == 101)
            #expect(accepted.client != nil)
        }
    }

    @Test func aRequestWithoutTheUpgradeHeadersGets400AndAnUnknownPath404() throws {
        try withAPI { api in
            let bare = try WebSocketTestClient.connect(port: api.port, path: "/echo", omitUpgradeHeaders: true)
            #expect(bare.client == nil)
            #expect(bare.answer.status == 400)
            #expect(!bare.answer.body.isEmpty)
            #expect(api.upgrades.first?.header("upgrade") == nil)
            let oldVersion = try WebSocketTestClient.connect(port: api.port, path: "/echo", headers: [("Sec-WebSocket-Version", "8")])
            #expect(oldVersion.answer.status == 400)
            #expect(try WebSocketTestClient.connect(port: api.port, path: "/nowhere").answer.status == 404)
        }
    }

    @Test func theFirstOfferedSubprotocolIsEchoedAndAGivenKeyIsUsed() throws {
        try withAPI { api in
            let (client, answer) = try WebSocketTestClient.connect(
                port: api.port,
                path: "/echo",
                headers: [("Sec-WebSocket-Protocol", "chat, superchat"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]
            )
            #expect(client != nil)
            #expect(answer.header("sec-websocket-protocol") == "chat")
            #expect(answer.header("sec-websocket-accept") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
            #expect(api.upgrades.first?.header("sec-websocket-key") == "dGhlIHNhbXBsZSBub25jZQ==")
        }
    }

    @Test func stoppingEndsOpenConnections() throws {
        let api = try FakeWebSocketAPI()
        let socket = try #require(try WebSocketTestClient.connect(port: api.port, path: "/echo").client)
        #expect(api.openConnections == 1)
        api.stop()
        #expect(api.openConnections == 0)
        #expect(try socket.readUntilEOF().closed)
        #expect(throws: WebSocketTestError.self) { try WebSocketTestClient.connect(port: api.port, path: "/echo") }
    }

    private func withAPI(_ body: (FakeWebSocketAPI) throws -> Void) throws {
        let api = try FakeWebSocketAPI()
        defer { api.stop() }
        try body(api)
    }

    /// Whether `condition` holds within 2 s.
    private func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(2)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            usleep(2000)
        }
        return true
    }
}

import Foundation
import HTTPTypes
import Synchronization
import TGEventLoop
import TGHTTPServer
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A handler that takes the connection after the 101: it keeps the bytes the client sent early,
/// writes a greeting on the raw socket, and hands the connection back.
final class GreetingUpgrade: ConnectionUpgradeHandler {
    let early = Mutex<[UInt8]?>(nil)
    let outcome = Mutex<String?>(nil)

    func upgraded(_ connection: UpgradedConnection) {
        early.withLock { $0 = connection.early }
        let greeting = Array("hello over the raw socket".utf8)
        let sent = greeting.withUnsafeBytes { send(connection.socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        outcome.withLock { $0 = sent == greeting.count ? "upgraded" : "short write" }
        connection.close()
    }

    func abandoned() {
        outcome.withLock { $0 = "abandoned" }
    }
}

/// A handler that keeps the connection open until the server stops.
final class HoldingUpgrade: ConnectionUpgradeHandler {
    let stopped = Mutex(false)
    let held = Mutex<UpgradedConnection?>(nil)

    func upgraded(_ connection: UpgradedConnection) {
        connection.onServerStop = { [self] in stopped.withLock { $0 = true } }
        held.withLock { $0 = connection }
    }

    func abandoned() {}
}

@Suite struct ConnectionUpgradeTests {
    static func upgradeAnswer(_ handler: GreetingUpgrade) -> ServerResponse {
        ServerResponse(status: .switchingProtocols, headerFields: [.upgrade: "greeting"], body: .upgrade(handler))
    }

    @Test func anUpgradeAnswerHandsTheConnectionAndItsEarlyBytesToItsHandlerAndTheRequestCompletesWhenClosed() async throws {
        let handler = GreetingUpgrade()
        let server = try startServer({ $0.allowsUpgrade = true }, handler: { _ in .response(Self.upgradeAnswer(handler)) })
        let connection = try RawConnection(port: server.port)
        // Bytes after the request head, sent before any answer: the handler gets them.
        try await connection.send("GET /switch HTTP/1.1\r\nHost: x\r\nUpgrade: greeting\r\nConnection: Upgrade\r\n\r\nearly bytes")
        let answer = try await connection.readUntilClose()
        #expect(answer.hasPrefix("HTTP/1.1 101 Switching Protocols\r\n"), "\(answer)")
        let head = answer.lowercased()
        #expect(head.contains("\r\nupgrade: greeting\r\n"))
        #expect(head.contains("\r\nconnection: upgrade\r\n"))
        #expect(answer.hasSuffix("\r\n\r\nhello over the raw socket"))
        #expect(handler.outcome.withLock { $0 } == "upgraded")
        #expect(handler.early.withLock { $0 }.map { String(decoding: $0, as: UTF8.self) } == "early bytes")
        try await waitUntil("the upgraded request completed") { server.requestsInFlight == 0 }
        await server.shutdown()
    }

    @Test func stoppingTheServerTellsAnUpgradedConnectionsHandlerAndClosesIt() async throws {
        let handler = HoldingUpgrade()
        // An upgraded connection is in flight until it closes: the drain waits for it, then ends.
        let server = try startServer(
            {
                $0.allowsUpgrade = true
                $0.drainTimeout = .milliseconds(200)
            },
            handler: { _ in .response(ServerResponse(status: .switchingProtocols, headerFields: [.upgrade: "held"], body: .upgrade(handler))) }
        )
        let connection = try RawConnection(port: server.port)
        try await connection.send("GET /hold HTTP/1.1\r\nHost: x\r\nUpgrade: held\r\nConnection: Upgrade\r\n\r\n")
        try await waitUntil("the handler holds the connection") { handler.held.withLock { $0 } != nil }
        await server.shutdown()
        #expect(handler.stopped.withLock { $0 })
        #expect(try await connection.readUntilClose().hasPrefix("HTTP/1.1 101"))
    }

    @Test func aServerThatDoesNotAllowUpgradesAnswers500AndTheHandlerLetsGo() async throws {
        let handler = GreetingUpgrade()
        let server = try startServer { _ in .response(Self.upgradeAnswer(handler)) }
        let connection = try RawConnection(port: server.port)
        try await connection.send("GET /switch HTTP/1.1\r\nHost: x\r\nUpgrade: greeting\r\nConnection: Upgrade\r\n\r\n")
        let answer = try await connection.readResponse()
        #expect(answer.hasPrefix("HTTP/1.1 500"), "\(answer)")
        #expect(handler.outcome.withLock { $0 } == "abandoned")
        await server.shutdown()
    }

    @Test func anUpgradeThatComesAfterTheDeadlinesAnswerIsAbandoned() async throws {
        let handler = GreetingUpgrade()
        let answer = Mutex<LoopResponder?>(nil)
        let server = try startServer(
            {
                $0.allowsUpgrade = true
                $0.requestTimeout = .milliseconds(200)
            },
            handler: { _ in .deferred { responder in answer.withLock { $0 = responder } } }
        )
        let connection = try RawConnection(port: server.port)
        try await connection.send("GET /switch HTTP/1.1\r\nHost: x\r\nUpgrade: greeting\r\nConnection: Upgrade\r\n\r\n")
        #expect(try await connection.readResponse().hasPrefix("HTTP/1.1 503"))
        // The deadline answered first: the upgrade comes too late, and its handler is told.
        answer.withLock { $0 }?.respond(Self.upgradeAnswer(handler))
        try await waitUntil("the handler let go") { handler.outcome.withLock { $0 } == "abandoned" }
        await server.shutdown()
    }
}

extension RawConnection {
    /// Everything the server sends until it closes the connection.
    func readUntilClose() async throws -> String {
        try await offPool {
            var buffer: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = recv(self.fd, &chunk, chunk.count, 0)
                if n <= 0 { return String(decoding: buffer, as: UTF8.self) }
                buffer.append(contentsOf: chunk[0..<n])
            }
        }
    }
}

/// Polls `condition` for up to ten seconds (the server's side of a connection moves on its loop).
private func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < deadline {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    Issue.record("timed out waiting until \(what)")
}

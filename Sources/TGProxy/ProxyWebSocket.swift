import Foundation
import HTTPTypes
import TGEventLoop
import TGHTTPClient
import TGHTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// An app's WebSocket opening handshake (RFC 6455 §4.2.1) as the proxy checks it before any
/// credential is loaded: a GET with `Upgrade: websocket`, `Connection: Upgrade`, version 13
/// and a key; an `Origin`, when there is one, among the API's `websocket_origins`. The key,
/// the offered subprotocols and extensions go to the API unchanged (its 101 answers them, and
/// the app checks that answer).
struct WebSocketHandshake: Sendable {
    /// Whether `request` asks for a WebSocket (`Upgrade` names `websocket`).
    static func isRequested(_ request: ServerRequest) -> Bool {
        request.fields.values(.upgrade).contains { Self.tokens($0).contains("websocket") }
    }

    /// Checks the handshake for `upstream`; throws what is wrong with it.
    static func check(_ request: ServerRequest, upstream: ProxyUpstream.Settings) throws(ProxyError) {
        guard upstream.webSocket else { throw .webSocketNotEnabled }
        guard request.method == .get else { throw .webSocketInvalid("a WebSocket opens with GET") }
        guard request.fields.values(.connection).contains(where: { Self.tokens($0).contains("upgrade") }) else {
            throw .webSocketInvalid("the Connection field must name Upgrade")
        }
        guard request.fields.first(.secWebSocketVersion)?.trimmingCharacters(in: .whitespaces) == "13" else {
            throw .webSocketVersion
        }
        let key = request.fields.first(.secWebSocketKey)?.trimmingCharacters(in: .whitespaces) ?? ""
        guard let decoded = Data(base64Encoded: key), decoded.count == 16 else {
            throw .webSocketInvalid("Sec-WebSocket-Key must be 16 bytes in base64")
        }
        guard request.body.isEmpty, request.bodyStream == nil, !request.fields.contains(.contentLength) || request.fields.first(.contentLength) == "0"
        else {
            throw .webSocketInvalid("a WebSocket handshake has no body")
        }
        if let origin = request.fields.first(.origin) {
            let wanted = origin.trimmingCharacters(in: .whitespaces).lowercased()
            guard upstream.webSocketOrigins.contains(where: { $0.lowercased() == wanted }) else { throw .webSocketOriginNotAllowed }
        }
    }

    /// A field's comma-separated tokens, lowercased.
    private static func tokens(_ value: String) -> [String] {
        value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }

    /// The upgrade request as written on the API's connection: the request line, `Host`,
    /// `Upgrade` and `Connection`, the lines every proxied call carries (the app's fields but
    /// the managed ones: its key, version, subprotocols and extensions among them; the
    /// configured ones; forwarding; the request id) and the upstream token last.
    static func upstreamRequest(path: String, authority: String, lines: HeaderLines, token: String) -> [UInt8]? {
        var bearer = HeaderLines(capacity: 32 + token.utf8.count)
        guard bearer.appendBearer(token) else { return nil }
        var bytes = Array("GET \(path) HTTP/1.1\r\nHost: \(authority)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n".utf8)
        bytes += lines.wireBytes
        bytes += bearer.wireBytes
        bytes += [0x0D, 0x0A]
        return bytes
    }

    /// The API's answer is a WebSocket's 101: `Upgrade: websocket` and an accept value.
    static func switched(_ head: RawHead) -> Bool {
        var upgrade = false
        var accept = false
        head.forEachField { name, value in
            let value = String(decoding: value, as: UTF8.self)
            if RawHeaderFields.equalsIgnoringCase(name, "upgrade") { upgrade = upgrade || tokens(value).contains("websocket") }
            if RawHeaderFields.equalsIgnoringCase(name, "sec-websocket-accept") { accept = !value.isEmpty }
        }
        return head.status == 101 && upgrade && accept
    }
}

extension HTTPField.Name {
    static let secWebSocketKey = HTTPField.Name("Sec-WebSocket-Key")!
    static let secWebSocketVersion = HTTPField.Name("Sec-WebSocket-Version")!
}

/// Writes a WebSocket's upgrade request on a fresh ``UpstreamTunnel`` and reads the API's
/// answer: its head (at most ``maxHead`` bytes) and, for an answer that is not a 101, its body
/// when it announces at most ``maxBody`` bytes. On the loop, under the API's timeout.
final class WebSocketOpening: EventLoopWatcher {
    static let maxHead = 16 * 1024
    static let maxBody = 64 * 1024

    /// The head, and the bytes after it (a 101's first frames, or another answer's body).
    typealias Outcome = Result<(head: RawHead, rest: [UInt8]), ProxyError>

    private let tunnel: UpstreamTunnel
    private let loop: EventLoop
    private var request: [UInt8]
    private var written = 0
    private var received: [UInt8] = []
    private var headEnd: Int?
    private var token = -1
    private var timer: EventLoopTimer?
    private var completion: ((Outcome) -> Void)?
    /// Held by itself until it completes (the loop's watch holds it too).
    private var keepAlive: WebSocketOpening?

    private init(tunnel: UpstreamTunnel, loop: EventLoop, request: [UInt8], completion: @escaping (Outcome) -> Void) {
        self.tunnel = tunnel
        self.loop = loop
        self.request = request
        self.completion = completion
    }

    /// Starts on the loop; `completion` runs there once. A failure closes the tunnel.
    static func start(tunnel: UpstreamTunnel, request: [UInt8], timeout: Duration, completion: @escaping (Outcome) -> Void) {
        let opening = WebSocketOpening(tunnel: tunnel, loop: tunnel.loop, request: request, completion: completion)
        opening.keepAlive = opening
        opening.token = opening.loop.watch(tunnel.socket, events: EventLoop.writable | EventLoop.readable, opening)
        opening.timer = opening.loop.schedule(at: EventLoop.now() + EventLoop.nanoseconds(timeout)) { [weak opening] in
            opening?.complete(.failure(.upstreamTimeout))
        }
        opening.advance()
    }

    func ready(_ events: UInt32) {
        advance()
    }

    private func advance() {
        guard completion != nil else { return }
        while written < request.count {
            guard let count = request.withUnsafeBytes({ tunnel.send(UnsafeRawBufferPointer(rebasing: $0[written...])) }) else {
                return complete(.failure(.upstreamUnavailable))
            }
            if count == 0 { return }
            written += count
        }
        if !request.isEmpty {
            // Written: from now on only the answer is waited for.
            request = []
            loop.modify(token, fd: tunnel.socket, events: EventLoop.readable)
        }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let read = buffer.withUnsafeMutableBytes { tunnel.receive(into: $0) }
            switch read {
            case .bytes(let count):
                received.append(contentsOf: buffer[..<count])
                if let outcome = parse(ended: false) { return complete(outcome) }
            case .wait:
                return
            case .end, .failed:
                return complete(parse(ended: true) ?? .failure(.upstreamUnavailable))
            }
        }
    }

    /// The outcome once enough has arrived; nil while more is needed.
    private func parse(ended: Bool) -> Outcome? {
        if headEnd == nil {
            guard let end = Self.blankLine(in: received) else {
                return received.count > Self.maxHead || ended ? .failure(.webSocketRefused("the API's answer head is incomplete or too large")) : nil
            }
            headEnd = end
        }
        guard let headEnd, let head = RawHead(wire: received[..<headEnd]) else {
            return .failure(.webSocketRefused("the API did not answer in HTTP/1.1"))
        }
        let rest = Array(received[(headEnd + 4)...])
        if head.status == 101 { return .success((head, rest)) }
        // Another answer: its body when small and announced, else none.
        guard let length = head.contentLength, length <= Self.maxBody else { return .success((head, [])) }
        if rest.count >= length { return .success((head, Array(rest.prefix(length)))) }
        return ended ? .success((head, [])) : nil
    }

    /// Where `\r\n\r\n` starts.
    private static func blankLine(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 0x0D && bytes[index + 1] == 0x0A && bytes[index + 2] == 0x0D && bytes[index + 3] == 0x0A {
            return index
        }
        return nil
    }

    private func complete(_ outcome: Outcome) {
        guard let completion else { return }
        self.completion = nil
        timer?.cancel()
        timer = nil
        if token >= 0 {
            loop.unwatch(token, fd: tunnel.socket)
            token = -1
        }
        keepAlive = nil
        if case .failure = outcome { tunnel.close() }
        completion(outcome)
    }
}

import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A WebSocket API on 127.0.0.1 (a free port) for the gateway to proxy to, on plain blocking
/// sockets: one thread accepts, one serves each connection (a flood has a second that reads).
///
/// It answers an upgrade as RFC 6455 says (101 with the `Sec-WebSocket-Accept` of the request's
/// key, the first `Sec-WebSocket-Protocol` offered), 400 to a request without a key or without
/// version 13, and 404 to a path it does not know. Its frames are unmasked; a client's frame that
/// is not masked ends the connection with close 1002. Paths (any prefix, a query after):
/// - `…/echo`: each data frame (text, binary, continuation) comes back with the same FIN, opcode
///   and payload; a ping gets a pong with its payload; a close gets a close with the same code
///   and reason, then the connection closes.
/// - `…/flood?size=N&count=M`: M binary frames of N bytes, as fast as the socket takes them
///   (every byte of frame i is `UInt8(i & 0xFF)`), then close 1000 "done". It reads meanwhile
///   (dropping all but a close): a close from the peer stops the flood after the frame being
///   written and is answered in kind; the connection ends once the flood is over and the peer's
///   close (or end) has come.
///
/// Call ``stop()`` when done: the threads keep the API alive until then.
public final class FakeWebSocketAPI: Sendable {
    /// An upgrade request as the API received it.
    public struct Upgrade: Sendable {
        /// The request target (path and query).
        public var path: String
        /// The header fields in order, names lowercased.
        public var headers: [(name: String, value: String)]

        /// The first value of the header field `name` (any case).
        public func header(_ name: String) -> String? {
            let name = name.lowercased()
            return headers.first { $0.name == name }?.value
        }
    }

    private struct State {
        var upgrades: [Upgrade] = []
        var closes: [(code: UInt16?, reason: String)] = []
        var floodBytes = 0
        var refusal: (status: Int, headers: [(String, String)], body: String)?
        var bearer: (@Sendable (String) -> Bool)?
        /// Connection sockets not closed yet: how many threads use each, and whether it was upgraded.
        var sockets: [Int32: (users: Int, upgraded: Bool)] = [:]
        /// Threads started and not yet ended (the accept thread included).
        var threads = 0
        var stopped = false
    }

    /// The close frame a flood's writer sends once its current frame is out, set by its reader.
    private final class FloodEnd: Sendable {
        let frame = Locked<WebSocketFrame?>(nil)
    }

    // Every descriptor is closed exactly once, by its owner, with the lock of `state` held: the
    // listener by the accept thread when it ends, a connection's socket by the last thread using it
    // (`sockets[fd].users`), after removing it from `sockets`. `stop()` only shuts sockets down,
    // with the lock held, so it never touches a number that was closed and may already belong to
    // someone else in this process.
    // ``Locked`` (NSLock) rather than `Mutex`, like the rest of TGTesting: these are plain threads,
    // where `Mutex` draws ThreadSanitizer false positives.
    private let state = Locked(State())
    private let listener: Int32
    /// The port it listens on.
    public let port: UInt16
    /// `http://127.0.0.1:PORT`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Listens on a free loopback port and starts accepting.
    public init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard listener >= 0, bound == 0, listen(listener, 512) == 0 else {
            let code = errno
            if listener >= 0 { close(listener) }
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = UInt16(bigEndian: address.sin_port)
        spawn { [self] in acceptLoop() }
    }

    /// Every upgrade request received, in order (refused ones too).
    public var upgrades: [Upgrade] { state.withLock { $0.upgrades } }

    /// The close frames received from peers, in order: their code (nil when the frame had none)
    /// and reason.
    public var closesReceived: [(code: UInt16?, reason: String)] { state.withLock { $0.closes } }

    /// Upgraded connections whose TCP connection is not closed yet.
    public var openConnections: Int { state.withLock { $0.sockets.values.filter(\.upgraded).count } }

    /// Payload bytes the flood path has written so far, on all connections, counted as each
    /// write(2) returns.
    public var floodBytesWritten: Int { state.withLock { $0.floodBytes } }

    /// Answers every upgrade request with `status`, `headers` and `body` instead (a 401 with a
    /// `WWW-Authenticate`, say), until ``acceptUpgrades()``.
    public func refuseUpgrades(status: Int, headers: [(String, String)] = [], body: String = "") {
        state.withLock { $0.refusal = (status, headers, body) }
    }

    /// Upgrades again after ``refuseUpgrades(status:headers:body:)``.
    public func acceptUpgrades() { state.withLock { $0.refusal = nil } }

    /// Checks the token of `Authorization: Bearer <token>` with `check` from now on: a request
    /// without one, or whose token it refuses, gets 401 with `WWW-Authenticate: Bearer
    /// error="invalid_token"`. nil accepts any request.
    public func requireBearer(_ check: (@Sendable (String) -> Bool)?) { state.withLock { $0.bearer = check } }

    /// Stops accepting, ends every connection and waits (at most 10 s) for its threads to end.
    public func stop() {
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            // Wakes the accept thread (accept fails), which then closes the listener.
            shutdown(listener, Int32(SHUT_RDWR))
            for socket in state.sockets.keys { shutdown(socket, Int32(SHUT_RDWR)) }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while state.withLock({ $0.threads }) > 0, ContinuousClock.now < deadline { usleep(1000) }
    }

    private func spawn(_ body: @escaping @Sendable () -> Void) {
        state.withLock { $0.threads += 1 }
        Thread { [self] in
            body()
            state.withLock { $0.threads -= 1 }
        }
        .start()
    }

    private func acceptLoop() {
        defer { state.withLock { _ in _ = close(listener) } }
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            let proceed = state.withLock { state in
                guard !state.stopped else { return false }
                state.sockets[client] = (users: 1, upgraded: false)
                return true
            }
            guard proceed else {
                close(client)
                return
            }
            spawn { [self] in serve(client) }
        }
    }

    /// Ends one thread's use of `fd`, closing it when it was the last.
    private func release(_ fd: Int32) {
        state.withLock { state in
            guard let entry = state.sockets[fd] else { return }
            if entry.users > 1 {
                state.sockets[fd]?.users -= 1
            } else {
                state.sockets[fd] = nil
                close(fd)
            }
        }
    }

    private func serve(_ fd: Int32) {
        defer { release(fd) }
        var buffer: [UInt8] = []
        var end = WebSocketSockets.headEnd(buffer)
        while end == nil {
            guard buffer.count < 64 * 1024, WebSocketSockets.readSome(fd, into: &buffer) else { return }
            end = WebSocketSockets.headEnd(buffer)
        }
        let (line, headers) = WebSocketSockets.parseHead(buffer[..<end!])
        buffer.removeFirst(end! + 4)
        let words = line.split(separator: " ")
        guard words.count >= 2 else { return }
        let request = Upgrade(path: String(words[1]), headers: headers)
        let (refusal, bearer) = state.withLock { state in
            state.upgrades.append(request)
            return (state.refusal, state.bearer)
        }
        if let refusal {
            return answer(fd, status: refusal.status, headers: refusal.headers, body: refusal.body)
        }
        if let bearer {
            let authorization = request.header("authorization") ?? ""
            guard authorization.hasPrefix("Bearer "), bearer(String(authorization.dropFirst(7))) else {
                return answer(fd, status: 401, headers: [("WWW-Authenticate", #"Bearer error="invalid_token""#)], body: "")
            }
        }
        guard let key = request.header("sec-websocket-key"), request.header("sec-websocket-version") == "13" else {
            return answer(fd, status: 400, headers: [], body: "a WebSocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version: 13")
        }
        let target = request.path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = target[0]
        guard path.hasSuffix("/echo") || path.hasSuffix("/flood") else { return answer(fd, status: 404, headers: [], body: "") }
        var lines = [
            "HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
            "Sec-WebSocket-Accept: \(WebSocketFrames.acceptValue(forKey: key))",
        ]
        if let offered = request.header("sec-websocket-protocol")?.split(separator: ",").first {
            lines.append("Sec-WebSocket-Protocol: \(offered.trimmingCharacters(in: .whitespaces))")
        }
        // Counted before the 101 goes out, so a client that has it sees the connection counted.
        state.withLock { $0.sockets[fd]?.upgraded = true }
        guard WebSocketSockets.writeAll(fd, Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)) == 0 else { return }
        if path.hasSuffix("/echo") {
            echo(fd, buffer)
        } else {
            let query = target.count > 1 ? URLComponents(string: "?" + target[1])?.queryItems ?? [] : []
            let value = { (name: String) in query.first { $0.name == name }?.value.flatMap { Int($0) } ?? 0 }
            flood(fd, size: value("size"), count: value("count"), buffer)
        }
    }

    /// Answers a request without upgrading; the connection closes after.
    private func answer(_ fd: Int32, status: Int, headers: [(String, String)], body: String) {
        let reasons = [400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests"]
        var lines = ["HTTP/1.1 \(status) \(reasons[status] ?? "Refused")"] + headers.map { "\($0.0): \($0.1)" }
        lines += ["Content-Length: \(body.utf8.count)", "Connection: close"]
        _ = WebSocketSockets.writeAll(fd, Array((lines.joined(separator: "\r\n") + "\r\n\r\n" + body).utf8))
    }

    private func write(_ fd: Int32, _ frame: WebSocketFrame) -> Bool {
        WebSocketSockets.writeAll(fd, WebSocketFrames.encode(frame, masked: false)) == 0
    }

    /// The next frame from the peer, reading as needed; nil when the connection ended. A frame
    /// that breaks RFC 6455 (unmasked, a length it does not allow) comes back as a close 1002 to
    /// send, with `masked` false.
    private func nextFrame(_ fd: Int32, _ buffer: inout [UInt8]) -> (frame: WebSocketFrame, masked: Bool)? {
        while true {
            do {
                if let decoded = try WebSocketFrames.decode(&buffer) {
                    return decoded.masked ? decoded : (.close(code: 1002, reason: "unmasked frame"), false)
                }
            } catch {
                return (.close(code: 1002, reason: "bad frame"), false)
            }
            guard WebSocketSockets.readSome(fd, into: &buffer) else { return nil }
        }
    }

    private func echo(_ fd: Int32, _ buffer: [UInt8]) {
        var buffer = buffer
        while let (frame, masked) = nextFrame(fd, &buffer) {
            guard masked else {
                _ = write(fd, frame)
                return
            }
            switch frame.opcode {
            case 0, 1, 2:
                guard write(fd, frame) else { return }
            case 9:
                guard write(fd, .pong(frame.payload)) else { return }
            case 8:
                state.withLock { $0.closes.append((frame.closeCode, frame.closeReason)) }
                _ = write(fd, WebSocketFrame(opcode: 8, payload: frame.payload))
                return
            default:
                continue
            }
        }
    }

    private func flood(_ fd: Int32, size: Int, count: Int, _ buffer: [UInt8]) {
        let end = FloodEnd()
        state.withLock { $0.sockets[fd]?.users += 1 }
        spawn { [self] in
            defer { release(fd) }
            var buffer = buffer
            while let (frame, masked) = nextFrame(fd, &buffer) {
                if masked, frame.opcode != 8 { continue }
                if masked { state.withLock { $0.closes.append((frame.closeCode, frame.closeReason)) } }
                end.frame.withLock { $0 = masked ? WebSocketFrame(opcode: 8, payload: frame.payload) : frame }
                return
            }
            // The peer is gone: a write blocked on it fails now.
            shutdown(fd, Int32(SHUT_RDWR))
        }
        for index in 0..<max(count, 0) {
            guard end.frame.withLock({ $0 == nil }) else { break }
            let bytes = WebSocketFrames.encode(.binary([UInt8](repeating: UInt8(index & 0xFF), count: size)), masked: false)
            let header = bytes.count - size
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { return }
                let payload = max(0, sent + n - header) - max(0, sent - header)
                sent += n
                state.withLock { $0.floodBytes += payload }
            }
        }
        _ = write(fd, end.frame.withLock { $0 } ?? .close(code: 1000, reason: "done"))
    }
}

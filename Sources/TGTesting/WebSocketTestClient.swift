import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What can go wrong in a WebSocket test peer.
public enum WebSocketTestError: Error {
    /// The peer closed the connection (or reset it).
    case closed
    /// Nothing arrived in time (or a write could not go out in time).
    case timedOut
    /// The peer broke RFC 6455 (or HTTP) in the way said.
    case protocolError(String)
    /// The TCP connection could not be opened: the `errno`.
    case connectFailed(Int32)
}

/// A blocking WebSocket client over a plain TCP socket to 127.0.0.1, for tests: it sends the
/// upgrade request, checks the answer, sends masked frames and reads frames as they arrive. It
/// answers nothing by itself (not even a ping), so a test sees every frame.
public final class WebSocketTestClient: @unchecked Sendable {
    // Invariant: used by one test task at a time; each call runs to completion before the next,
    // so `fd`, `pending` and `ended` are never touched by two threads at once.
    private var fd: Int32
    /// Bytes received and not yet taken as frames.
    private var pending: [UInt8] = []
    /// The peer closed the connection.
    private var ended = false

    /// The answer to the upgrade request.
    public struct Answer: Sendable {
        public var status: Int
        /// The header fields in order, names lowercased.
        public var headers: [(name: String, value: String)]
        /// The body of an answer other than 101 (empty for a 101).
        public var body: [UInt8]

        /// The first value of the header field `name` (any case).
        public func header(_ name: String) -> String? {
            let name = name.lowercased()
            return headers.first { $0.name == name }?.value
        }
    }

    private init(fd: Int32) { self.fd = fd }

    deinit { close() }

    /// Connects to `127.0.0.1:port` and sends `GET path HTTP/1.1` with `Host`, `Upgrade: websocket`,
    /// `Connection: Upgrade`, `Sec-WebSocket-Version: 13` and `Sec-WebSocket-Key` (random), each
    /// unless `headers` has a field of that name, then `headers` (`Authorization`, `Origin`…).
    /// `omitUpgradeHeaders` leaves out all but `Host` (for tests of refusals). Reads the answer's
    /// head, and for a status other than 101 its body (by `Content-Length`, chunked, or until the
    /// connection closes; at most 1 MiB). A 101 must carry the right `Sec-WebSocket-Accept`; it
    /// gives the open client, and bytes that came with its head are kept for the first frames.
    /// `receiveBuffer` sets `SO_RCVBUF` before connecting (a slow reader's small window).
    public static func connect(
        port: UInt16,
        path: String,
        headers: [(String, String)] = [],
        omitUpgradeHeaders: Bool = false,
        receiveBuffer: Int? = nil,
        timeout: Duration = .seconds(5)
    ) throws -> (client: WebSocketTestClient?, answer: Answer) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw WebSocketTestError.connectFailed(errno) }
        let client = WebSocketTestClient(fd: fd)
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        let parts = timeout.components
        var limit = timeval(tv_sec: Int(parts.seconds), tv_usec: Int(parts.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw WebSocketTestError.connectFailed(errno) }

        let given = Set(headers.map { $0.0.lowercased() })
        let key = headers.first { $0.0.lowercased() == "sec-websocket-key" }?.1 ?? WebSocketFrames.randomKey()
        var defaults = [("Host", "127.0.0.1:\(port)")]
        if !omitUpgradeHeaders {
            defaults += [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", key)]
        }
        let fields = defaults.filter { !given.contains($0.0.lowercased()) } + headers
        let request = (["GET \(path) HTTP/1.1"] + fields.map { "\($0.0): \($0.1)" }).joined(separator: "\r\n") + "\r\n\r\n"
        try client.sendRaw(Array(request.utf8))

        let deadline = ContinuousClock.now + timeout
        var end = WebSocketSockets.headEnd(client.pending)
        while end == nil {
            guard try client.fill(until: deadline) else { throw WebSocketTestError.closed }
            end = WebSocketSockets.headEnd(client.pending)
        }
        let (line, fieldsReceived) = WebSocketSockets.parseHead(client.pending[..<end!])
        client.pending.removeFirst(end! + 4)
        let words = line.split(separator: " ")
        guard words.count >= 2, words[0].hasPrefix("HTTP/1."), let status = Int(words[1]) else {
            throw WebSocketTestError.protocolError("status line \(line)")
        }
        var answer = Answer(status: status, headers: fieldsReceived, body: [])
        if status == 101 {
            guard answer.header("sec-websocket-accept") == WebSocketFrames.acceptValue(forKey: key) else {
                throw WebSocketTestError.protocolError("Sec-WebSocket-Accept \(answer.header("sec-websocket-accept") ?? "missing")")
            }
            return (client, answer)
        }
        answer.body = try client.readBody(of: answer, until: deadline)
        client.close()
        return (nil, answer)
    }

    /// Sends `frame`, masked as a client must.
    public func send(_ frame: WebSocketFrame) throws { try sendRaw(WebSocketFrames.encode(frame, masked: true)) }

    /// Sends `bytes` as they are (a broken frame, an unmasked one, half a frame…).
    public func sendRaw(_ bytes: [UInt8]) throws {
        guard fd >= 0 else { throw WebSocketTestError.closed }
        switch WebSocketSockets.writeAll(fd, bytes) {
        case 0: return
        case EAGAIN, EWOULDBLOCK: throw WebSocketTestError.timedOut
        default: throw WebSocketTestError.closed
        }
    }

    /// The next frame, of any opcode. Throws ``WebSocketTestError/closed`` when the connection
    /// ends first, ``WebSocketTestError/timedOut`` when none came within `timeout`.
    public func receive(timeout: Duration = .seconds(5)) throws -> WebSocketFrame {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let decoded = try WebSocketFrames.decode(&pending) { return decoded.frame }
            guard try fill(until: deadline) else { throw WebSocketTestError.closed }
        }
    }

    /// Reads until the peer closes the TCP connection: the frames that came meanwhile, and whether
    /// the connection closed within `timeout` (false: it was still open then).
    public func readUntilEOF(timeout: Duration = .seconds(5)) throws -> (frames: [WebSocketFrame], closed: Bool) {
        let deadline = ContinuousClock.now + timeout
        var frames: [WebSocketFrame] = []
        while true {
            while let decoded = try WebSocketFrames.decode(&pending) { frames.append(decoded.frame) }
            do {
                guard try fill(until: deadline) else { return (frames, true) }
            } catch WebSocketTestError.timedOut {
                return (frames, false)
            }
        }
    }

    /// Closes the socket (no closing handshake). Idempotent.
    public func close() {
        guard fd >= 0 else { return }
        Glibc.close(fd)
        fd = -1
    }

    /// Reads what arrives into `pending`: false when the connection has ended; throws
    /// ``WebSocketTestError/timedOut`` when nothing came before `deadline`.
    private func fill(until deadline: ContinuousClock.Instant) throws -> Bool {
        guard fd >= 0, !ended else { return false }
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { throw WebSocketTestError.timedOut }
            let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1
            if poll(&poller, 1, Int32(min(milliseconds, 60_000))) > 0 { break }
        }
        guard WebSocketSockets.readSome(fd, into: &pending) else {
            ended = true
            return false
        }
        return true
    }

    /// The body of a non-101 answer: by its `Content-Length`, its chunks, or until the connection
    /// closes, at most 1 MiB; what came by `deadline` if it is still incomplete then.
    private func readBody(of answer: Answer, until deadline: ContinuousClock.Instant) throws -> [UInt8] {
        let limit = 1 << 20
        let length = answer.header("content-length").flatMap { Int($0) }
        let chunked = answer.header("transfer-encoding")?.lowercased().contains("chunked") == true
        while true {
            if let length, pending.count >= length { return Array(pending.prefix(min(length, limit))) }
            if chunked, let body = Self.dechunk(pending) { return Array(body.prefix(limit)) }
            if pending.count >= limit { return Array(pending.prefix(limit)) }
            do {
                guard try fill(until: deadline) else { return pending }
            } catch WebSocketTestError.timedOut {
                return pending
            }
        }
    }

    /// A chunked body's content, or nil while its last chunk has not arrived.
    private static func dechunk(_ bytes: [UInt8]) -> [UInt8]? {
        var body: [UInt8] = []
        var at = 0
        while true {
            guard let lineEnd = bytes[at...].indices.dropLast().first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }) else { return nil }
            let sizeText = String(decoding: bytes[at..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { return nil }
            at = lineEnd + 2
            guard bytes.count >= at + size + 2 else { return nil }
            if size == 0 { return body }
            body += bytes[at..<at + size]
            at += size + 2
        }
    }
}

/// Blocking socket helpers the WebSocket test peers share.
enum WebSocketSockets {
    /// Writes all of `bytes`; 0, or the `errno` of the write that failed.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return n < 0 ? errno : EPIPE }
            sent += n
        }
        return 0
    }

    /// Appends what one read brings (waiting for it); false when the connection has ended.
    static func readSome(_ fd: Int32, into buffer: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return false }
            buffer += chunk[0..<n]
            return true
        }
    }

    /// Where the blank line that ends an HTTP head starts, if it has arrived.
    static func headEnd(_ buffer: [UInt8]) -> Int? {
        guard buffer.count >= 4 else { return nil }
        return (0...(buffer.count - 4)).first { buffer[$0] == 13 && buffer[$0 + 1] == 10 && buffer[$0 + 2] == 13 && buffer[$0 + 3] == 10 }
    }

    /// An HTTP head's first line and its header fields, names lowercased.
    static func parseHead(_ head: ArraySlice<UInt8>) -> (line: String, headers: [(name: String, value: String)]) {
        var lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
        let first = lines.removeFirst()
        let headers: [(name: String, value: String)] = lines.compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]).lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return (first, headers)
    }
}

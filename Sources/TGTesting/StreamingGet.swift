import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A GET over a raw loopback connection whose answer is read as it arrives, the way an app reads
/// a stream of server-sent events or a long download: event by event (``nextEvent()``), or to its
/// end (``drain()``), which says whether the body ended as HTTP says it should (the last chunk,
/// or the whole announced length) or the connection was closed before.
public final class StreamingGet: @unchecked Sendable {
    // Invariant: used by one test task at a time; each call runs to completion before the next.
    private let fd: Int32
    /// The answer's status and head (without the blank line).
    public private(set) var status = 0
    public private(set) var head = ""
    private var chunked = false
    private var remainingLength: Int?
    private var raw: [UInt8] = []
    private var body: [UInt8] = []
    /// Body bytes received so far.
    public private(set) var received = 0
    private var ending: Ending?

    /// How the body ended.
    public enum Ending: Sendable, Equatable {
        /// As HTTP says: its last chunk, or its announced length.
        case complete
        /// The connection closed (or was reset) before.
        case cut
    }

    /// Connects to `127.0.0.1:port`, sends `GET target` with `headers` (`Name: value`) and reads
    /// the head. A read waits at most `timeout`.
    public init(port: UInt16, target: String, headers: [String], timeout: Int = 10) async throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let request = (["GET \(target) HTTP/1.1", "Host: 127.0.0.1:\(port)"] + headers).joined(separator: "\r\n") + "\r\n\r\n"
        let bytes = Array(request.utf8)
        try await offPool { [fd] in
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { throw POSIXError(.EPIPE) }
                sent += n
            }
        }
        try await readHead()
    }

    deinit { close(fd) }

    /// The next event (its lines, without the blank line that ended it), skipping comment-only
    /// blocks (`: heartbeat`); nil when the body ended first.
    public func nextEvent() async throws -> String? {
        while true {
            if let end = Self.blankLine(in: body) {
                let block = String(decoding: body[..<end], as: UTF8.self)
                body.removeFirst(end + 2)
                if block.split(separator: "\n").allSatisfy({ $0.hasPrefix(":") }) { continue }
                return block
            }
            if ending != nil { return nil }
            try await pump()
        }
    }

    /// Reads until the body has brought at least `count` bytes (or ended).
    public func read(atLeast count: Int) async throws {
        while received < count, ending == nil { try await pump() }
    }

    /// Reads the rest of the body; how it ended.
    public func drain() async throws -> Ending {
        while true {
            if let ending { return ending }
            body.removeAll()
            try await pump()
        }
    }

    /// What the body brought and was not taken yet, as text.
    public var unread: String { String(decoding: body, as: UTF8.self) }

    private static func blankLine(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 2 else { return nil }
        for index in 0..<(bytes.count - 1) where bytes[index] == 0x0A && bytes[index + 1] == 0x0A { return index }
        return nil
    }

    private func readHead() async throws {
        while true {
            if let end = raw.firstRange(of: Array("\r\n\r\n".utf8)) {
                head = String(decoding: raw[..<end.lowerBound], as: UTF8.self)
                raw.removeFirst(end.upperBound)
                let lines = head.split(separator: "\r\n")
                status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
                for line in lines.dropFirst() {
                    let lower = line.lowercased()
                    if lower.hasPrefix("transfer-encoding:"), lower.contains("chunked") { chunked = true }
                    if lower.hasPrefix("content-length:") { remainingLength = Int(lower.dropFirst(15).trimmingCharacters(in: .whitespaces)) }
                }
                if !chunked, remainingLength == nil { remainingLength = Int.max }
                decode()
                return
            }
            guard try await receive() else { throw POSIXError(.ECONNRESET) }
        }
    }

    /// Reads more from the connection and decodes it; at the connection's end, the body is cut
    /// unless it was complete.
    private func pump() async throws {
        if try await !receive() {
            if ending == nil { ending = remainingLength == Int.max ? .complete : .cut }
            return
        }
        decode()
    }

    /// False at the connection's end (closed or reset).
    private func receive() async throws -> Bool {
        let read = try await offPool { [fd] () -> [UInt8]? in
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = recv(fd, &chunk, chunk.count, 0)
            if n > 0 { return Array(chunk[0..<n]) }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK { throw POSIXError(.ETIMEDOUT) }
            return nil
        }
        guard let read else { return false }
        raw.append(contentsOf: read)
        return true
    }

    private func decode() {
        guard ending == nil else { return }
        if !chunked, let left = remainingLength {
            let take = min(left, raw.count)
            body.append(contentsOf: raw[..<take])
            received += take
            raw.removeFirst(take)
            if left != Int.max {
                remainingLength = left - take
                if left - take == 0 { ending = .complete }
            }
            return
        }
        while let lineEnd = raw.firstRange(of: Array("\r\n".utf8)) {
            let sizeText = String(decoding: raw[..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                ending = .cut
                return
            }
            if size == 0 {
                ending = .complete
                return
            }
            guard raw.count >= lineEnd.upperBound + size + 2 else { return }
            body.append(contentsOf: raw[lineEnd.upperBound..<(lineEnd.upperBound + size)])
            received += size
            raw.removeFirst(lineEnd.upperBound + size + 2)
        }
    }
}

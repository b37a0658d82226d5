import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A tiny HTTP/1.1 server on raw sockets (127.0.0.1, a free port) for testing clients against
/// behaviour a well-behaved server never shows. Each connection gets a thread of its own; the
/// handler decides per request.
public final class ScriptedHTTPServer: @unchecked Sendable {
    // Invariants:
    // - `connections`, `requests`, `open` and `stopped` are only accessed with `lock` held.
    // - Every descriptor is closed exactly once, by its owner: the listener by the accept thread
    //   when it ends, a client socket by its serving thread, with `lock` held and after removing it
    //   from `open`. `stop()` only shuts sockets down, with `lock` held, so it never touches a
    //   descriptor number that was closed and may already belong to someone else in this process
    //   (a server under test, a pipe): closing or shutting down a stale number breaks them at random.

    /// What to do with a request.
    public enum Action: Sendable {
        /// Send these bytes verbatim, then keep the connection for the next request.
        case raw(String)
        /// Send these bytes verbatim, then close the connection (an idle keep-alive connection
        /// the server drops).
        case rawThenClose(String)
        /// Never answer (until the server stops).
        case hang
        /// Close the connection without a word.
        case close
    }

    /// A request as received.
    public struct Request: Sendable {
        public var method: String
        public var target: String
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]

        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    private let listener: Int32
    public let port: UInt16
    private let handler: @Sendable (Request) -> Action
    // NSLock, like the rest of TGTesting (``Locked``): its threads are not Swift tasks.
    private let lock = NSLock()
    private var connections = 0
    private var requests = 0
    private var open: [Int32] = []
    private var stopped = false

    public init(handler: @escaping @Sendable (Request) -> Action) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 512) == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = UInt16(bigEndian: address.sin_port)
        self.handler = handler
        Thread { [self] in self.acceptLoop() }.start()
    }

    /// Connections accepted so far.
    public var acceptedConnections: Int { lock.withLock { connections } }
    /// Requests read so far.
    public var receivedRequests: Int { lock.withLock { requests } }

    /// Stops accepting and ends every connection. Idempotent.
    public func stop() {
        lock.withLock {
            guard !stopped else { return }
            stopped = true
            // Wakes the accept thread (accept fails), which then closes the listener.
            shutdown(listener, Int32(SHUT_RDWR))
            for socket in open { shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    deinit { stop() }

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            let proceed = lock.withLock {
                guard !stopped else { return false }
                connections += 1
                open.append(client)
                return true
            }
            guard proceed else {
                close(client)
                return
            }
            Thread { [self] in self.serve(client) }.start()
        }
    }

    private func serve(_ socket: Int32) {
        defer {
            lock.withLock {
                open.removeAll { $0 == socket }
                close(socket)
            }
        }
        var buffer: [UInt8] = []
        while let request = readRequest(socket, &buffer) {
            lock.withLock { requests += 1 }
            switch handler(request) {
            case .raw(let text):
                guard Self.send(text, to: socket) else { return }
            case .rawThenClose(let text):
                _ = Self.send(text, to: socket)
                return
            case .hang:
                var byte: UInt8 = 0
                while recv(socket, &byte, 1, 0) > 0 {}
                return
            case .close:
                return
            }
        }
    }

    private static func send(_ text: String, to socket: Int32) -> Bool {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }

    private func readRequest(_ socket: Int32, _ buffer: inout [UInt8]) -> Request? {
        let separator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int?
        while headEnd == nil {
            if buffer.count >= 4 {
                headEnd = (0...(buffer.count - 4)).first { Array(buffer[$0..<$0 + 4]) == separator }
            }
            if headEnd == nil, !Self.fill(socket, &buffer) { return nil }
        }
        let head = String(decoding: buffer[..<headEnd!], as: UTF8.self)
        buffer.removeFirst(headEnd! + 4)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count >= 2 else { return nil }
        let headers: [(name: String, value: String)] = lines.compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var request = Request(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers, body: [])
        if let length = request.header("Content-Length").flatMap({ Int($0) }) {
            while buffer.count < length { if !Self.fill(socket, &buffer) { return nil } }
            request.body = Array(buffer[..<length])
            buffer.removeFirst(length)
        } else if request.header("Transfer-Encoding")?.lowercased() == "chunked" {
            guard let body = readChunked(socket, &buffer) else { return nil }
            request.body = body
        }
        return request
    }

    private static func fill(_ socket: Int32, _ buffer: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(socket, &chunk, chunk.count, 0)
        guard n > 0 else { return false }
        buffer.append(contentsOf: chunk[0..<n])
        return true
    }

    private func readChunked(_ socket: Int32, _ buffer: inout [UInt8]) -> [UInt8]? {
        var body: [UInt8] = []
        while true {
            var lineEnd: Int?
            while lineEnd == nil {
                lineEnd = buffer.indices.dropLast().first { buffer[$0] == 13 && buffer[$0 + 1] == 10 }
                if lineEnd == nil, !Self.fill(socket, &buffer) { return nil }
            }
            let sizeText = String(decoding: buffer[..<lineEnd!], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { return nil }
            buffer.removeFirst(lineEnd! + 2)
            while buffer.count < size + 2 { if !Self.fill(socket, &buffer) { return nil } }
            body.append(contentsOf: buffer[..<size])
            buffer.removeFirst(size + 2)
            if size == 0 { return body }
        }
    }
}

import Foundation
import TGHTTPServer
import TGTesting

#if canImport(Glibc)
import Glibc
#endif

/// A raw TCP connection to the server, for what a well-behaved client would never send.
final class RawConnection: @unchecked Sendable {
    // Invariant: used by one test at a time, each call runs to completion before the next.
    let fd: Int32

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw POSIXError(.ECONNREFUSED) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ text: String) async throws {
        let bytes = Array(text.utf8)
        try await offPool {
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { Glibc.send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { throw POSIXError(.EPIPE) }
                sent += n
            }
        }
    }

    /// Reads one response (head plus a Content-Length body), or whatever comes before the peer
    /// closes. Returns "" when the connection was closed with nothing to read.
    func readResponse() async throws -> String {
        try await offPool {
            var buffer: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                if let text = Self.completeResponse(buffer) { return text }
                let n = recv(self.fd, &chunk, chunk.count, 0)
                if n <= 0 { return String(decoding: buffer, as: UTF8.self) }
                buffer.append(contentsOf: chunk[0..<n])
            }
        }
    }

    /// True once the server closed the connection (reads return end of file).
    func waitForClose() async throws -> Bool {
        try await offPool {
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = recv(self.fd, &chunk, chunk.count, 0)
                if n == 0 { return true }
                if n < 0 { return errno == ECONNRESET }
            }
        }
    }

    private static func completeResponse(_ buffer: [UInt8]) -> String? {
        let text = String(decoding: buffer, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return nil }
        let head = text[..<end.lowerBound].lowercased()
        let length =
            head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        let bodyBytes = buffer.count - text[..<end.upperBound].utf8.count
        return bodyBytes >= length ? text : nil
    }
}

/// Starts a server on a free loopback port with two event threads; the test shuts it down.
func startServer(
    _ configure: (inout HTTPServer.Configuration) -> Void = { _ in },
    handler: @escaping HTTPServer.Handler
) throws -> HTTPServer {
    var configuration = HTTPServer.Configuration()
    configuration.threads = 2
    configure(&configuration)
    let server = HTTPServer(configuration: configuration, handler: handler)
    try server.start()
    return server
}

extension HTTPServer {
    var baseURL: String { "http://127.0.0.1:\(port)" }
}

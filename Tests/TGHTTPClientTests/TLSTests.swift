import Foundation
import HTTPTypes
import TGHTTPClient
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A real TLS peer: `openssl s_server -www` with a fresh self-signed certificate for localhost.
final class SelfSignedTLSServer: @unchecked Sendable {
    // Invariant: set up in init, read-only afterwards; `stop()` is called once by the test.
    let port: UInt16
    let certificatePath: String
    private let process: Process
    private let directory: URL

    init() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tg-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let (certificate, keyPath) = try await makeSelfSignedCertificate(in: directory)
        certificatePath = certificate
        port = try freeLoopbackPort()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-www", "-accept", "127.0.0.1:\(port)", "-cert", certificatePath, "-key", keyPath, "-quiet"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while try await !offPool({ [port] in Self.accepts(port) }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    func stop() {
        // SIGKILL, not terminate(): the child inherits the spawning thread's signal mask, in which
        // Dispatch's threads block SIGTERM, so a SIGTERM would leave the server running.
        kill(process.processIdentifier, SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }

    static func accepts(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

@Suite struct TLSTests {
    @Test func refusesASelfSignedCertificateAndAcceptsItOnlyWhenItsCAIsConfigured() async throws {
        let server = try await SelfSignedTLSServer()
        defer { server.stop() }
        let request = HTTPRequest(method: .get, scheme: "https", authority: "localhost:\(server.port)", path: "/")
        let strict = HTTPClient()
        let refused = await #expect(throws: HTTPClientError.self) { try await strict.send(request, timeout: .seconds(10)) }
        #expect(refused == .tlsFailure)
        var configuration = HTTPClient.Configuration()
        configuration.caFile = server.certificatePath
        let trusting = HTTPClient(configuration: configuration)
        let response = try await trusting.send(request, timeout: .seconds(10))
        #expect(response.head.status == .ok)
        strict.shutdown()
        trusting.shutdown()
    }
}

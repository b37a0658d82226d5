import Foundation
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A WebSocket API behind https: nginx terminates TLS (a fresh self-signed certificate for
/// 127.0.0.1) in front of the fake WebSocket API, so TokenGate's tunnel speaks TLS through
/// libcurl, verified against the API's `ca_file`, and relays frames over it.
@Suite(.serialized) struct WebSocketTLSTests {
    /// nginx passing WebSockets on to `apiPort` from https on `port`.
    static func startNginx(in directory: URL, port: UInt16, apiPort: UInt16) async throws -> (UncheckedProcess, certificate: String) {
        let (certificate, key) = try await makeSelfSignedCertificate(in: directory)
        let conf = directory.appendingPathComponent("nginx.conf").path
        try """
        daemon off;
        worker_processes 1;
        pid \(directory.path)/nginx.pid;
        error_log \(directory.path)/error.log warn;
        events { worker_connections 64; }
        http {
            access_log off;
            client_body_temp_path \(directory.path)/body;
            proxy_temp_path \(directory.path)/proxy;
            fastcgi_temp_path \(directory.path)/fastcgi;
            uwsgi_temp_path \(directory.path)/uwsgi;
            scgi_temp_path \(directory.path)/scgi;
            server {
                listen 127.0.0.1:\(port) ssl;
                ssl_certificate \(certificate);
                ssl_certificate_key \(key);
                location / {
                    proxy_pass http://127.0.0.1:\(apiPort);
                    proxy_http_version 1.1;
                    proxy_set_header Upgrade $http_upgrade;
                    proxy_set_header Connection upgrade;
                    proxy_buffering off;
                }
            }
        }
        """.write(toFile: conf, atomically: true, encoding: .utf8)
        let process = try await offPool {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
            process.arguments = ["-p", directory.path, "-c", conf]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            return UncheckedProcess(process)
        }
        for _ in 0..<100 {
            let probe = try await curl(["-s", "-o", "/dev/null", "--cacert", certificate, "https://127.0.0.1:\(port)/"])
            if probe.exitCode == 0 { return (process, certificate) }
            try await Task.sleep(for: .milliseconds(50))
        }
        kill(process.value.processIdentifier, SIGTERM)
        Issue.record("nginx did not come up: \((try? String(contentsOfFile: directory.path + "/error.log", encoding: .utf8)) ?? "")")
        throw CancellationError()
    }

    @Test func aWebSocketToAnHTTPSAPIRunsOverVerifiedTLSAndAnUnknownCertificateIsRefused() async throws {
        let api = try FakeWebSocketAPI()
        defer { api.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tg-wss-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = try freeLoopbackPort()
        let (nginx, certificate) = try await Self.startNginx(in: directory, port: port, apiPort: api.port)
        defer {
            kill(nginx.value.processIdentifier, SIGTERM)
            nginx.value.waitUntilExit()
        }
        let base = "https://127.0.0.1:\(port)"
        let trusted = "{ name: wss, base_url: \"\(base)\", provider: fake, scopes: [User.Read], websocket: true, ca_file: \"\(certificate)\" }"
        let untrusted = "{ name: unverified, base_url: \"\(base)\", provider: fake, scopes: [User.Read], websocket: true }"
        try await AuthFlowHarness.run(withGraphAPI: true, moreUpstreams: [trusted, untrusted], transport: .sockets) { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let (opened, answer) = try await WebSocketProxyTests.open(h.baseURL, "/api/wss/echo", token: token)
            #expect(answer.status == 101, "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
            let client = try #require(opened)
            #expect(try await WebSocketProxyTests.exchange(client, .text("over TLS")) == .text("over TLS"))
            // Larger than a TLS record: read in several pieces, some held in OpenSSL's buffer.
            let large = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 * 31) }
            #expect(try await WebSocketProxyTests.exchange(client, .binary(large)) == .binary(large))
            let (frames, closed) = try await offPool {
                try client.send(.close(code: 1000, reason: "done"))
                return try client.readUntilEOF()
            }
            #expect(frames == [.close(code: 1000, reason: "done")] && closed)

            // Without the API's CA the certificate is not trusted: no connection, nothing sent.
            let upgrades = api.upgrades.count
            let refused = try await WebSocketProxyTests.open(h.baseURL, "/api/unverified/echo", token: token)
            #expect(refused.answer.status == 502)
            #expect(WebSocketProxyTests.problemCode(refused.answer) == "upstream_unavailable")
            #expect(api.upgrades.count == upgrades)
        }
    }
}

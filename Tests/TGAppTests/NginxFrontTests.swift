import Foundation
import HTTPTypes
import TGAppTesting
import TGHTTPServer
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
import TGBase
#endif

/// `deploy/nginx/tokengate.conf`, run for real in front of TokenGate: TLS at nginx, the login flow
/// and a proxied call through it, public URLs from the configuration, and client addresses right.
///
/// Three loopback addresses tell the parties apart: the client calls from 127.0.0.2, nginx
/// listens on 127.0.0.1 and connects to TokenGate from 127.0.0.3, the only trusted proxy.
/// Over real sockets, end to end.
@Suite(.serialized) struct NginxFrontTests {
    static let client = "127.0.0.2"
    static let nginxSource = "127.0.0.3"

    /// nginx with the deploy site, a fresh self-signed certificate for 127.0.0.1, in `directory`.
    struct Nginx {
        var process: UncheckedProcess
        var port: UInt16
        var certificate: String
        var baseURL: String { "https://127.0.0.1:\(port)" }

        static func start(in directory: URL, port: UInt16, tokenGatePort: UInt16) async throws -> Nginx {
            let (certificate, key) = try await makeSelfSignedCertificate(in: directory)
            let site = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../deploy/nginx/tokengate.conf")
            let rendered = try String(contentsOf: site, encoding: .utf8)
                .replacingOccurrences(of: "__LISTEN__", with: "127.0.0.1:\(port)")
                .replacingOccurrences(of: "__SERVER_NAME__", with: "127.0.0.1")
                .replacingOccurrences(of: "__CERTIFICATE__", with: certificate)
                .replacingOccurrences(of: "__CERTIFICATE_KEY__", with: key)
                .replacingOccurrences(of: "__TOKENGATE__", with: "127.0.0.1:\(tokenGatePort)")
            try rendered.write(to: directory.appendingPathComponent("tokengate.conf"), atomically: true, encoding: .utf8)
            // The main file around the site, as Debian's nginx.conf would be (unprivileged paths).
            let main = """
                daemon off;
                worker_processes 1;
                pid \(directory.path)/nginx.pid;
                error_log \(directory.path)/error.log warn;
                events { worker_connections 256; }
                http {
                    access_log off;
                    client_body_temp_path \(directory.path)/body;
                    proxy_temp_path \(directory.path)/proxy;
                    fastcgi_temp_path \(directory.path)/fastcgi;
                    uwsgi_temp_path \(directory.path)/uwsgi;
                    scgi_temp_path \(directory.path)/scgi;
                    proxy_bind \(NginxFrontTests.nginxSource);
                    include \(directory.path)/tokengate.conf;
                }
                """
            let conf = directory.appendingPathComponent("nginx.conf").path
            try main.write(toFile: conf, atomically: true, encoding: .utf8)
            let process = try await offPool {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
                process.arguments = ["-p", directory.path, "-c", conf]
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                return UncheckedProcess(process)
            }
            let nginx = Nginx(process: process, port: port, certificate: certificate)
            for _ in 0..<100 {
                if try await curl(nginx.arguments(["-o", "/dev/null", nginx.baseURL + "/healthz"])).exitCode == 0 { return nginx }
                try await Task.sleep(for: .milliseconds(50))
            }
            nginx.stop()
            Issue.record("nginx did not come up: \((try? String(contentsOfFile: directory.path + "/error.log", encoding: .utf8)) ?? "")")
            throw CancellationError()
        }

        /// curl options for a call through this nginx, from the client's address.
        func arguments(_ rest: [String]) -> [String] {
            ["--cacert", certificate, "--interface", NginxFrontTests.client, "-s"] + rest
        }

        func stop() {
            kill(process.value.processIdentifier, SIGTERM)
            process.value.waitUntilExit()
        }

    }

    @Test func theLoginFlowAndAProxiedCallWorkThroughNginxWithPublicURLsAndClientAddressesRight() async throws {
        let nginxPort = try freeLoopbackPort()
        let publicURL = "https://127.0.0.1:\(nginxPort)"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tg-nginx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let sockets = try FakeWebSocketAPI()
        defer { sockets.stop() }
        try await AuthFlowHarness.run(
            serverOptions: ", public_base_url: \"\(publicURL)\", trusted_proxies: [\(Self.nginxSource)]",
            withGraphAPI: true,
            upstreamOptions: ", path_prefixes: [\"/me\", \"/upload\"]",
            moreUpstreams: ["{ name: ws, base_url: \"\(sockets.baseURL)\", provider: fake, scopes: [User.Read], websocket: true }"],
            transport: .sockets
        ) { harness in
            harness.fake.registerClient(id: "tokengate", secret: "s3cret", redirectURIs: [publicURL + "/auth/callback"])
            let nginx = try await Nginx.start(in: directory, port: nginxPort, tokenGatePort: UInt16(harness.server.port))
            defer { nginx.stop() }
            func through(_ arguments: [String]) async throws -> CurlResult { try await curl(nginx.arguments(arguments)) }

            // Public URLs come from the configuration, not from the Host nginx passes.
            let metadata = try await through([nginx.baseURL + "/.well-known/oauth-authorization-server"])
            #expect(decodeJSON(metadata.body)["issuer"] as? String == publicURL)

            // The login, every step of the app's and the browser's part through nginx.
            let login = AuthFlowHarness.AppLogin()
            let query = FormURLEncoding.encode(login.query.map { (name: $0.0, value: $0.1) })
            let started = try await through(["-H", "Accept: application/json", nginx.baseURL + "/auth/login?" + query])
            let authorizationURL = try #require(decodeJSON(started.body)["authorization_url"] as? String, "\(started.body)")
            #expect(authorizationURL.contains(FormURLEncoding.escape(publicURL + "/auth/callback")))
            let atProvider = try await harness.fake.followAuthorization(authorizationURL, using: harness.http)
            let callback = try #require(atProvider.destination)
            #expect(callback.hasPrefix(publicURL + "/auth/callback"))
            let back = try await through(["-i", callback])
            let location = try #require(back.header("Location"), "callback through nginx: \(back.status ?? 0) \(back.body)")
            let code = try #require(FakeIdentityProvider.queryParameters(of: location)["code"])
            let token = try await through([
                "-X", "POST", nginx.baseURL + "/auth/token", "--data-urlencode", "grant_type=authorization_code",
                "--data-urlencode", "code=\(code)", "--data-urlencode", "code_verifier=\(login.verifier)",
                "--data-urlencode", "redirect_uri=\(login.redirectURI)", "--data-urlencode", "client_id=\(login.clientID)",
            ])
            let access = try #require(decodeJSON(token.body)["access_token"] as? String, "\(token.body)")

            // A proxied call: the client's made-up X-Forwarded-For is not believed; the API learns
            // the client's real address, which nginx (trusted) passed on.
            let call = try await through([
                "-i", nginx.baseURL + "/api/graph/me", "-H", "Authorization: Bearer \(access)", "-H", "X-Forwarded-For: 6.6.6.6",
            ])
            #expect(call.status == 200, "\(call.body)")
            let graph = try #require(harness.graph)
            #expect(graph.received.last?.headerFields[values: .init("X-Forwarded-For")!] == [Self.client])
            #expect(harness.logs.lines.contains { $0.contains(#""route":"/api/{upstream}/**""#) && $0.contains(#""remote":"127.0.0.2""#) })

            // An upload streams through nginx (request buffering off) and arrives whole.
            let upload = try await through([
                nginx.baseURL + "/api/graph/upload", "-H", "Authorization: Bearer \(access)", "-H", "Content-Type: application/octet-stream",
                "--data-binary", "@" + nginx.certificate,
            ])
            #expect(upload.stdout.contains(#""bytes":"#), "\(upload.stdout)")

            // Straight to TokenGate from the client's address: forwarding fields are ignored.
            let direct = try await curl([
                "-s", "--interface", Self.client, harness.baseURL + "/api/graph/me", "-H", "Authorization: Bearer \(access)",
                "-H", "X-Forwarded-For: 6.6.6.6",
            ])
            #expect(direct.exitCode == 0)
            #expect(graph.received.last?.headerFields[values: .init("X-Forwarded-For")!] == [Self.client])

            // A WebSocket handshake passes nginx's Upgrade on (curl cannot speak WebSocket: it
            // shows the 101 and waits until its time is up).
            let handshake = try await through([
                "-i", "--max-time", "2", nginx.baseURL + "/api/ws/echo", "-H", "Authorization: Bearer \(access)",
                "-H", "Upgrade: websocket", "-H", "Connection: Upgrade", "-H", "Sec-WebSocket-Version: 13",
                "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            ])
            #expect(handshake.status == 101, "\(handshake.stdout) \(handshake.stderr)")
            #expect(sockets.upgrades.last?.header("x-forwarded-for") == Self.client)

            // Metrics are for the monitoring system, not through the public site.
            #expect(try await through(["-o", "/dev/null", "-w", "%{http_code}", nginx.baseURL + "/metrics"]).stdout == "404")
        }
    }
}

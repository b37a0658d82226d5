import Foundation
import TGAppTesting
import TGPostgres
import TGTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM while a proxied download and a proxied upload are still streaming: suspended
/// connections must be closed before the server stops (libmicrohttpd aborts the process when
/// stopped with one, a core with secrets in it).
/// Over real sockets: the subject is the connections.
@Suite struct ShutdownStreamingTests {
    @Test func sigtermDuringAStreamedDownloadAndUploadExitsZeroWithoutACore() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/me\", \"/bytes\", \"/upload\"]", transport: .sockets)
        { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let port = try freeLoopbackPort()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tg-term-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let configuration = directory.appendingPathComponent("tokengate.yaml")
            try """
            server: { host: 127.0.0.1, port: \(port), drain_timeout_seconds: 1 }
            admin: { port: 0 }
            database: { url: "\(harness.databaseURL)" }
            log: { level: info }
            encryption: { current_key_id: k1, keys: [{ id: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= }] }
            clients: [{ client_id: term-app, redirect_uris: ["com.example.term:/cb"] }]
            providers: [{ name: fake, kind: oidc, issuer: "\(harness.fake.issuer)", client_id: tokengate, client_secret: s3cret }]
            upstreams: [{ name: graph, base_url: "\(try #require(harness.graph).baseURL)", provider: fake, scopes: [User.Read], path_prefixes: ["/me", "/bytes", "/upload"], max_body_bytes: 104857600, timeout_seconds: 60 }]
            """.write(to: configuration, atomically: true, encoding: .utf8)
            let upload = directory.appendingPathComponent("upload.bin")
            try Data(repeating: 0x41, count: 20 << 20).write(to: upload)
            let log = directory.appendingPathComponent("serve.log")
            let process = try await TokenGateProcess.start(["serve", "--config", configuration.path], log: log)
            defer { kill(process.value.processIdentifier, SIGKILL) }
            let base = "http://127.0.0.1:\(port)/api/graph"
            var ready = false
            for _ in 0..<200 where !ready {
                ready = try await curl(["-f", "-H", "Authorization: Bearer \(token)", base + "/me"]).exitCode == 0
                if !ready { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(ready)
            // A download from an API that trickles (the connection waits, suspended, for each chunk),
            // and 20 MiB sent at 200 KB/s: both still streaming at SIGTERM.
            let download = Task {
                try await curl(["-s", "-o", "/dev/null", "-H", "Authorization: Bearer \(token)", base + "/bytes?count=50000000&pause_ms=200"])
            }
            let uploading = Task {
                try await curl([
                    "-s", "-o", "/dev/null", "-w", "%{http_code}", "--limit-rate", "200k", "-X", "POST", "-H", "Authorization: Bearer \(token)",
                    "-H", "Content-Type: application/octet-stream", "--data-binary", "@\(upload.path)", base + "/upload",
                ])
            }
            try await Task.sleep(for: .milliseconds(1500))
            kill(process.value.processIdentifier, SIGTERM)
            let ended = try await offPool { () -> (Int32, Process.TerminationReason)? in
                let deadline = Date().addingTimeInterval(15)
                while process.value.isRunning, Date() < deadline { usleep(20_000) }
                return process.value.isRunning ? nil : (process.value.terminationStatus, process.value.terminationReason)
            }
            let text = String(decoding: FileManager.default.contents(atPath: log.path) ?? Data(), as: UTF8.self)
            #expect(ended?.0 == 0, "\(text.suffix(2000))")
            // Ended by exit, not by a signal (an abort would be SIGABRT and a core where allowed).
            #expect(ended?.1 == .exit)
            #expect(text.contains(#""signal":"SIGTERM""#))
            #expect(text.contains(#""message":"stopped""#))
            // Both transfers were cut, not completed: the download is incomplete, the upload never answered 200.
            let downloaded = try await download.value
            let uploaded = try await uploading.value
            #expect(downloaded.exitCode != 0)
            #expect(uploaded.stdout != "200")
            #expect(harness.graph?.uploads.isEmpty == true)
        }
    }
}

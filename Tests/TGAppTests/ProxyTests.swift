import Foundation
import HTTPTypes
import TGAppTesting
import TGCrypto
import TGHTTPClient
import TGTesting
import Testing

/// `/api/{upstream}/…` against a fake Graph-shaped API that trusts the fake provider's tokens.
/// Over real sockets: a call whose session and token are in memory is answered from the
/// connection's event loop (Sources/TGProxy/Proxy.swift), which only a served request has; uploads
/// stream and their limits are the server's; the fields checked are the ones on the wire.
@Suite struct ProxyTests {
    static let paths = #", path_prefixes: ["/me", "/echo", "/bytes", "/slow", "/status", "/users"], methods: [GET, HEAD, POST, PUT, DELETE]"#

    @Test func forwardsWithTheUpstreamTokenAndOnlyEndToEndHeaders() async throws {
        let options = Self.paths + #", headers: { X-Api-Version: "2", X-Custom: configured }"#
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: options, transport: .sockets) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let result = try await curl([
                "-i", harness.baseURL + "/api/graph/echo?$select=id,displayName&x=1", "-H", "Authorization: Bearer \(token)",
                "-H", "Cookie: tg_session=secret", "-H", "X-Forwarded-For: 6.6.6.6", "-H", "X-Forwarded-Host: evil.example",
                "-H", "Connection: keep-alive, X-Hop", "-H", "X-Hop: dropped", "-H", "X-TokenGate-Debug: 1",
                "-H", "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "-H", "X-Custom: from-app",
                "-H", "X-Other: kept",
            ])
            #expect(result.status == 200, "\(result.body)")
            let echo = result.json
            let headers = try #require(echo["headers"] as? [String: String])
            let upstreamToken = try #require(headers["authorization"]).replacingOccurrences(of: "Bearer ", with: "")
            #expect(upstreamToken != token)
            #expect(harness.fake.subject(ofAccessToken: upstreamToken) == "alice")
            #expect(echo["query"] as? String == "$select=id,displayName&x=1")
            #expect(headers["cookie"] == nil)
            #expect(headers["x-hop"] == nil)
            #expect(headers["x-tokengate-debug"] == nil)
            #expect(headers["x-forwarded-for"] == "127.0.0.1")
            #expect(headers["x-forwarded-host"] == String(harness.baseURL.dropFirst("http://".count)))
            #expect(headers["x-forwarded-proto"] == "http")
            #expect(headers["traceparent"] == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            #expect(headers["x-other"] == "kept")
            // Configured fields are added, replacing the app's.
            #expect(headers["x-api-version"] == "2")
            #expect(headers["x-custom"] == "configured")
            #expect(headers["x-request-id"] == result.header("X-Request-ID"))
            // The TokenGate token never reaches the API, in any header.
            #expect(!harness.graph!.received.contains { request in request.headerFields.contains { $0.value.contains(token) } })

            // The same call again: session and upstream token are in memory now, so it is
            // answered on the event loop (ProxyRoutes+Loop.swift), which must send the same.
            let again = try await curl([
                "-i", harness.baseURL + "/api/graph/echo?$select=id,displayName&x=1", "-H", "Authorization: Bearer \(token)",
                "-H", "Cookie: tg_session=secret", "-H", "X-Forwarded-For: 6.6.6.6", "-H", "X-Forwarded-Host: evil.example",
                "-H", "Connection: X-Hop", "-H", "X-Hop: 1", "-H", "X-TokenGate-Debug: 1",
                "-H", "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "-H", "X-Custom: from-app",
                "-H", "X-Other: kept",
            ])
            #expect(again.status == 200, "\(again.body)")
            var loopHeaders = try #require(again.json["headers"] as? [String: String])
            var taskHeaders = headers
            #expect(loopHeaders["x-request-id"] == again.header("X-Request-ID"))
            loopHeaders["x-request-id"] = nil
            taskHeaders["x-request-id"] = nil
            #expect(loopHeaders == taskHeaders)
            let scrape = try await harness.scrapeMetrics()
            #expect(scrape.contains(#"tokengate_proxy_calls_total{path="loop"} 1"#), "\(scrape)")
            #expect(scrape.contains(#"tokengate_proxy_calls_total{path="task"} 1"#))
        }
    }

    /// An API bound to another provider than the account's answers `wrong_provider`, over real
    /// sockets, both when nothing is in memory (the credential is loaded in a task) and once the
    /// session and the account's token are (memory serves only an API of the account's own
    /// provider); the API is never called. The second API's address has no server: a call that
    /// went out would answer 502, not 403.
    @Test func anAPIOfAnotherProviderRefusesTheAccountWithAndWithoutItsTokenInMemory() async throws {
        let provider = #"kind: oidc, issuer: "http://127.0.0.1:{fake_port}", client_id: tokengate, client_secret: s3cret"#
        let closedPort = try freeLoopbackPort()
        let work = #"{ name: work, base_url: "http://127.0.0.1:\#(closedPort)", provider: other, scopes: [User.Read], path_prefixes: ["/me"] }"#
        try await AuthFlowHarness.run(
            providerEntry: "{ name: fake, \(provider) }",
            moreProviders: ["{ name: other, \(provider) }"],
            withGraphAPI: true,
            upstreamOptions: Self.paths,
            moreUpstreams: [work],
            appClientOptions: ", providers: [fake]",
            transport: .sockets
        ) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            func call(_ api: String) async throws -> (Int?, String?) {
                let result = try await curl(["-i", harness.baseURL + "/api/\(api)/me", "-H", "Authorization: Bearer \(token)"])
                return (result.status, result.json["code"] as? String)
            }
            #expect(try await call("work") == (403, "wrong_provider"))
            #expect(try await call("graph") == (200, nil))
            #expect(try await call("graph") == (200, nil))
            #expect(try await call("work") == (403, "wrong_provider"))
            let scrape = try await harness.scrapeMetrics()
            // The second call to the account's own API came from memory; neither refusal did.
            #expect(scrape.contains(#"tokengate_proxy_calls_total{path="loop"} 1"#), "\(scrape)")
        }
    }

    @Test func refusesWhatTheAllowlistDoesNotOpenWithoutCallingTheAPI() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths, transport: .sockets) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            func status(_ method: String, _ path: String) async throws -> (Int?, String?) {
                let result = try await curl(["-i", "-X", method, "--path-as-is", harness.baseURL + path, "-H", "Authorization: Bearer \(token)"])
                return (result.status, result.json["code"] as? String)
            }
            #expect(try await status("GET", "/api/nope/me") == (404, "unknown_upstream"))
            #expect(try await status("PATCH", "/api/graph/me") == (405, "method_not_allowed"))
            let patch = try await curl(["-i", "-X", "PATCH", harness.baseURL + "/api/graph/me", "-H", "Authorization: Bearer \(token)"])
            #expect(patch.header("Allow") == "GET, HEAD, POST, PUT, DELETE")
            #expect(try await status("GET", "/api/graph/admin/users") == (403, "path_not_allowed"))
            #expect(try await status("GET", "/api/graph/meeting") == (403, "path_not_allowed"))
            for path in [
                "/api/graph/me/../admin", "/api/graph/me/%2e%2e/admin", "/api/graph/me/%2E%2e/admin", "/api/graph/me%2f..%2fadmin",
                "/api/graph/me//admin", "/api/graph/me/%5c..%5cadmin", "/api/graph/me/%252e%252e/admin", "/api/graph/me/%00",
                "/api/graph/me/.", "/api/graph/me/%zz",
            ] {
                let (code, problem) = try await status("GET", path)
                #expect(code == 400, "\(path) → \(code ?? 0)")
                #expect(problem == "invalid_path", "\(path)")
            }
            #expect(harness.graph!.received.isEmpty)
            // No token, or TokenGate's refresh token: 401, nothing forwarded.
            let anonymous = try await curl(["-i", harness.baseURL + "/api/graph/me"])
            #expect(anonymous.status == 401)
            #expect(harness.graph!.received.isEmpty)
        }
    }

    @Test func passesStatusesRetryAfterBinaryBodiesAndNextLinksThrough() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths, transport: .sockets) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            for code in [429, 503, 500, 404] {
                let result = try await harness.get("/api/graph/status/\(code)", bearer: token)
                #expect(result.status == code)
                #expect(result.json["status"] as? Int == code)
                if code == 429 || code == 503 { #expect(result.header("Retry-After") == "7") }
            }
            let photo = try await harness.http.send(
                .init(
                    method: .get,
                    scheme: "http",
                    authority: String(harness.baseURL.dropFirst(7)),
                    path: "/api/graph/me/photo/$value",
                    headerFields: [.authorization: "Bearer \(token)"]
                ),
                timeout: .seconds(10)
            )
            #expect(photo.head.status.code == 200)
            #expect(photo.head.headerFields[.contentType] == "image/jpeg")
            #expect(photo.body == FakeGraphAPI.photo)
            let users = try await harness.get("/api/graph/users", bearer: token)
            // The next link is the API's own, absolute URL (docs/proxy.md says how apps follow it).
            #expect((users.json["@odata.nextLink"] as? String)?.hasPrefix(harness.graph!.baseURL) == true)
        }
    }

    @Test func refreshesOnceAndRetriesWhenTheAPIRejectsTheToken() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths, transport: .sockets) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            let refreshes = harness.fake.refreshCount
            harness.graph!.rejectNextTokens(1)
            let retried = try await harness.get("/api/graph/me", bearer: token)
            #expect(retried.status == 200)
            #expect(harness.fake.refreshCount == refreshes + 1)
            // Not for a POST (it may not be repeated): the API's 401 is passed back as it is.
            harness.graph!.rejectNextTokens(1)
            let posted = try await curl([
                "-i", "-X", "POST", harness.baseURL + "/api/graph/echo", "-H", "Authorization: Bearer \(token)", "--data-raw", "x=1",
            ])
            #expect(posted.status == 401)
            #expect(posted.body.contains("InvalidAuthenticationToken"))
            #expect(harness.fake.refreshCount == refreshes + 1)
        }
    }

    @Test func answers504AfterTheTimeoutAnd502WhenTheAPIIsDown() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths + ", timeout_seconds: 1", transport: .sockets) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let slow = try await harness.get("/api/graph/slow", query: [("ms", "3000")], bearer: token)
            #expect(slow.status == 504)
            #expect(slow.json["code"] as? String == "upstream_timeout")
            await harness.graph!.stop()
            let down = try await harness.get("/api/graph/me", bearer: token)
            #expect(down.status == 502)
            #expect(down.json["code"] as? String == "upstream_unavailable")
        }
    }

    @Test func forwardsRequestBodiesUpToTheLimitAndRefusesLargerOnes() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths + ", max_body_bytes: 3000000", transport: .sockets) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("tg-body-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data(repeating: 0x41, count: 2_500_000).write(to: file)
            let accepted = try await curl([
                "-i", "-X", "PUT", harness.baseURL + "/api/graph/echo", "-H", "Authorization: Bearer \(token)",
                "-H", "Content-Type: application/octet-stream", "-H", "Expect:", "--data-binary", "@" + file.path,
            ])
            #expect(accepted.status == 200)
            #expect(accepted.json["body_count"] as? Int == 2_500_000)
            try Data(repeating: 0x41, count: 3_500_000).write(to: file)
            let refused = try await curl([
                "-i", "-X", "PUT", harness.baseURL + "/api/graph/echo", "-H", "Authorization: Bearer \(token)",
                "--data-binary", "@" + file.path,
            ])
            #expect(refused.status == 413)
        }
    }

    /// The server looks an API's limits up by the name's bytes as sent, before the route is
    /// matched: an escaped spelling of the name (`%67raph`) must not reach the API past them.
    @Test func anEscapedAPINameIsRefusedAndNeverReachesTheAPIPastItsBodyLimit() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths + ", max_body_bytes: 1024", transport: .sockets) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let body = String(repeating: "A", count: 4096)
            func post(_ path: String) async throws -> CurlResult {
                try await curl([
                    "-i", "-X", "POST", harness.baseURL + path, "-H", "Authorization: Bearer \(token)",
                    "-H", "Content-Type: application/octet-stream", "-H", "Expect:", "--data-binary", body,
                ])
            }
            let escaped = try await post("/api/%67raph/me")
            #expect(escaped.status == 404)
            #expect(escaped.json["code"] as? String == "not_found")
            #expect(try await post("/api/gr%61ph/me").status == 404)
            #expect(try await post("/api/graph/me").status == 413)
            #expect(try await curl(["-i", harness.baseURL + "/api/%67raph/me", "-H", "Authorization: Bearer \(token)"]).status == 404)
            #expect(harness.graph!.received.isEmpty)
        }
    }

    static let uploads = #", path_prefixes: ["/echo", "/upload"], methods: [GET, POST, PUT], timeout_seconds: 60"#

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func aLargeUploadStreamsByteExactToTheAPIAndAChunkedOneStaysChunked() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.uploads + ", max_body_bytes: 67108864", transport: .sockets) {
            harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("tg-upload-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: file) }
            // 32 MiB, more than the 10 MiB an API takes by default and than any buffer on the way.
            let block = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255) }
            var large: [UInt8] = []
            for index in 0..<32 {
                var copy = block
                copy[0] = UInt8(index)
                large += copy
            }
            try Data(large).write(to: file)
            let put = try await curl([
                "--max-time", "60", "-i", "-X", "PUT", harness.baseURL + "/api/graph/upload", "-H", "Authorization: Bearer \(token)", "-H", "Expect:",
                "-H", "Content-Type: application/octet-stream", "--data-binary", "@" + file.path,
            ])
            #expect(put.status == 200, "\(put.stdout.prefix(300)) \(put.stderr)")
            #expect(put.json["bytes"] as? Int == 32 << 20)
            #expect(put.json["sha256"] as? String == Self.hex(Digest.sha256(large)))
            #expect(harness.graph!.received.last?.headerFields[.contentLength] == "\(32 << 20)")

            let small = Array(large.prefix(3 << 20))
            try Data(small).write(to: file)
            let chunked = try await curl([
                "--max-time", "60", "-i", "-X", "POST", harness.baseURL + "/api/graph/upload", "-H", "Authorization: Bearer \(token)", "-H",
                "Expect:",
                "-H", "Transfer-Encoding: chunked", "--data-binary", "@" + file.path,
            ])
            #expect(chunked.status == 200, "\(chunked.stdout.prefix(300)) \(chunked.stderr)")
            #expect(chunked.json["bytes"] as? Int == 3 << 20)
            #expect(chunked.json["sha256"] as? String == Self.hex(Digest.sha256(small)))
            // Streamed on as it came: chunked, no length invented.
            #expect(harness.graph!.received.last?.headerFields[.transferEncoding] == "chunked")
            #expect(harness.graph!.received.last?.headerFields[.contentLength] == nil)
        }
    }

    @Test func aChunkedUploadOverTheLimitGets413AndTheAPINeverCompletesIt() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.uploads + ", max_body_bytes: 1000000", transport: .sockets) {
            harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("tg-upload-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data(repeating: 0x61, count: 1_500_000).write(to: file)
            let refused = try await curl([
                "-i", "-X", "POST", harness.baseURL + "/api/graph/upload", "-H", "Authorization: Bearer \(token)", "-H", "Expect:",
                "-H", "Transfer-Encoding: chunked", "--data-binary", "@" + file.path,
            ])
            // The API may have seen a prefix of the body; it never got all of it.
            #expect(refused.status == 413, "\(refused.stdout.prefix(300)) \(refused.stderr)")
            #expect(refused.json["code"] as? String == "body_too_large")
            #expect(harness.graph!.uploads.isEmpty)
            // Far past the limit the connection is closed instead of reading on.
            try Data(repeating: 0x61, count: 8_000_000).write(to: file)
            let cut = try await curl([
                "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", harness.baseURL + "/api/graph/upload",
                "-H", "Authorization: Bearer \(token)", "-H", "Expect:", "-H", "Transfer-Encoding: chunked", "--data-binary", "@" + file.path,
            ])
            #expect(cut.stdout == "000")
            #expect(harness.graph!.uploads.isEmpty)
        }
    }

    @Test func aRejectedTokenIsRetriedWithASmallBodyButAStreamedBodyGetsTheAPIs401() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.uploads, transport: .sockets) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            #expect(try await harness.get("/api/graph/echo", bearer: token).status == 200)
            let refreshes = harness.fake.refreshCount
            harness.graph!.rejectNextTokens(1)
            let small = try await curl([
                "-i", "-X", "PUT", harness.baseURL + "/api/graph/upload", "-H", "Authorization: Bearer \(token)", "-H", "Expect:",
                "--data-binary", String(repeating: "s", count: 1000),
            ])
            #expect(small.status == 200)
            #expect(small.json["bytes"] as? Int == 1000)
            #expect(harness.fake.refreshCount == refreshes + 1)

            let file = FileManager.default.temporaryDirectory.appendingPathComponent("tg-upload-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data(repeating: 0x62, count: 300_000).write(to: file)
            harness.graph!.rejectNextTokens(1)
            let large = try await curl([
                "-i", "-X", "PUT", harness.baseURL + "/api/graph/upload", "-H", "Authorization: Bearer \(token)", "-H", "Expect:",
                "--data-binary", "@" + file.path,
            ])
            #expect(large.status == 401)
            #expect(large.body.contains("InvalidAuthenticationToken"))
            #expect(harness.fake.refreshCount == refreshes + 1)
        }
    }
}

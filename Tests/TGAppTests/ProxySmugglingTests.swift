import Foundation
import TGAppTesting
import TGPostgres
import TGTesting
import Testing

/// Path and header spellings that real servers (Tomcat, IIS, Spring, nginx, Apache) read as
/// traversal, another method or another URL are refused before anything reaches the API; the
/// API's own origin does not leak through `Location`. Hostile input as data.
/// Over real sockets: the spellings are the request lines a client sends (`--path-as-is`).
@Suite struct ProxySmugglingTests {
    /// Each is a path under `/api/graph`; every one must be 400 `invalid_path`.
    static let traversalCorpus: [String] = [
        // Tomcat / Spring path parameters (`;`) hiding dot segments or confusing the router.
        "/me/..;/admin", "/me/.;/admin", "/..;/admin", "/me/%2e%2e;/admin", "/me/%2E%2E%3B/admin", "/me;/../admin",
        "/me/..;jsessionid=x/admin", "/;/admin", "/me/;x=1/admin", "/me;x=1", "/me%3bx=1", "/me/%3B/admin",
        // Dot segments spelled every way.
        "/me/../admin", "/me/./admin", "/me/%2e%2e/admin", "/me/%2e/admin", "/me/.%2e/admin", "/me/%2e./admin", "/me/...",
        "/me/..%20/admin", "/me/..%09/admin", "/me/%2e%2e%20/admin", "/me/..%00/admin",
        // IIS: %u escapes, overlong UTF-8, backslashes.
        "/me/%u002e%u002e/admin", "/me/%c0%ae%c0%ae/admin", "/me/%c0%af", "/me/%e0%80%ae%e0%80%ae/admin", "/me/..%5cadmin",
        "/me/..\\admin", "/me\\..\\admin", "/me/%5c../admin", "/me/%c1%9c",
        // Unicode look-alikes a normalising server turns into dots or slashes.
        "/me/%ef%bc%8e%ef%bc%8e/admin", "/me/%e2%80%a4%e2%80%a4/admin", "/me/%ef%bc%8fadmin", "/me/%ef%bc%bcadmin", "/me/%ef%b9%92%ef%b9%92",
        // Encoded slashes, double and triple encoding.
        "/me%2f..%2fadmin", "/me/%2F", "/me/%252e%252e/admin", "/me/%252f", "/me/%25252e%25252e/admin", "/me/%255c", "/me/%2525",
        "/me/%253b/admin", "/me/%25%32%65",
        // An escape after a `%` that is not one (`%%2f`, `%zz%2e`), IIS's `%u` escaped once more,
        // and a fullwidth `％２ｅ` that NFKC turns into an escape: a second decoding makes them
        // `%/../admin`, `..` and `.`.
        "/me/%25%252f..%252fadmin", "/me/%25zz%252e%252e", "/me/x%25-%252e%252e", "/me/%25u002e%25u002e/admin",
        "/me/%25U002E", "/me/%ef%bc%85%ef%bc%92%ef%bd%85",
        // Control characters and NUL.
        "/me/%00", "/me/%0d%0aX-Injected:%201", "/me/%0a", "/me/%09", "/me/%7f", "/me/%c2%85", "/me/%c2%9f",
        // Empty segments and bad escapes.
        "/me//admin", "//admin", "/me/%zz", "/me/%", "/me/%2",
    ]

    /// Paths that look odd but are plain, and reach the API.
    static let legitimate: [String] = [
        "/me", "/me/photo/$value", "/users/a.b", "/drive/root:/file.txt:/content", "/users/me..too", "/sites/x%20y",
        "/users('a%40b.example')", "/me/.hidden", "/me/a%2Bb", "/users/%C3%A9t%C3%A9",
        // A `%` in a name that no second decoding would change.
        "/drive/root:/100%25.txt:/content", "/drive/root:/50%25%20off.txt:/content", "/me/%25use",
    ]

    @Test func everyTraversalSpellingIsRefusedAndNeverReachesTheAPI() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, transport: .sockets) { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            #expect(try await h.get("/api/graph/me", bearer: token).status == 200)
            let before = h.graph!.received.count
            for path in Self.traversalCorpus {
                let result = try await curl(["-i", "--path-as-is", h.baseURL + "/api/graph" + path, "-H", "Authorization: Bearer \(token)"])
                // 400 from TokenGate (or from the HTTP server, for a request line it cannot parse).
                #expect(result.status == 400, "\(path) → \(result.status.map(String.init) ?? result.stderr)")
                if result.json["code"] != nil { #expect(result.json["code"] as? String == "invalid_path", "\(path)") }
            }
            #expect(h.graph!.received.count == before, "\(h.graph!.received.dropFirst(before).map(\.path))")
        }
    }

    @Test func plainPathsThatOnlyLookOddReachTheAPIAsSent() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, transport: .sockets) { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            for path in Self.legitimate {
                let before = h.graph!.received.count
                let result = try await curl(["-i", "--path-as-is", h.baseURL + "/api/graph" + path, "-H", "Authorization: Bearer \(token)"])
                #expect(result.status != 400, "\(path) → \(result.status ?? 0) \(result.body)")
                #expect(h.graph!.received.count == before + 1, "\(path) did not reach the API")
            }
        }
    }

    /// Fields some frameworks read as another method or another URL never reach the API.
    @Test func methodAndURLOverrideHeadersAreNotForwarded() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, transport: .sockets) { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let smuggled = [
                "X-HTTP-Method-Override: DELETE", "X-HTTP-Method: DELETE", "X-Method-Override: DELETE", "X-Original-URL: /admin",
                "X-Rewrite-URL: /admin", "X-Override-URL: /admin", "X-Original-Method: DELETE", "X-Forwarded-Path: /admin",
            ]
            let result = try await h.get("/api/graph/echo", bearer: token, headers: smuggled + ["X-Kept: yes"])
            #expect(result.status == 200)
            let headers = try #require(result.json["headers"] as? [String: String])
            for line in smuggled {
                let name = String(line.prefix { $0 != ":" }).lowercased()
                #expect(headers[name] == nil, "\(name) was forwarded")
            }
            #expect(headers["x-kept"] == "yes")
        }
    }

    /// An API's `Location` that points at the API itself is rewritten to TokenGate's URL for it;
    /// others pass as they are.
    @Test func aLocationAtTheAPIsOwnOriginBecomesTokenGatesURL() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, transport: .sockets) { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let gateway = h.baseURL + "/api/graph"
            let base = h.graph!.baseURL  // http://127.0.0.1:PORT
            let port = try #require(URLComponents(string: base)?.port)
            let cases: [(String, String)] = [
                (base + "/users/1?x=2#f", gateway + "/users/1?x=2#f"),
                ("HTTP://127.0.0.1:\(port)/me", gateway + "/me"),
                (base, gateway),
                ("/relative/path", "/relative/path"),
                ("https://elsewhere.example/x", "https://elsewhere.example/x"),
                ("http://127.0.0.1:\(port + 1)/me", "http://127.0.0.1:\(port + 1)/me"),
                ("http://127.0.0.1:\(port)@evil.example/me", "http://127.0.0.1:\(port)@evil.example/me"),
                // A network-path reference names the API's host and port as well.
                ("//127.0.0.1:\(port)/me?x=1", gateway + "/me?x=1"),
                ("//127.0.0.1:\(port + 1)/me", "//127.0.0.1:\(port + 1)/me"),
                ("//elsewhere.example/me", "//elsewhere.example/me"),
            ]
            for (location, expected) in cases {
                let answer = try await h.get("/api/graph/redirect", query: [("to", location)], bearer: token)
                #expect(answer.status == 302)
                #expect(answer.header("Location") == expected, "\(location)")
            }
            let created = try await h.get("/api/graph/redirect", query: [("to", base + "/items/9"), ("status", "201")], bearer: token)
            #expect(created.header("Location") == gateway + "/items/9")
        }
    }

    /// Token exchange hands a provider token to the app: only for APIs that allow it.
    @Test func tokenExchangeIsOffUnlessTheUpstreamAllowsIt() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, transport: .sockets) { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            for extra in [[("resource", "graph")], [("scope", "User.Read")]] {
                let answer = try await h.post(
                    "/auth/token",
                    form: [
                        ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("subject_token", token),
                        ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"),
                    ] + extra
                )
                #expect(answer.status == 400)
                #expect(["invalid_target", "invalid_scope"].contains(answer.json["error"] as? String ?? ""))
                #expect((answer.json["error_description"] as? String ?? "").contains("token_exchange"))
                #expect(answer.json["access_token"] == nil)
            }
        }
    }
}

import Foundation
import HTTPTypes
import TGAppTesting
import TGTesting
import Testing

/// `rewrite_links` (docs/proxy.md, "Next links and other absolute URLs") over real sockets,
/// against the fake Graph-shaped API under `/v1.0`: the links of its JSON answers and `Link`
/// fields that point at it become TokenGate's, on both the async path and the event loop's, and
/// nothing else changes.
@Suite struct ProxyLinkTests {
    static let on = ", rewrite_links: true"

    /// `path` of the API through TokenGate, with a fresh login: the first call takes the async
    /// path (the session is not in memory yet), the second the event loop's. Both must answer
    /// alike (but for the request id and the date); the second answer is returned.
    func twice(_ h: AuthFlowHarness, _ path: String, method: String = "GET") async throws -> TestResponse {
        let token = try #require(try await h.logIn()["access_token"] as? String)
        var answers: [TestResponse] = []
        for _ in 0..<2 {
            let url = h.baseURL + "/api/graph" + path
            answers.append(TestResponse(try await curl([method == "HEAD" ? "-I" : "-i", url, "-H", "Authorization: Bearer \(token)"])))
        }
        let (first, second) = (answers[0], answers[1])
        #expect(first.status == second.status, "\(path)")
        #expect(first.bytes == second.bytes, "\(path): the two paths answered different bodies")
        func kept(_ fields: HTTPFields) -> [String] {
            fields.filter { $0.name != HTTPField.Name("X-Request-ID")! && $0.name != .date }.map { "\($0.name): \($0.value)" }
        }
        #expect(kept(first.headerFields) == kept(second.headerFields), "\(path)")
        return second
    }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func nestedNextAndDeltaLinksBecomeTokenGatesWithTheBodysNewLength() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, graphBasePath: "/v1.0", upstreamOptions: Self.on, transport: .sockets) { h in
            let api = h.graph!.apiURL
            let gate = h.baseURL + "/api/graph"
            let body = """
                {"@odata.context":"\(api)/$metadata#users","value":[{"id":"1","manager":{"@odata.id":"\(api)/users/2"},
                "n":[1,2.5,true,null]},[["\(api)/deep?x=1#f"]]],"@odata.nextLink":"\(api)/users?$skiptoken=X%2BY",
                "@odata.deltaLink" : "\(api)/users/delta?$deltatoken=Y"}
                """
            h.graph!.serve("/page", body: Self.bytes(body))
            h.graph!.serve("/page-chunked", body: Self.bytes(body), chunked: true)
            for path in ["/page", "/page-chunked"] {
                let answer = try await twice(h, path)
                #expect(answer.status == 200)
                #expect(answer.body == body.replacingOccurrences(of: api, with: gate), "\(path)")
                // Sent in one piece with its own length, also when the API's body was chunked.
                #expect(answer.header("Content-Length") == String(answer.bytes.count), "\(path)")
                #expect(answer.header("Transfer-Encoding") == nil, "\(path)")
                #expect(answer.json["@odata.nextLink"] as? String == gate + "/users?$skiptoken=X%2BY")
            }
            let scrape = try await h.scrapeMetrics()
            #expect(scrape.contains(#"tokengate_proxy_link_rewrites_total{outcome="rewritten"} 4"#), "\(scrape)")
            #expect(scrape.contains(#"tokengate_proxy_calls_total{path="loop"} 2"#))
        }
    }

    @Test func escapedLinksAreRewrittenAndTheBodyStillDecodesToTheURL() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, graphBasePath: "/v1.0", upstreamOptions: Self.on, transport: .sockets) { h in
            let api = h.graph!.apiURL
            let gate = h.baseURL + "/api/graph"
            let escaped = api.replacingOccurrences(of: "/", with: "\\/")
            // `\/` and `\u0026` in one link, `\u002F` in another.
            let other = escaped.replacingOccurrences(of: "\\/v1.0", with: "\\u002Fv1.0") + "\\u002Fme"
            let body = #"{"@odata.nextLink":"\#(escaped)\/users?$skiptoken=a\u0026b","other":"\#(other)"}"#
            h.graph!.serve("/escaped", body: Self.bytes(body))
            let answer = try await twice(h, "/escaped")
            #expect(answer.body.contains(gate.replacingOccurrences(of: "/", with: "\\/") + #"\/users?$skiptoken=a\u0026b""#), "\(answer.body)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.bytes)) as? [String: Any], "\(answer.body)")
            #expect(object["@odata.nextLink"] as? String == gate + "/users?$skiptoken=a&b")
            #expect(object["other"] as? String == gate + "/me")
        }
    }

    @Test func foreignLookAlikeOtherPortAndOutsideTheBasePathLinksStayByteForByte() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, graphBasePath: "/v1.0", upstreamOptions: Self.on, transport: .sockets) { h in
            let origin = h.graph!.baseURL  // http://127.0.0.1:PORT
            let port = try #require(URLComponents(string: origin)?.port)
            let links = [
                "http://127.0.0.2:\(port)/v1.0/me", "http://127.0.0.1:\(port + 1)/v1.0/me", "https://127.0.0.1:\(port)/v1.0/me",
                "\(origin)/v1.0evil/me", "\(origin)/v2.0/me", "\(origin)/", "http://127.0.0.1:\(port)@evil.example/v1.0/me",
                "http://127.0.0.1.evil.example:\(port)/v1.0/me", "http://evil.example/?next=\(origin)/v1.0/me",
                "\(origin)/v1.0/../auth/logout", "see \(origin)/v1.0/me",
            ]
            let body = "{\"links\": [" + links.map { "\"\($0)\"" }.joined(separator: ", ") + "]}"
            h.graph!.serve("/foreign", body: Self.bytes(body))
            let answer = try await twice(h, "/foreign")
            #expect(answer.bytes == Self.bytes(body))
            #expect(answer.header("Content-Length") == String(body.utf8.count))
            let scrape = try await h.scrapeMetrics()
            #expect(scrape.contains(#"tokengate_proxy_link_rewrites_total{outcome="no_links"} 2"#), "\(scrape)")
        }
    }

    @Test func withTheSwitchOffBodiesAndLinkFieldsPassByteForByte() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, graphBasePath: "/v1.0", transport: .sockets) { h in
            let api = h.graph!.apiURL
            let body = #"{"value":[{"a":{"b":"\#(api)/users/2"}}],"@odata.nextLink":"\#(api)/users?$skiptoken=X"}"#
            let link = "<\(api)/users?$skiptoken=X>; rel=\"next\""
            h.graph!.serve("/page", fields: [("Content-Type", "application/json"), ("Link", link)], body: Self.bytes(body))
            h.graph!.serve("/page-chunked", body: Self.bytes(body), chunked: true)
            for path in ["/page", "/page-chunked"] {
                let answer = try await twice(h, path)
                #expect(answer.bytes == Self.bytes(body), "\(path)")
            }
            #expect(try await twice(h, "/page").header("Link") == link)
            let scrape = try await h.scrapeMetrics()
            #expect(!scrape.contains("tokengate_proxy_link_rewrites_total{"), "\(scrape)")
        }
    }

    @Test func bodiesOverTheLimitPassByteIdenticalWhetherTheirLengthIsKnownOrNot() async throws {
        let options = Self.on + ", rewrite_max_body_bytes: 100000"
        try await AuthFlowHarness.run(withGraphAPI: true, graphBasePath: "/v1.0", upstreamOptions: options, transport: .sockets) { h in
            let api = h.graph!.apiURL
            let gate = h.baseURL + "/api/graph"
            // About 300 KB of links, three times the limit.
            let large = "{\"value\":[" + (0..<6000).map { "\"\(api)/items/\($0)\"" }.joined(separator: ",") + "],\"n\":\"\(api)/next\"}"
            h.graph!.serve("/large", body: Self.bytes(large))
            h.graph!.serve("/large-chunked", body: Self.bytes(large), chunked: true)
            let known = try await twice(h, "/large")
            #expect(known.bytes == Self.bytes(large))
            #expect(known.header("Content-Length") == String(large.utf8.count))
            let chunked = try await twice(h, "/large-chunked")
            #expect(chunked.bytes == Self.bytes(large))
            #expect(chunked.header("Transfer-Encoding") == "chunked")
            #expect(chunked.header("Content-Length") == nil)

            // At the limit exactly a chunked body is rewritten; one byte more and it is not.
            let link = "{\"n\":\"\(api)/next\"}"
            let atLimit = link + String(repeating: " ", count: 100_000 - link.utf8.count)
            h.graph!.serve("/at-limit", body: Self.bytes(atLimit), chunked: true)
            h.graph!.serve("/past-limit", body: Self.bytes(atLimit + " "), chunked: true)
            let rewritten = try await twice(h, "/at-limit")
            #expect(rewritten.bytes == Self.bytes(atLimit.replacingOccurrences(of: api, with: gate)))
            #expect(rewritten.header("Content-Length") == String(rewritten.bytes.count))
            let passed = try await twice(h, "/past-limit")
            #expect(passed.bytes == Self.bytes(atLimit + " "))
            #expect(passed.header("Transfer-Encoding") == "chunked")
            let scrape = try await h.scrapeMetrics()
            #expect(scrape.contains(#"tokengate_proxy_link_rewrites_total{outcome="too_large"} 6"#), "\(scrape)")
        }
    }

    @Test func onlyUncompressedTransformableJSONIsRewritten() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, graphBasePath: "/v1.0", upstreamOptions: Self.on, transport: .sockets) { h in
            let api = h.graph!.apiURL
            let gate = h.baseURL + "/api/graph"
            let json = #"{"next":"\#(api)/me"}"#
            let unchanged: [(String, [(String, String)], String)] = [
                ("/text", [("Content-Type", "text/plain")], "next: \(api)/me"),
                ("/html", [("Content-Type", "text/html; charset=utf-8")], #"<a href="\#(api)/me">"#),
                ("/gzip", [("Content-Type", "application/json"), ("Content-Encoding", "gzip")], json),
                ("/no-transform", [("Content-Type", "application/json"), ("Cache-Control", "no-transform")], json),
                ("/digest", [("Content-Type", "application/json"), ("Content-Digest", "sha-256=:x:")], json),
                ("/utf16", [("Content-Type", "application/json; charset=utf-16")], json),
                ("/invalid", [("Content-Type", "application/json")], #"{"next":"\#(api)/me",}"#),
            ]
            for (path, fields, body) in unchanged {
                h.graph!.serve(path, fields: fields, body: Self.bytes(body))
                #expect(try await twice(h, path).bytes == Self.bytes(body), "\(path)")
            }
            h.graph!.serve("/problem", status: 404, fields: [("Content-Type", "application/problem+json; charset=UTF-8")], body: Self.bytes(json))
            let problem = try await twice(h, "/problem")
            #expect(problem.status == 404)
            #expect(problem.body == json.replacingOccurrences(of: api, with: gate))
        }
    }

    /// Apps' HTTP stacks ask for gzip by themselves, and a compressed answer passes unchanged;
    /// the entry's `headers` can ask the API for uncompressed answers instead (docs/proxy.md).
    @Test func anEntryCanAskTheAPIForUncompressedAnswersWhateverTheAppAccepts() async throws {
        let options = Self.on + #", headers: { Accept-Encoding: identity }"#
        try await AuthFlowHarness.run(withGraphAPI: true, graphBasePath: "/v1.0", upstreamOptions: options, transport: .sockets) { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let echo = try await h.get("/api/graph/echo", bearer: token, headers: ["Accept-Encoding: gzip, deflate, br"])
            #expect((echo.json["headers"] as? [String: String])?["accept-encoding"] == "identity")
            #expect(echo.json["path"] as? String == "/echo")
        }
    }

    @Test func linkFieldTargetsThatPointAtTheAPIAreRewritten() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, graphBasePath: "/v1.0", upstreamOptions: Self.on, transport: .sockets) { h in
            let api = h.graph!.apiURL
            let gate = h.baseURL + "/api/graph"
            let next = #"<\#(api)/users?page=2>; rel="next", <https://elsewhere.example/v1.0/x>; rel="help"; title="a, <b>""#
            let previous = #"<\#(api)/users?page=0>; rel="prev""#
            for (path, type) in [("/linked", "application/json"), ("/linked-photo", "image/jpeg")] {
                h.graph!.serve(path, fields: [("Content-Type", type), ("Link", next), ("Link", previous)], body: Self.bytes("{}"))
                for method in ["GET", "HEAD"] {
                    let answer = try await twice(h, path, method: method)
                    #expect(answer.status == 200)
                    #expect(
                        answer.headerFields[values: HTTPField.Name("Link")!] == [
                            next.replacingOccurrences(of: api, with: gate), previous.replacingOccurrences(of: api, with: gate),
                        ],
                        "\(method) \(path)"
                    )
                }
            }
        }
    }

    @Test func followingARewrittenNextLinkThroughTokenGateReachesTheNextPage() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, graphBasePath: "/v1.0", upstreamOptions: Self.on, transport: .sockets) { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            let gate = h.baseURL + "/api/graph"
            let first = try await h.get("/api/graph/users", bearer: token)
            let next = try #require(first.json["@odata.nextLink"] as? String)
            #expect(next == gate + "/users?$skiptoken=2")
            // The app follows it as it is, with its TokenGate token: TokenGate's URL, not the API's.
            let second = TestResponse(try await curl(["-i", next, "-H", "Authorization: Bearer \(token)"]))
            #expect(second.status == 200)
            #expect((second.json["value"] as? [[String: Any]])?.first?["id"] as? String == "2")
            #expect(second.json["@odata.deltaLink"] as? String == gate + "/users/delta?$deltatoken=d1")
            #expect(h.graph!.received.last?.path == "/v1.0/users")
            #expect(h.graph!.received.count == 2)
        }
    }
}

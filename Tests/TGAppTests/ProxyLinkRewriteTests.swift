import Foundation
import HTTPTypes
import TGTesting
import Testing

@testable import TGApp
@testable import TGHTTPClient
@testable import TGProxy

/// The rule that makes an API's links TokenGate's (``ProxyLocation``), its JSON rewriter
/// (``ProxyJSONLinks``), `Link` fields and which answers are rewritten: pure functions, no server.
@Suite struct ProxyLinkRewriteTests {
    static let location = ProxyLocation(baseURL: "https://graph.example/v1.0", name: "graph", publicBaseURL: "https://gate.example")!
    static let gate = "https://gate.example/api/graph"

    func rewrite(_ json: String, _ location: ProxyLocation = Self.location) -> ProxyJSONLinks.Outcome {
        ProxyJSONLinks.rewrite(Array(json.utf8), with: location)
    }

    func rewritten(_ json: String) -> String? {
        guard case .rewritten(let bytes) = rewrite(json) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test func aURLUnderTheBaseURLBecomesTokenGatesWithItsQueryAndFragmentKept() {
        let cases: [(String, String)] = [
            ("https://graph.example/v1.0/users?$skiptoken=a|b%20c&$top=5#part", Self.gate + "/users?$skiptoken=a|b%20c&$top=5#part"),
            ("HTTPS://Graph.EXAMPLE:443/v1.0/me", Self.gate + "/me"),
            ("https://graph.example:/v1.0/me", Self.gate + "/me"),
            ("https://graph.example/v1.0", Self.gate),
            ("https://graph.example/v1.0/", Self.gate + "/"),
            ("https://graph.example/v1.0?x=1", Self.gate + "?x=1"),
            ("https://graph.example/v1.0#f", Self.gate + "#f"),
            ("//graph.example/v1.0/me/messages", Self.gate + "/me/messages"),
            ("https://graph.example/v1.0/users('a%40b.example')/photo/$value", Self.gate + "/users('a%40b.example')/photo/$value"),
        ]
        for (link, expected) in cases { #expect(Self.location.rewrite(link) == expected, "\(link)") }
    }

    @Test func foreignLookAlikeOtherPortAndOutsideTheBasePathURLsAreLeftAlone() {
        let unchanged = [
            "https://graph.example/v1.0evil", "https://graph.example/v1.0evil/x", "https://graph.example/v1.00/x",
            "https://graph.example/v2.0/me", "https://graph.example/", "https://graph.example", "https://graph.example/V1.0/me",
            "https://graph.example@evil.example/v1.0/me", "https://user:pw@graph.example/v1.0/me", "https://graph.example\\@evil.example/v1.0",
            "https://graph.example.evil.example/v1.0/me", "https://evil.example/v1.0/me", "https://evilgraph.example/v1.0/me",
            "https://graph.example./v1.0/me", "https://graph%2Eexample/v1.0/me", "https://graph.example:8443/v1.0/me",
            "https://graph.example:99999/v1.0/me", "https://graph.example:44x/v1.0/me", "http://graph.example/v1.0/me",
            "ftp://graph.example/v1.0/me", "/v1.0/me", "v1.0/me", "graph.example/v1.0/me", "mailto:admin@graph.example", "",
            "https:", "https://", "//", "https://:443/v1.0/me", "https:/graph.example/v1.0/me",
            // Paths TokenGate would refuse: the app's URL parser would move `/api/graph/../x` elsewhere.
            "https://graph.example/v1.0/../auth/logout", "https://graph.example/v1.0/me/%2e%2e/x", "https://graph.example/v1.0//me",
            "https://graph.example/v1.0/me;x=1", "https://graph.example/v1.0/a b", "https://graph.example/v1.0/café",
        ]
        for link in unchanged { #expect(Self.location.rewrite(link) == nil, "\(link)") }
    }

    @Test func theRuleReadsPortsIPv6AndBaseURLsWithoutAPathOrWithATrailingSlash() throws {
        let origin = try #require(ProxyLocation(baseURL: "http://127.0.0.1:8080", name: "dev", publicBaseURL: "https://gate.example/tg/"))
        #expect(origin.rewrite("http://127.0.0.1:8080/me?x=1") == "https://gate.example/tg/api/dev/me?x=1")
        #expect(origin.rewrite("http://127.0.0.1:8080") == "https://gate.example/tg/api/dev")
        #expect(origin.rewrite("http://127.0.0.1/me") == nil)
        #expect(origin.rewrite("http://127.0.0.1:80/me") == nil)
        let slash = try #require(ProxyLocation(baseURL: "https://graph.example/v1.0/", name: "graph", publicBaseURL: "https://gate.example"))
        #expect(slash.rewrite("https://graph.example/v1.0/me") == Self.gate + "/me")
        #expect(slash.rewrite("https://graph.example/v1.0evil") == nil)
        let six = try #require(ProxyLocation(baseURL: "http://[::1]:8080/api", name: "six", publicBaseURL: "https://gate.example"))
        #expect(six.rewrite("http://[::1]:8080/api/x") == "https://gate.example/api/six/x")
        #expect(six.rewrite("http://[::1]/api/x") == nil)
        #expect(six.rewrite("http://[::2]:8080/api/x") == nil)
        let defaultPort = try #require(ProxyLocation(baseURL: "https://graph.example:443/v1.0", name: "graph", publicBaseURL: "https://gate.example"))
        #expect(defaultPort.rewrite("https://graph.example/v1.0/me") == Self.gate + "/me")
    }

    @Test func nestedNextAndDeltaLinksInAnyStringValueAreRewrittenAndNothingElse() throws {
        let body = """
            {"@odata.context":"https://graph.example/v1.0/$metadata#users",
             "value": [ {"id": "1", "links": {"self": "https://graph.example/v1.0/users/1", "n": [1, -2.5e+3, true, null]}},
                        ["https://graph.example/v1.0/a", ["https://elsewhere.example/v1.0/a"]] ],
             "https://graph.example/v1.0/key": "a key is a name, not a link",
             "@odata.nextLink" : "https://graph.example/v1.0/users?$skiptoken=X%2BY",
             "@odata.deltaLink":"https://graph.example/v1.0/users/delta?$deltatoken=Z"}
            """
        let expected =
            body
            .replacingOccurrences(of: "\"https://graph.example/v1.0/$metadata", with: "\"\(Self.gate)/$metadata")
            .replacingOccurrences(of: "\"https://graph.example/v1.0/users", with: "\"\(Self.gate)/users")
            .replacingOccurrences(of: "\"https://graph.example/v1.0/a\"", with: "\"\(Self.gate)/a\"")
        #expect(rewritten(body) == expected)
        let output = try #require(rewritten(body))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        #expect(object["@odata.nextLink"] as? String == Self.gate + "/users?$skiptoken=X%2BY")
        #expect(object["https://graph.example/v1.0/key"] as? String == "a key is a name, not a link")
        // A body whose only string is a link, and one without any link.
        #expect(rewritten(#""https://graph.example/v1.0/me""#) == #""\#(Self.gate)/me""#)
        #expect(rewrite(#"{"a":["https://elsewhere.example/v1.0/me",1,{}],"b":[],"c":{}}"#) == .unchanged)
        #expect(rewrite("  1.5e-3 ") == .unchanged)
    }

    @Test func escapedLinksAreRewrittenInTheirOwnEscapingAndStayValidJSON() throws {
        let cases: [(String, String, String)] = [
            (
                #"{"next":"https:\/\/graph.example\/v1.0\/users?a=1\u0026b=2"}"#,
                #"{"next":"https:\/\/gate.example\/api\/graph\/users?a=1\u0026b=2"}"#,
                Self.gate + "/users?a=1&b=2"
            ),
            (
                #"{"next":"https:\u002F\u002Fgraph.example\u002Fv1.0\u002Fme"}"#,
                #"{"next":"https:\u002F\u002Fgate.example\u002Fapi\u002Fgraph\u002Fme"}"#,
                Self.gate + "/me"
            ),
            (
                #"{"next":"https://graph.example/v1.0/search?q=caf\u00e9\ud83d\ude00\"x\"\\"}"#,
                #"{"next":"https://gate.example/api/graph/search?q=caf\u00e9\ud83d\ude00\"x\"\\"}"#,
                Self.gate + "/search?q=café😀\"x\"\\"
            ),
            (
                #"{"next":"\u0068ttps://graph.example/v1.0/me?tab=\t"}"#,
                #"{"next":"\u0068ttps://gate.example/api/grap\u0068/me?tab=\t"}"#,
                Self.gate + "/me?tab=\t"
            ),
        ]
        for (body, expected, url) in cases {
            let output = try #require(rewritten(body), "\(body)")
            #expect(output == expected)
            let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
            #expect(object?["next"] as? String == url)
        }
        // An escaped look-alike is still a look-alike; a lone surrogate is no text, hence no link,
        // and the body is still rewritten elsewhere.
        #expect(rewrite(#"{"a":"https:\/\/graph.example\u0040evil.example\/v1.0\/me"}"#) == .unchanged)
        #expect(rewritten(#"{"a":"\ud800","b":"https://graph.example/v1.0/me"}"#) == #"{"a":"\ud800","b":"\#(Self.gate)/me"}"#)
    }

    @Test func aBodyThatIsNotOneValidJSONValueIsLeftAlone() {
        let link = "\"https://graph.example/v1.0/me\""
        let invalid = [
            "", " ", "{", "{\"a\":\(link)", "{\"a\":\(link),}", "[\(link),]", "[\(link)", "{\"a\" \(link)}", "{\(link)}", "[01]", "[1.]",
            "[1e]", "[-]", "[+1]", "[.5]", "[nul]", "[True]", "{} {}", "\(link) x", "[\"\\x\"]", "[\"\\u12\"]", "[\"a\nb\"]", "\"abc",
            "\u{FEFF}{\"a\":\(link)}", "{\"a\":\(link)]", "[\(link)}", "{,}", "[,1]", "{\"a\":1,,\"b\":2}", "'\(link)'",
        ]
        for body in invalid { #expect(rewrite(body) == .invalid, "\(body)") }
    }

    @Test func deepNestingIsReadWithoutRecursion() {
        let depth = 200_000
        let body = String(repeating: "[", count: depth) + "\"https://graph.example/v1.0/me\"" + String(repeating: "]", count: depth)
        guard case .rewritten(let bytes) = rewrite(body) else {
            Issue.record("not rewritten")
            return
        }
        #expect(bytes.count == body.utf8.count + Self.gate.utf8.count - "https://graph.example/v1.0".utf8.count)
        #expect(rewrite(String(repeating: "[", count: depth)) == .invalid)
    }

    @Test func linkFieldTargetsAreRewrittenAndTheirParametersKept() throws {
        let rewrite = ProxyLinkRewrite(location: Self.location, maxBodyBytes: 1 << 20, metrics: nil)
        func field(_ value: String) -> String? {
            var text = value
            return text.withUTF8 { rewrite.rewriteLinkField($0) }.map { String(decoding: $0, as: UTF8.self) }
        }
        #expect(
            field(
                #"<https://graph.example/v1.0/users?page=2>; rel="next", <https://elsewhere.example/x>; rel="help"; title="a, <b>", </v1.0/x>; rel=up"#
            )
                == #"<\#(Self.gate)/users?page=2>; rel="next", <https://elsewhere.example/x>; rel="help"; title="a, <b>", </v1.0/x>; rel=up"#
        )
        #expect(
            field(#",<https://graph.example/v1.0/a>;rel=next,  <https://graph.example/v1.0/b>"#) == ",<\(Self.gate)/a>;rel=next,  <\(Self.gate)/b>"
        )
        #expect(field(#"<https://graph.example/v1.0/a>; title="a \"q\", b"; rel=next"#) == #"<\#(Self.gate)/a>; title="a \"q\", b"; rel=next"#)
        // Nothing to rewrite, or not link-values: the field stays as it is.
        #expect(field(#"<https://graph.example@evil.example/v1.0/a>; rel="next""#) == nil)
        #expect(field(#"https://graph.example/v1.0/a; rel="next""#) == nil)
        #expect(field(#"<https://graph.example/v1.0/a; rel="next""#) == nil)
        #expect(field(#"<https://graph.example/v1.0/a>; title="open"#) == nil)
    }

    @Test func onlyWholeUncompressedTransformableJSONBodiesWithinTheLimitAreRead() {
        let rewrite = ProxyLinkRewrite(location: Self.location, maxBodyBytes: 1000, metrics: nil)
        func plan(_ fields: [(String, String)], status: Int = 200) -> ProxyLinkRewrite.Plan {
            // The proxy reads the fields from libcurl's bytes.
            let head = RawHead(status: status, bytes: Array(fields.map { "\($0.0): \($0.1)\r\n" }.joined().utf8))
            return rewrite.plan(status: status, contentLength: head.contentLength) { head.forEachField($0) }
        }
        let json = ("Content-Type", "application/json")
        for type in [
            "application/json", "Application/JSON", "application/json; charset=utf-8", "application/json;charset=\"UTF-8\"",
            "application/json;odata.metadata=minimal;odata.streaming=true;IEEE754Compatible=false;charset=utf-8",
            "application/problem+json", "application/vnd.api+json; charset=utf-8",
        ] {
            #expect(plan([("Content-Type", type)]) == .read, "\(type)")
        }
        for type in ["text/plain", "text/json", "application/jsonp", "application/json; charset=utf-16", "application/x-json", "image/png"] {
            #expect(plan([("Content-Type", type)]) == .pass(nil), "\(type)")
        }
        #expect(plan([]) == .pass(nil))
        #expect(plan([json, json]) == .pass(nil))
        #expect(plan([json, ("Content-Encoding", "gzip")]) == .pass(.compressed))
        #expect(plan([json, ("Content-Encoding", "br")]) == .pass(.compressed))
        #expect(plan([json, ("Content-Encoding", "identity")]) == .read)
        #expect(plan([json, ("Cache-Control", "private, No-Transform")]) == .pass(.noTransform))
        #expect(plan([json, ("Cache-Control", "no-cache, max-age=0")]) == .read)
        for digest in ["Content-Digest", "Repr-Digest", "Digest", "Content-MD5"] {
            #expect(plan([json, (digest, "sha-256=:AAAA:")]) == .pass(.noTransform), "\(digest)")
        }
        #expect(plan([json, ("Content-Length", "1000")]) == .read)
        #expect(plan([json, ("Content-Length", "0")]) == .pass(nil))
        #expect(plan([json, ("Content-Length", "1001")]) == .pass(.tooLarge))
        #expect(plan([json, ("Content-Range", "bytes 0-9/100")], status: 206) == .pass(nil))
        #expect(plan([json], status: 204) == .pass(nil))
        #expect(plan([json], status: 304) == .pass(nil))
        #expect(plan([json], status: 404) == .read)
    }

    /// `tokengate check-config`: off by default with a 1 MiB limit; a limit outside 1 B–16 MiB
    /// is refused with its key.
    @Test func checkConfigShowsTheDefaultsAndRefusesALimitOutOfBounds() async throws {
        func checkConfig(_ upstreams: String) async throws -> (status: Int32, stdout: String, stderr: String) {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-links-\(UUID().uuidString).yaml").path
            defer { try? FileManager.default.removeItem(atPath: path) }
            try """
            database: { url: "postgresql://tokengate@127.0.0.1/x" }
            providers: [{ name: entra, kind: entra, tenant: common, client_id: a, client_secret: s }]
            upstreams:
            \(upstreams)
            """.write(toFile: path, atomically: true, encoding: .utf8)
            return try await TokenGateProcess.run(["check-config", "--config", path])
        }
        let valid = try await checkConfig(
            """
              - { name: graph, base_url: "https://graph.microsoft.com/v1.0", provider: entra, rewrite_links: true }
              - { name: other, base_url: "https://api.example.com", provider: entra, rewrite_max_body_bytes: 16777216 }
            """
        )
        #expect(valid.status == 0, "\(valid.stderr)")
        #expect(valid.stdout.contains(#""rewrite_links" : true"#))
        #expect(valid.stdout.contains(#""rewrite_links" : false"#))
        #expect(valid.stdout.contains(#""rewrite_max_body_bytes" : 1048576"#))
        let invalid = try await checkConfig(
            """
              - { name: graph, base_url: "https://graph.microsoft.com/v1.0", provider: entra, rewrite_links: true, rewrite_max_body_bytes: 0 }
              - { name: other, base_url: "https://api.example.com", provider: entra, rewrite_max_body_bytes: 16777217 }
            """
        )
        #expect(invalid.status == 2)
        #expect(invalid.stderr.contains("upstreams[0].rewrite_max_body_bytes: must be between 1 and 16777216"), "\(invalid.stderr)")
        #expect(invalid.stderr.contains("upstreams[1].rewrite_max_body_bytes: must be between 1 and 16777216"))
        let notABool = try await checkConfig(
            """
              - { name: graph, base_url: "https://graph.microsoft.com/v1.0", provider: entra, rewrite_links: maybe }
            """
        )
        #expect(notABool.status == 2)
        #expect(notABool.stderr.contains("upstreams[0].rewrite_links"), "\(notABool.stderr)")
    }

    /// The README's paging example is a configuration TokenGate accepts, and its before and after
    /// are what the rule makes of the next link.
    @Test func theReadmesPagingExampleLoadsAndShowsWhatTheRuleDoes() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        let section = try #require(text.range(of: "### Paging through an API"))
        let start = try #require(text.range(of: "```yaml\n", range: section.upperBound..<text.endIndex))
        let end = try #require(text.range(of: "```", range: start.upperBound..<text.endIndex))
        let yaml =
            String(text[start.upperBound..<end.lowerBound]) + """
                database: { url: "postgresql://tokengate@127.0.0.1/x" }
                providers: [{ name: entra, kind: entra, tenant: common, client_id: a, client_secret: s }]
                """
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-readme-paging-\(UUID().uuidString).yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try ConfigurationLoader.load(path: path, environment: [:])
        let upstream = try #require(configuration.upstreams.first)
        #expect(upstream.rewriteLinks)
        #expect(upstream.rewriteMaxBodyBytes == 1 << 20)
        #expect(upstream.headers["Accept-Encoding"] == "identity")

        let example = try #require(text.range(of: "```text\n", range: end.upperBound..<text.endIndex))
        let lines = text[example.upperBound...].split(separator: "\n").prefix(2)
        func nextLink(_ line: Substring) throws -> String {
            let key = try #require(line.range(of: #""@odata.nextLink":""#))
            return String(line[key.upperBound...].prefix { $0 != "\"" })
        }
        let location = try #require(
            ProxyLocation(baseURL: upstream.baseURL, name: upstream.name, publicBaseURL: configuration.server.publicBaseURL)
        )
        #expect(location.rewrite(try nextLink(lines.first!)) == (try nextLink(lines.last!)))
    }
}

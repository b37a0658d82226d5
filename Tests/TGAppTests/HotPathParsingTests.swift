import Foundation
import HTTPTypes
import TGAuth
import TGHTTPServer
import Testing

@testable import TGApp
@testable import TGHTTPClient

/// The byte-level parsers every proxied call goes through read what the spelled-out rules say.
@Suite struct HotPathParsingTests {
    func request(authorization: String?) -> ServerRequest {
        var fields = HTTPFields()
        if let authorization { fields[.authorization] = authorization }
        return ServerRequest(head: HTTPRequest(method: .get, scheme: "http", authority: "x", path: "/", headerFields: fields))
    }

    @Test func theBearerSchemeIsCaseInsensitiveAndTheTokenIsTrimmed() throws {
        #expect(try AuthRoutes.bearer(request(authorization: "Bearer abc")) == "abc")
        #expect(try AuthRoutes.bearer(request(authorization: "bEaReR \t abc.def-ghi \t")) == "abc.def-ghi")
        for refused in [nil, "Bearer", "Bearer ", "Basic abc", "Bearerabc", "Bearer\tabc", "Token abc"] {
            #expect(throws: AuthProblem.self) { try AuthRoutes.bearer(request(authorization: refused)) }
        }
    }

    @Test func theHopByHopCheckWithoutHashingIsTheSpelledOutSet() {
        for name in ProxyHeaders.hopByHop { #expect(ProxyHeaders.isHopByHop(name)) }
        for name in ["content-type", "content-length", "connection-x", "Connection", "tes", "", "x-request-id", "set-cookie"] {
            #expect(!ProxyHeaders.isHopByHop(name))
        }
        // The answer's own fields pass; hop-by-hop ones, those `Connection` names, cookies, the
        // API's request id, server and date do not.
        let upstream: HTTPFields = [
            .contentType: "application/json", .connection: "keep-alive, X-Private", HTTPField.Name("X-Private")!: "1",
            .transferEncoding: "chunked", .setCookie: "a=b", HTTPField.Name("X-Request-ID")!: "theirs", .eTag: "\"v1\"",
            .server: "nginx/1.22.1", .date: "Thu, 26 Nov 2026 00:49:52 GMT",
        ]
        #expect(ProxyHeaders.response(upstream) == [.contentType: "application/json", .eTag: "\"v1\""])
    }

    @Test func theManagedCheckOnBytesIsTheSpelledOutSetInAnyCase() {
        func check(_ name: String) -> Bool {
            Array(name.utf8).withUnsafeBufferPointer { ProxyHeaders.isManaged($0) }
        }
        for name in ProxyHeaders.managed {
            #expect(check(name))
            #expect(check(name.uppercased()))
            #expect(check(String(name.enumerated().map { $0.offset % 2 == 0 ? Character($0.element.uppercased()) : $0.element })))
        }
        for name in [
            "", "x", "accept", "user-agent", "content-type", "hosts", "hos", "x-forwarded-fo", "x-forwarded-forx",
            "authorizatio", "x-request-ids", "cookie2", "x-tokengate-a", String(repeating: "a", count: 200),
        ] {
            #expect(!check(name), "\(name)")
        }
        func prefixed(_ name: String) -> Bool {
            Array(name.utf8).withUnsafeBufferPointer { ProxyHeaders.hasTokenGatePrefix($0) }
        }
        #expect(prefixed("X-TokenGate-Session") && prefixed("x-tokengate-") && prefixed("X-TOKENGATE-A"))
        #expect(!prefixed("X-TokenGate") && !prefixed("X-TokenGateX-A") && !prefixed("") && !prefixed("Y-TokenGate-A"))
    }

    /// The cached path relays an answer's fields from libcurl's bytes to libmicrohttpd's: it keeps
    /// and drops exactly what the field-by-field relay of the async path does.
    @Test func theRawRelayKeepsAndDropsWhatTheFieldRelayDoes() {
        let lines = [
            "Content-Type: application/json", "Connection: keep-alive, X-Private", "x-private: 1", "Keep-Alive: timeout=5",
            "Transfer-Encoding: chunked", "Set-Cookie: a=b", "X-Request-ID: theirs", "ETag:  \"v1\" ", "Content-Length: 12",
            "Bad Name: x", "X-Empty:", "TE: trailers", "Proxy-Authenticate: Basic", "Cache-Control: no-store", "no colon here",
            "Location: https://api.example/v1/next", "Server: nginx/1.22.1", "date: Thu, 26 Nov 2026 00:49:52 GMT",
        ]
        let head = RawHead(status: 200, bytes: Array(lines.map { $0 + "\r\n" }.joined().utf8))
        var response = ServerResponse(status: .ok)
        ProxyHeaders.relay(head, location: { nil }, into: &response)
        var expected = RawHeaderFields()
        for field in ProxyHeaders.response(head.parse().headerFields) where field.name != .contentLength {
            let appended = expected.append(name: field.name.rawName, value: field.value)
            #expect(appended)
        }
        #expect(response.rawHeaderFields == expected)
        #expect(response.headerFields.isEmpty)
        var kept = 0
        expected.forEachField { _, _ in kept += 1 }
        #expect(kept == 5)  // Content-Type, ETag, X-Empty, Cache-Control, Location

        // A Location under the API's base URL becomes TokenGate's; it is not relayed twice.
        let location = ProxyLocation(baseURL: "https://api.example/v1", name: "graph", publicBaseURL: "https://gate.example")
        var rewritten = ServerResponse(status: .ok)
        ProxyHeaders.relay(head, location: { location }, into: &rewritten)
        #expect(rewritten.headerFields[.location] == "https://gate.example/api/graph/next")
        var withoutLocation = RawHeaderFields()
        for field in ProxyHeaders.response(head.parse().headerFields) where field.name != .contentLength && field.name != .location {
            withoutLocation.append(name: field.name.rawName, value: field.value)
        }
        #expect(rewritten.rawHeaderFields == withoutLocation)
    }

    /// The cached path sends the header lines the async path's fields would have been.
    @Test func theLoopsHeaderLinesAreTheAsyncPathsFields() throws {
        let incoming: HTTPFields = [
            .accept: "application/json", .authorization: "Bearer app-token", .cookie: "session=1", .connection: "X-Hop",
            HTTPField.Name("X-Hop")!: "1", HTTPField.Name("X-TokenGate-Debug")!: "1", HTTPField.Name("X-HTTP-Method-Override")!: "DELETE",
            HTTPField.Name("X-Configured")!: "from the app", .userAgent: "app/1.0", HTTPField.Name("X-Forwarded-For")!: "6.6.6.6",
        ]
        let extra: HTTPFields = [HTTPField.Name("X-Configured")!: "from the configuration"]
        let forwarding = ProxyHeaders.Forwarding(clientAddress: "10.0.0.7", proto: "https", host: "gate.example", requestID: "r-1")
        let fields = ProxyHeaders.request(RequestFields(incoming), token: "upstream-token", forwarding: forwarding, extra: extra)
        let lines = ProxyHeaders.requestLines(
            RequestFields(incoming),
            clientAddress: forwarding.clientAddress,
            requestID: forwarding.requestID,
            extra: extra,
            extraLines: ProxyHeaders.lines(extra),
            forwardedLines: ProxyHeaders.forwardedLines(proto: forwarding.proto, host: forwarding.host)
        )
        let token = UpstreamAccessToken(value: "upstream-token", expiresAt: .distantFuture, scopes: [], issuedAt: .distantPast)
        let bearer = try #require(ProxyHeaders.bearerLines(token))
        var sent: [String] = []
        lines.forEachLine { sent.append(String(cString: $0)) }
        sent += bearer.lines
        #expect(sent == fields.map { "\($0.name.rawName): \($0.value)" })
        #expect(
            sent == [
                "Accept: application/json", "User-Agent: app/1.0", "X-Configured: from the configuration", "X-Forwarded-For: 10.0.0.7",
                "X-Forwarded-Proto: https", "X-Forwarded-Host: gate.example", "X-Request-ID: r-1", "Authorization: Bearer upstream-token",
            ]
        )
    }

    /// Every call with one upstream token links to the same prebuilt line; a new token gets its
    /// own; a token that cannot be a field value gets none (the call takes the async path).
    @Test func aTokensBearerLineIsBuiltOnceAndSharedByItsCalls() throws {
        let token = UpstreamAccessToken(value: "upstream-token", expiresAt: .distantFuture, scopes: [], issuedAt: .distantPast)
        let copy = token
        let first = try #require(ProxyHeaders.bearerLines(token))
        #expect(ProxyHeaders.bearerLines(copy) === first)
        let renewed = UpstreamAccessToken(value: "renewed-token", expiresAt: .distantFuture, scopes: [], issuedAt: .distantPast)
        let second = try #require(ProxyHeaders.bearerLines(renewed))
        #expect(second !== first)
        #expect(second.lines == ["Authorization: Bearer renewed-token"])
        let broken = UpstreamAccessToken(value: "a\r\nX-Injected: 1", expiresAt: .distantFuture, scopes: [], issuedAt: .distantPast)
        #expect(ProxyHeaders.bearerLines(broken) == nil)
    }

    /// A path prefix allows itself and what continues it after a `/`, never a longer name.
    @Test func pathPrefixesAllowWholeSegmentsOnly() throws {
        func allowed(_ rest: String, _ prefixes: [String]) throws -> Bool {
            try ProxyTarget(rest: rest).isAllowed(byBare: prefixes.map(ProxyTarget.bare))
        }
        #expect(try allowed("me", ["/me"]))
        #expect(try allowed("me/photo", ["/me/"]))
        #expect(try allowed("users/1", ["/me", "/users"]))
        #expect(try !allowed("meow", ["/me"]))
        #expect(try !allowed("m", ["/me"]))
        #expect(try !allowed("users", ["/me"]))
        #expect(try allowed("anything/at/all", ["/"]))
        #expect(try allowed("anything", [""]))
        #expect(try allowed("me%20too", ["/me"]) == false)
        #expect(try allowed("me/caf%C3%A9", ["/me/caf\u{E9}"]))
    }

    @Test func patternsBindParametersAndTheRestOfThePath() {
        var router = Router()
        let handler = Router.Handler.sync { _, _ in ServerResponse(status: .ok) }
        router.add(.get, "/api/{upstream}/**", handler)
        router.add(.post, "/api/{upstream}/**", handler)
        router.add(.delete, "/auth/accounts/{id}", handler)
        func parameters(_ method: HTTPRequest.Method, _ path: Substring) -> RouteParameters? {
            if case .found(_, let parameters) = router.match(method, path: path) { return parameters }
            return nil
        }
        #expect(parameters(.get, "/api/graph/me/photo/$value") == ["upstream": "graph", "rest": "me/photo/$value"])
        #expect(parameters(.post, "/api/gr%20aph/a%2Fb//c/") == ["upstream": "gr aph", "rest": "a%2Fb//c/"])
        #expect(parameters(.get, "/api/graph") == ["upstream": "graph", "rest": ""])
        #expect(parameters(.get, "/api/graph/") == ["upstream": "graph", "rest": ""])
        #expect(parameters(.delete, "/auth/accounts/42") == ["id": "42"])
        #expect(parameters(.delete, "/auth/accounts/42/x") == nil)
        #expect(parameters(.delete, "/auth/accounts/") == nil)
        #expect(parameters(.get, "/api//me") == nil)
        if case .methodNotAllowed(let allowed) = router.match(.put, path: "/api/graph/me") {
            #expect(allowed == [.get, .post, .head])
        } else {
            Issue.record("PUT on a proxied path must be 405 with GET, POST and HEAD allowed")
        }
    }

    /// Parameters are set, replaced and removed by name, and equality does not depend on the order
    /// they were set in.
    @Test func routeParametersAreSetReplacedAndRemovedByName() {
        var parameters: RouteParameters = ["a": "1", "b": "2", "c": "3", "d": "4"]
        #expect(parameters["a"] == "1" && parameters["b"] == "2" && parameters["c"] == "3" && parameters["d"] == "4")
        #expect(parameters["e"] == nil)
        parameters["b"] = "two"
        parameters["c"] = nil
        parameters["a"] = nil
        #expect(parameters == ["b": "two", "d": "4"])
        parameters["e"] = "5"
        parameters["f"] = "6"
        #expect(parameters == ["f": "6", "e": "5", "d": "4", "b": "two"])
        #expect(parameters != ["f": "6", "e": "5", "d": "4"])
        #expect(parameters != ["f": "6", "e": "5", "d": "4", "b": "2"])
        for name in ["b", "d", "e", "f"] { parameters[name] = nil }
        #expect(parameters == [:])
    }

    @Test func proxyPathsWithoutEscapesAreTheirOwnDecodedForm() throws {
        let plain = try ProxyTarget(rest: "me/photo/$value")
        #expect(plain.rawPath == "/me/photo/$value")
        #expect(plain.decodedPath == "/me/photo/$value")
        let escaped = try ProxyTarget(rest: "users/a%40b.com/mail")
        #expect(escaped.rawPath == "/users/a%40b.com/mail")
        #expect(escaped.decodedPath == "/users/a@b.com/mail")
        #expect(try ProxyTarget(rest: "").decodedPath == "/")
        for refused in [
            "a/../b", "..", "a/./b", "a//b", "a/%2e%2e/b", "a%2fb", "a%5cb", "a%252e", "a b", "a\\b", "%zz", "a#/b", "a#", "%25%252f", "%25u002e",
        ] {
            #expect(throws: ProxyError.self, "\(refused)") { try ProxyTarget(rest: refused) }
        }
    }

    @Test func thePlainPathShortcutAgreesWithTheFullCheck() {
        // Every path of up to four characters over the bytes that matter to the check (and a
        // letter), through both: the same target, or a refusal from both.
        let alphabet: [Character] = ["a", ".", "/", "%", "2", "e", ";", "\\", "#", " ", "~"]
        func outcome(_ make: () throws(ProxyError) -> ProxyTarget) -> String {
            do { return try make().decodedPath } catch { return "refused" }
        }
        var paths = [""]
        for _ in 0..<4 { paths += paths.flatMap { path in alphabet.map { path + String($0) } } }
        for path in Set(paths) {
            let shortcut = outcome { () throws(ProxyError) in try ProxyTarget(rest: path) }
            let full = outcome { () throws(ProxyError) in try ProxyTarget(checking: path) }
            #expect(shortcut == full, "\(path)")
        }
    }
}

import Foundation
import HTTPTypes
import TGAuth
import TGHTTPServer
import Testing

@testable import TGApp
@testable import TGHTTPClient
@testable import TGProxy

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

    @Test func theHopByHopCheckOnBytesIsTheSpelledOutSetInAnyCase() {
        func check(_ name: String) -> Bool {
            Array(name.utf8).withUnsafeBufferPointer { ProxyHeaders.hopByHop.contains($0) }
        }
        for name in ProxyHeaders.hopByHop.names {
            #expect(check(name) && check(name.uppercased()))
        }
        for name in ["content-type", "content-length", "connection-x", "tes", "", "x-request-id", "set-cookie"] {
            #expect(!check(name), "\(name)")
        }
    }

    /// Names one token byte away from a member, at every position (the checks compare eight
    /// bytes at a time, the last word overlapping the one before): in the set exactly when their
    /// lowercase form is.
    @Test func aNameOneTokenByteAwayFromAMemberIsInTheSetOnlyWhenItsLowercaseFormIs() {
        let tokenBytes = (UInt8(0)...UInt8(127)).filter(HeaderLines.isTokenByte)
        var disagreements: [String] = []
        for set in [ProxyHeaders.managed, ProxyHeaders.notRelayed] {
            for name in set.names {
                let bytes = Array(name.utf8)
                for index in bytes.indices {
                    for byte in tokenBytes {
                        var changed = bytes
                        changed[index] = byte
                        let text = String(decoding: changed, as: UTF8.self)
                        if changed.withUnsafeBufferPointer(set.contains) != set.names.contains(text.lowercased()) { disagreements.append(text) }
                    }
                }
            }
        }
        #expect(disagreements == [])
    }

    @Test func theManagedCheckOnBytesIsTheSpelledOutSetInAnyCase() {
        func check(_ name: String) -> Bool {
            Array(name.utf8).withUnsafeBufferPointer { ProxyHeaders.managed.contains($0) }
        }
        for name in ProxyHeaders.managed.names {
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

    /// An answer's fields go from libcurl's bytes to libmicrohttpd's: its end-to-end fields pass;
    /// hop-by-hop ones, those `Connection` names, cookies, the API's request id, server and date
    /// do not, nor its `Content-Length` (the server sets the length of what it sends).
    @Test func theRelayKeepsTheAnswersEndToEndFieldsAndDropsTheRest() {
        let lines = [
            "Content-Type: application/json", "Connection: keep-alive, X-Private", "x-private: 1", "Keep-Alive: timeout=5",
            "Transfer-Encoding: chunked", "Set-Cookie: a=b", "X-Request-ID: theirs", "ETag:  \"v1\" ", "Content-Length: 12",
            "Bad Name: x", "X-Empty:", "TE: trailers", "Proxy-Authenticate: Basic", "Cache-Control: no-store", "no colon here",
            "Location: https://api.example/v1/next", "Server: nginx/1.22.1", "date: Thu, 26 Nov 2026 00:49:52 GMT",
        ]
        let head = RawHead(status: 200, bytes: Array(lines.map { $0 + "\r\n" }.joined().utf8))
        func relayed(_ response: ServerResponse) -> [String] {
            var fields: [String] = []
            response.rawHeaderFields.forEachField { name, value in
                fields.append(String(cString: name) + ": " + String(cString: value))
            }
            return fields
        }
        var response = ServerResponse(status: .ok)
        ProxyHeaders.relay(head, location: nil, into: &response)
        #expect(
            relayed(response) == [
                "Content-Type: application/json", "ETag: \"v1\"", "X-Empty: ", "Cache-Control: no-store",
                "Location: https://api.example/v1/next",
            ]
        )
        #expect(response.headerFields.isEmpty)

        // A Location under the API's base URL becomes TokenGate's; it is not relayed twice.
        let location = ProxyLocation(baseURL: "https://api.example/v1", name: "graph", publicBaseURL: "https://gate.example")
        var rewritten = ServerResponse(status: .ok)
        ProxyHeaders.relay(head, location: location, into: &rewritten)
        #expect(rewritten.headerFields[.location] == "https://gate.example/api/graph/next")
        #expect(relayed(rewritten) == ["Content-Type: application/json", "ETag: \"v1\"", "X-Empty: ", "Cache-Control: no-store"])
    }

    /// The request's header lines: the app's end-to-end fields but its credentials, cookies,
    /// overrides, `X-TokenGate-*`, what its `Connection` names and what the configuration sets;
    /// then the configured fields, the forwarding fields, the request id and the upstream token.
    @Test func theRequestLinesCarryTheAppsEndToEndFieldsThenTheGatewaysOwn() throws {
        let incoming: HTTPFields = [
            .accept: "application/json", .authorization: "Bearer app-token", .cookie: "session=1", .connection: "X-Hop",
            HTTPField.Name("X-Hop")!: "1", HTTPField.Name("X-TokenGate-Debug")!: "1", HTTPField.Name("X-HTTP-Method-Override")!: "DELETE",
            HTTPField.Name("X-Configured")!: "from the app", .userAgent: "app/1.0", HTTPField.Name("X-Forwarded-For")!: "6.6.6.6",
        ]
        let extra: HTTPFields = [HTTPField.Name("X-Configured")!: "from the configuration"]
        let lines = ProxyHeaders.requestLines(
            RequestFields(incoming),
            clientAddress: "10.0.0.7",
            requestID: "r-1",
            extra: extra,
            extraLines: ProxyHeaders.lines(extra),
            forwardedLines: ProxyHeaders.forwardedLines(proto: "https", host: "gate.example")
        )
        var sent: [String] = []
        lines.forEachLine { sent.append(String(cString: $0)) }
        sent += ProxyHeaders.bearerLines("upstream-token").lines
        #expect(
            sent == [
                "Accept: application/json", "User-Agent: app/1.0", "X-Configured: from the configuration", "X-Forwarded-For: 10.0.0.7",
                "X-Forwarded-Proto: https", "X-Forwarded-Host: gate.example", "X-Request-ID: r-1", "Authorization: Bearer upstream-token",
            ]
        )
    }

    /// Every call with one upstream token links to the same prebuilt line; a new token gets its
    /// own; a token that cannot be a field value gets none (the call answers 502).
    @Test func aTokensBearerLineIsBuiltOnceAndSharedByItsCalls() throws {
        let token = UpstreamAccessToken(value: "upstream-token", expiresAt: .distantFuture, scopes: [], issuedAt: .distantPast)
        let copy = token
        let first = ProxyAccountTokens.bearer(token)
        #expect(ProxyAccountTokens.bearer(copy) === first)
        let renewed = UpstreamAccessToken(value: "renewed-token", expiresAt: .distantFuture, scopes: [], issuedAt: .distantPast)
        let second = ProxyAccountTokens.bearer(renewed)
        #expect(second !== first)
        #expect(second.lines == ["Authorization: Bearer renewed-token"])
        let broken = UpstreamAccessToken(value: "a\r\nX-Injected: 1", expiresAt: .distantFuture, scopes: [], issuedAt: .distantPast)
        #expect(ProxyAccountTokens.bearer(broken).isEmpty)
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

    /// Patterns whose first segment is a literal are passed over when the path's first segment
    /// differs (without walking them); those that begin with a parameter are always tried.
    @Test func aPatternIsTriedOnlyWhenThePathsFirstSegmentCanFitIt() {
        var router = Router()
        let handler = Router.Handler.sync { _, _ in ServerResponse(status: .ok) }
        router.add(.get, "/api/{upstream}/**", handler)
        router.add(.get, "/apis/{name}", handler)
        router.add(.get, "/{tenant}/items/{id}", handler)
        router.add(.get, "/{anything}", handler)
        func parameters(_ path: Substring) -> RouteParameters? {
            if case .found(_, let parameters) = router.match(.get, path: path) { return parameters }
            return nil
        }
        #expect(parameters("/api/graph/me") == ["upstream": "graph", "rest": "me"])
        #expect(parameters("/apis/x") == ["name": "x"])
        #expect(parameters("/ap/items/7") == ["tenant": "ap", "id": "7"])
        #expect(parameters("/api/items/7") == ["upstream": "items", "rest": "7"])
        #expect(parameters("/apix") == ["anything": "apix"])
        #expect(parameters("/api") == ["anything": "api"])
        #expect(parameters("api/graph/me") == nil)
        #expect(parameters("") == nil)
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

import HTTPTypes
import TGAuth
import TGHTTPServer
import Testing

@testable import TGApp

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
        // The answer's own fields pass; hop-by-hop ones, those `Connection` names, cookies and the
        // API's request id do not.
        let upstream: HTTPFields = [
            .contentType: "application/json", .connection: "keep-alive, X-Private", HTTPField.Name("X-Private")!: "1",
            .transferEncoding: "chunked", .setCookie: "a=b", HTTPField.Name("X-Request-ID")!: "theirs", .eTag: "\"v1\"",
        ]
        #expect(ProxyHeaders.response(upstream) == [.contentType: "application/json", .eTag: "\"v1\""])
    }

    @Test func patternsBindParametersAndTheRestOfThePath() {
        var router = Router()
        let handler = Router.Handler.sync { _, _ in ServerResponse(status: .ok) }
        router.add(.get, "/api/{upstream}/**", handler)
        router.add(.post, "/api/{upstream}/**", handler)
        router.add(.delete, "/auth/accounts/{id}", handler)
        func parameters(_ method: HTTPRequest.Method, _ path: Substring) -> [String: String]? {
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
}

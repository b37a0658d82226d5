import Foundation
import HTTPTypes
import Logging
import Synchronization
import TGAuth
import TGHTTPServer
import Testing

@testable import TGApp

/// Route policies: declared with the route, applied by the application before the handler.
@Suite struct RoutePolicyTests {
    static let apiLimits = HTTPServer.RequestLimits(maxBodySize: 5, requestTimeout: .seconds(7), streamsBody: true)
    static let fixedLimits = HTTPServer.RequestLimits(maxBodySize: 9, requestTimeout: .seconds(3))

    /// The answer of `app` to a request, in-process.
    static func answer(_ app: Application, _ method: HTTPRequest.Method, _ path: String, headers: HTTPFields = [:]) async -> ServerResponse {
        await app.respond(to: ServerRequest(head: HTTPRequest(method: method, scheme: "http", authority: "x", path: path, headerFields: headers)))
    }

    @Test func theServerGetsTheLimitsARouteDeclaredFromThePathsBytes() {
        var router = Router()
        router.add(
            .post,
            "/api/{upstream}/**",
            policy: RoutePolicy(limits: .byParameter("upstream", [(Array("graph".utf8), Self.apiLimits)])),
            .sync { _, _ in ServerResponse(status: .ok) }
        )
        router.add(.post, "/upload", policy: RoutePolicy(limits: .fixed(Self.fixedLimits)), .sync { _, _ in ServerResponse(status: .ok) })
        router.add(.get, "/healthz", .sync { _, _ in ServerResponse(status: .ok) })
        let table = router.limitsTable
        for path in ["/api/graph", "/api/graph/", "/api/graph/v1.0/me?x=1"] {
            #expect(table.limits(.post, path: path[...]) == Self.apiLimits, "\(path)")
        }
        #expect(table.limits(.put, path: "/upload") == Self.fixedLimits)
        for path in ["/api/other/x", "/api/graphs/x", "/api//graph", "/api/", "/api", "/apix/graph", "/healthz", "/upload/x", "/"] {
            #expect(table.limits(.post, path: path[...]) == nil, "\(path)")
        }
    }

    @Test func aRateLimitedRouteRefusesBeforeItsHandlerRuns() async {
        let calls = Atomic<Int>(0)
        var router = Router()
        let limiter = RateLimiter(scope: "test", perMinute: 1, now: { Date(timeIntervalSince1970: 0) })
        router.add(
            .get,
            "/limited",
            policy: RoutePolicy(rateLimit: limiter),
            .async { _, _ in
                calls.add(1, ordering: .relaxed)
                return ServerResponse(status: .ok)
            }
        )
        let oauth = RateLimiter(scope: "test", perMinute: 1, now: { Date(timeIntervalSince1970: 0) })
        router.add(.post, "/token", policy: RoutePolicy(rateLimit: oauth, refusal: .oauth), .sync { _, _ in ServerResponse(status: .ok) })
        let app = Application(router: router, logger: Logger(label: "test"), accessLog: false)
        #expect(await Self.answer(app, .get, "/limited").status == .ok)
        let refused = await Self.answer(app, .get, "/limited")
        #expect(refused.status == .tooManyRequests && refused.headerFields[.retryAfter] == "60")
        #expect(refused.headerFields[.contentType] == "application/problem+json")
        #expect(calls.load(ordering: .relaxed) == 1)
        #expect(await Self.answer(app, .post, "/token").status == .ok)
        let oauthRefused = await Self.answer(app, .post, "/token")
        #expect(oauthRefused.status == .tooManyRequests && oauthRefused.headerFields[.contentType] == "application/json")
    }

    /// (A found session reaching the handler: `/auth/me` and `/auth/accounts` in AuthFlowTests.)
    @Test func aRouteThatRequiresASessionDoesNotRunItsHandlerWithoutOne() async {
        let calls = Atomic<Int>(0)
        var router = Router()
        let policy = RoutePolicy(session: { _ in throw AuthProblem(.invalidToken, "The access token is invalid or expired.") })
        router.add(
            .get,
            "/me",
            policy: policy,
            .async { _, info in
                calls.add(1, ordering: .relaxed)
                return ServerResponse(status: info.session == nil ? .internalServerError : .ok)
            }
        )
        let app = Application(router: router, logger: Logger(label: "test"), accessLog: false)
        #expect(await Self.answer(app, .get, "/me").status == .unauthorized)
        #expect(await Self.answer(app, .get, "/me", headers: [.authorization: "Bearer bad"]).status == .unauthorized)
        #expect(calls.load(ordering: .relaxed) == 0)
    }
}

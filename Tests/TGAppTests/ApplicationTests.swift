import Foundation
import HTTPTypes
import Synchronization
import TGAppTesting
import TGHTTPServer
import TGTesting
import Testing

@testable import TGApp

/// Routing, errors, request ids and the access log, in-process (TGAppTesting's `TestClient`);
/// what reaches the wire (HEAD, the request id's header line) over real sockets with curl.
@Suite struct ApplicationTests {
    struct Boom: Error {}

    func makeApp(_ sink: CapturingLogSink) -> Application {
        var router = Router()
        router.add(
            .get,
            "/items/{id}",
            .sync { _, info in
                ServerResponse(status: .ok, contentType: "text/plain", body: info.parameters["id"] ?? "")
            }
        )
        router.add(
            .get,
            "/files/**",
            .async { _, info in
                ServerResponse(status: .ok, contentType: "text/plain", body: info.parameters["rest"] ?? "")
            }
        )
        router.add(
            .post,
            "/fail/problem",
            .async { _, _ in
                throw Problem(status: .conflict, code: "already_there", detail: "It exists.")
            }
        )
        router.add(.post, "/fail/crash", .async { _, _ in throw Boom() })
        router.add(
            .get,
            "/own-id",
            .sync { _, _ in ServerResponse(status: .ok, headerFields: [HTTPField.Name("X-Request-ID")!: "the-handlers-own"]) }
        )
        HealthRoutes.add(to: &router, version: "9.9.9", checks: [], detail: false)
        return Application(router: router, logger: capturingLogger(sink))
    }

    @Test func routesLiteralPatternAndCatchAllPathsWithDecodedParameters() async throws {
        let client = TestClient(makeApp(CapturingLogSink()))
        let item = await client.get("/items/a%20b")
        #expect(item.body == "a b")
        let file = await client.get("/files/x/y/z.txt")
        #expect(file.body == "x/y/z.txt")
    }

    @Test func answersUnknownPathsWith404AndWrongMethodsWith405AsProblemJSON() async throws {
        let client = TestClient(makeApp(CapturingLogSink()))
        let missing = await client.get("/nope")
        #expect(missing.status == 404)
        #expect(missing.header("Content-Type")?.lowercased().hasPrefix("application/problem+json") == true)
        #expect(decodeJSON(missing.body)["code"] as? String == "not_found")
        let wrong = await client.delete("/healthz")
        #expect(wrong.status == 405)
        #expect(wrong.header("Allow")?.lowercased().hasPrefix("get") == true)
    }

    @Test func headIsAnsweredLikeGetWithoutTheBody() async throws {
        let server = try serve(makeApp(CapturingLogSink()))
        let head = try await curl(["-s", "-I", server.baseURL + "/items/abc"])
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == "3")
        #expect(head.body.isEmpty)
        #expect(try await curl(["-s", "-I", server.baseURL + "/healthz"]).status == 200)
        // A 405 lists HEAD wherever GET is allowed.
        let wrong = try await curl(["-i", "-X", "DELETE", server.baseURL + "/healthz"])
        #expect(wrong.header("Allow") == "GET, HEAD")
        await server.shutdown()
    }

    @Test func answersHTTPResponseErrorsAsTheySayAndHidesOtherErrorsBehindA500() async throws {
        let sink = CapturingLogSink()
        let client = TestClient(makeApp(sink))
        let problem = await client.execute(uri: "/fail/problem", method: .post)
        #expect(problem.status == 409)
        #expect(decodeJSON(problem.body)["code"] as? String == "already_there")
        let crash = await client.execute(uri: "/fail/crash", method: .post, headers: [HTTPField.Name("X-Request-ID")!: "trace-42"])
        #expect(crash.status == 500)
        let body = decodeJSON(crash.body)
        #expect(body["code"] as? String == "internal_error")
        #expect((body["detail"] as? String)?.contains("trace-42") == true)
        #expect(!crash.body.contains("Boom"))
        #expect(sink.lines.contains { $0.contains("unhandled error") && $0.contains("Boom") && $0.contains("trace-42") })
    }

    @Test func echoesAPlainRequestIDAndReplacesAHostileOne() async throws {
        let server = try serve(makeApp(CapturingLogSink()))
        let kept = try await curl(["-i", "-H", "X-Request-ID: abc-123", server.baseURL + "/healthz"])
        #expect(kept.stdout.contains("X-Request-ID: abc-123"))
        let hostile = try await curl(["-i", "-H", "X-Request-ID: evil\"}{injected", server.baseURL + "/healthz"])
        #expect(!hostile.stdout.contains("injected"))
        #expect(hostile.stdout.range(of: "X-Request-ID: [A-Za-z0-9_-]{15}\r\n", options: .regularExpression) != nil)
        await server.shutdown()
    }

    /// Every answer carries the request's id exactly once: one a handler set is replaced, and
    /// one added to an answer is not added twice.
    @Test func everyAnswerCarriesTheRequestIDExactlyOnce() async throws {
        let server = try serve(makeApp(CapturingLogSink()))
        for path in ["/own-id", "/healthz", "/items/1", "/files/a", "/nope"] {
            let answer = try await curl(["-i", "-H", "X-Request-ID: trace-7", server.baseURL + path])
            let ids = answer.stdout.split(separator: "\r\n").filter { $0.lowercased().hasPrefix("x-request-id:") }
            #expect(ids == ["X-Request-ID: trace-7"], "\(path)")
        }
        await server.shutdown()
    }

    @Test func generatedRequestIDsAreDistinctPlainAndFifteenCharactersLong() {
        let ids = (0..<10_000).map { _ in Application.requestID(from: nil) }
        #expect(Set(ids).count == ids.count)
        let plain = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        #expect(ids.allSatisfy { $0.utf8.count == 15 && $0.utf8.allSatisfy(plain.contains) })
        // One process's ids share their random prefix and differ in the counter.
        #expect(Set(ids.map { $0.prefix(8) }).count == 1)
    }

    @Test func logsOneLinePerRequestWithoutTheQueryString() async throws {
        let sink = CapturingLogSink()
        _ = await TestClient(makeApp(sink)).get("/items/7?code=SECRET-CODE&state=xyz")
        let lines = sink.lines.filter { $0.contains(#""message":"request""#) }
        #expect(lines.count == 1)
        let entry = decodeJSON(lines[0])
        #expect(entry["route"] as? String == "/items/{id}")
        #expect(entry["status"] as? Int == 200)
        #expect(entry["method"] as? String == "GET")
        #expect(!lines[0].contains("SECRET-CODE"))
    }
}

@Suite struct HealthRoutesTests {
    @Test func healthzAnswersWithTheVersionWithoutAnyCheck() async throws {
        var router = Router()
        HealthRoutes.add(to: &router, version: "1.2.3", checks: [.init(name: "never", run: { false })], detail: false)
        let result = await TestClient(Application(router: router, logger: capturingLogger(CapturingLogSink()))).get("/healthz")
        #expect(result.status == 200)
        #expect(decodeJSON(result.body)["version"] as? String == "1.2.3")
        // The constant answer's own fields (sent as bytes), and the request id every answer gets.
        #expect(result.header("Content-Type") == "application/json")
        #expect(result.header("Cache-Control") == "no-store")
        #expect(result.header("X-Request-ID")?.isEmpty == false)
    }

    /// The admin listener's `/readyz` (with the detail).
    @Test func readyzWithDetailIs503NamingTheFailingCheck() async throws {
        var router = Router()
        HealthRoutes.add(
            to: &router,
            version: "1",
            checks: [.init(name: "database", run: { false }), .init(name: "other", run: { true })],
            detail: true
        )
        let result = await TestClient(Application(router: router, logger: capturingLogger(CapturingLogSink()))).get("/readyz")
        #expect(result.status == 503)
        let checks = decodeJSON(result.body)["checks"] as? [String: String]
        #expect(checks == ["database": "failing", "other": "ok"])
    }

    /// The public port's `/readyz`: the status only, whichever check fails.
    @Test func readyzWithoutDetailIs503SayingOnlyNotReady() async throws {
        var router = Router()
        HealthRoutes.add(
            to: &router,
            version: "1",
            checks: [.init(name: "database", run: { false }), .init(name: "provider:idp", run: { true })],
            detail: false
        )
        let result = await TestClient(Application(router: router, logger: capturingLogger(CapturingLogSink()))).get("/readyz")
        #expect(result.status == 503)
        #expect(result.body == #"{"status":"not_ready"}"#)
    }

    /// Every whole run of the checks reports each result (the `tokengate_dependency_up` gauge).
    @Test func eachRunOfTheReadinessChecksRecordsEveryResult() async throws {
        final class Recorded: Sendable { let results = Mutex<[String: Bool]>([:]) }
        let recorded = Recorded()
        let readiness = HealthRoutes.Readiness(
            checks: [.init(name: "database", run: { true }), .init(name: "provider:idp", run: { false })],
            record: { name, up in recorded.results.withLock { $0[name] = up } }
        )
        #expect(await readiness.run() == ["database": true, "provider:idp": false])
        #expect(recorded.results.withLock { $0 } == ["database": true, "provider:idp": false])
    }

    @Test func servesTheRepositorysOpenAPIDescriptionThatTheNotFoundAnswerPointsTo() async throws {
        var router = Router()
        APIDescriptionRoute.add(to: &router)
        let client = TestClient(Application(router: router, logger: capturingLogger(CapturingLogSink())))
        let missing = await client.get("/nope")
        #expect((decodeJSON(missing.body)["detail"] as? String)?.contains("/openapi.yaml") == true)
        let document = await client.get("/openapi.yaml")
        #expect(document.status == 200)
        #expect(document.header("Content-Type")?.lowercased().hasPrefix("application/yaml") == true)
        let repositoryFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../openapi.yaml")
        #expect(document.body == (try String(contentsOf: repositoryFile, encoding: .utf8)))
    }
}

import Foundation
import HTTPTypes
import TGApp
import TGAppTesting
import TGHTTPServer
import Testing

/// The in-process client (TGAppTesting) answers through the code a served request takes: each
/// reply kind, errors mapped in the one catch site, the request id and the access log.
@Suite struct TestClientTests {
    struct Boom: Error {}

    func makeApp(_ sink: CapturingLogSink) -> Application {
        var router = Router()
        router.add(.get, "/sync", .sync { _, _ in ServerResponse(status: .ok, contentType: "text/plain", body: "sync") })
        router.add(
            .get,
            "/streamed",
            .async { _, _ in
                ServerResponse(
                    status: .ok,
                    body: .stream { writer in
                        for chunk in ["one ", "two ", "three"] { try await writer.write(Array(chunk.utf8)) }
                    }
                )
            }
        )
        router.add(
            .post,
            "/loop",
            .loop { request, _, responder in
                // Answers twice, from another thread: the first answer is the one returned.
                let echoed = ServerResponse(status: .created, contentType: "text/plain", body: String(decoding: request.body, as: UTF8.self))
                Thread {
                    responder.respond(echoed)
                    responder.respond(ServerResponse(status: .gone))
                }.start()
            }
        )
        router.add(.get, "/loop/fails", .loop { _, _, responder in responder.fail(Boom()) })
        router.add(.get, "/who", .sync { _, info in ServerResponse(status: .ok, contentType: "text/plain", body: info.clientAddress ?? "-") })
        return Application(router: router, logger: capturingLogger(sink))
    }

    @Test func answersSyncAsyncAndDeferredRepliesWithTheRequestIDAndOneLogLinePerRequest() async throws {
        let sink = CapturingLogSink()
        let client = TestClient(makeApp(sink))
        let sync = await client.get("/sync", headers: [HTTPField.Name("X-Request-ID")!: "trace-1"])
        #expect(sync.status == 200)
        #expect(sync.body == "sync")
        #expect(sync.header("X-Request-ID") == "trace-1")
        let streamed = await client.get("/streamed")
        #expect(streamed.body == "one two three")
        let failed = await client.get("/loop/fails", headers: [HTTPField.Name("X-Request-ID")!: "trace-2"])
        #expect(failed.status == 500)
        #expect(failed.json["code"] as? String == "internal_error")
        #expect(sink.lines.contains { $0.contains("unhandled error") && $0.contains("Boom") && $0.contains("trace-2") })
        #expect(sink.lines.filter { $0.contains(#""message":"request""#) }.count == 3)
        // A deferred reply answered twice: the first answer is the request's.
        let deferred = await client.post("/loop", form: [("a", "b")])
        #expect(deferred.status == 201)
        #expect(deferred.body == "a=b")
        #expect(deferred.header("X-Request-ID")?.count == 15)
    }

    @Test func theClientAddressIsTheLoopbackOneUnlessToldAndHeadLeavesTheBodyOut() async throws {
        let app = makeApp(CapturingLogSink())
        #expect(await TestClient(app).get("/who").body == "127.0.0.1")
        #expect(await TestClient(app, clientAddress: "192.0.2.7").get("/who").body == "192.0.2.7")
        let head = await TestClient(app).execute(uri: "/sync", method: .head)
        #expect(head.status == 200)
        #expect(head.bytes.isEmpty)
    }
}

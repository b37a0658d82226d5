import HTTPTypes
import TGHTTPClient
import TGHTTPServer
import TGTesting

func testClient(_ configure: (inout HTTPClient.Configuration) -> Void = { _ in }) -> HTTPClient {
    var configuration = HTTPClient.Configuration()
    configuration.allowPlainHTTPToLoopbackForTesting = true
    configure(&configuration)
    return HTTPClient(configuration: configuration)
}

/// TokenGate's own server answering with a description of what it received.
func echoServer() throws -> HTTPServer {
    var configuration = HTTPServer.Configuration()
    configuration.threads = 2
    configuration.maxBodySize = 8 << 20
    let server = HTTPServer(configuration: configuration) { request in
        .response(
            ServerResponse(
                status: .ok,
                headerFields: [
                    .contentType: "application/octet-stream",
                    HTTPField.Name("X-Method")!: request.head.method.rawValue,
                    HTTPField.Name("X-Target")!: request.head.path ?? "",
                    HTTPField.Name("X-Thing")!: request.head.headerFields[HTTPField.Name("X-Thing")!] ?? "-",
                ],
                body: .bytes(request.body)
            )
        )
    }
    try server.start()
    return server
}

func get(_ port: UInt16, _ path: String, scheme: String = "http", method: HTTPRequest.Method = .get) -> HTTPRequest {
    HTTPRequest(method: method, scheme: scheme, authority: "127.0.0.1:\(port)", path: path)
}

/// A 200 whose body sends "first", then nothing for 3 s, then "late": a body that goes quiet.
func answerThatGoesQuiet(until gate: TestGate) -> HTTPServer.Reply {
    .response(
        ServerResponse(
            status: .ok,
            body: .stream { writer in
                try await writer.write(Array("first".utf8))
                await gate.wait()
                try await writer.write(Array("late".utf8))
            }
        )
    )
}

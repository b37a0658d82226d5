import HTTPTypes
import Synchronization
import TGHTTPClient
import TGHTTPServer

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
func answerThatGoesQuiet(until gate: Gate) -> HTTPServer.Reply {
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

/// What a server's handler waits on until the test has seen what it came for and opens it: the
/// handler goes quiet for as long as the test needs, and the server's drain does not wait out a
/// fixed sleep afterwards.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let isOpen = state.withLock { state in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if isOpen { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

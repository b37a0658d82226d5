// A server for bench/run.sh: the HTTP server wrapper with fixed handlers, so the wrapper's own cost
// can be compared with nginx on the same machine in the same run.
//
//   tokengate-bench-server PORT
//     GET /plain        13-byte body from a synchronous handler (no I/O path)
//     GET /async        async handler that finishes without suspending (inline bridge)
//     GET /async-hop    async handler that calls an actor (idle actors run inline: no suspension)
//     GET /async-yield  async handler that yields: always suspend -> pool thread -> resume
import Foundation
import HTTPTypes
import TGHTTPServer

actor Hop {
    func value() -> Int { 1 }
}

let hop = Hop()
let body = Array("hello, world!".utf8)
let fields: HTTPFields = [.contentType: "text/plain"]
let plain = ServerResponse(status: .ok, headerFields: fields, body: .bytes(body))

/// Lets the handler read the server's counters (set once after creation).
final class ServerBox: @unchecked Sendable {
    // Invariant: written once before the server starts, only read afterwards.
    var value: HTTPServer?
}
let statsServer = ServerBox()

let port = UInt16(CommandLine.arguments.dropFirst().first ?? "8090") ?? 8090
var configuration = HTTPServer.Configuration()
configuration.port = port
configuration.connectionLimit = 20000
let server = HTTPServer(configuration: configuration) { request in
    switch request.path {
    case "/plain":
        return .response(plain)
    case "/async":
        return .async { _ in plain }
    case "/async-hop":
        return .async { _ in
            _ = await hop.value()
            return plain
        }
    case "/async-yield":
        return .async { _ in
            await Task.yield()
            return plain
        }
    case "/stats":
        return .response(ServerResponse(status: .ok, contentType: "text/plain", body: "suspended \(statsServer.value?.suspendedRequestCount ?? -1)"))
    default:
        return .response(ServerResponse(status: .notFound))
    }
}
statsServer.value = server
try server.start()
print("listening on 127.0.0.1:\(server.port)")
signal(SIGTERM, SIG_IGN)
signal(SIGINT, SIG_IGN)
let signals = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .main)
let interrupts = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
for source in [signals, interrupts] {
    source.setEventHandler {
        Task {
            await server.shutdown()
            exit(0)
        }
    }
    source.resume()
}
dispatchMain()

// A server for bench/run.sh: the HTTP server wrapper with fixed handlers, so the wrapper's own cost
// can be compared with nginx on the same machine in the same run.
//
//   tokengate-bench-server PORT
//     GET /plain        13-byte body from a synchronous handler (no I/O path)
//     GET /async        async handler that finishes without suspending (inline bridge)
//     GET /async-hop    async handler that calls an actor (idle actors run inline: no suspension)
//     GET /async-yield  async handler that yields (Task.yield) once
//     GET /async-io     async handler that awaits work completed by another thread, as a libpq or
//                       libcurl completion is: always suspend -> other thread -> resume
//     GET /sleep        answers after one second (a slow upstream for bench/proxy.sh)
//     GET /proxy/...    one-hop proxy to UPSTREAM (host:port) through the libcurl client, with a
//                       static Authorization header (like nginx proxy_pass + proxy_set_header)
//     ANY /loop/...     the same hop the way TokenGate's proxy goes, with nothing of its domain:
//                       a deferred reply on the connection's loop, that loop's client, the app's
//                       fields passed on as the C floor passes them (bench/floor/proxy_floor.c)
//                       with X-Forwarded-For, X-Request-ID and a static bearer, the answer's
//                       fields relayed from libcurl's bytes (bench/profile.sh: the wrappers' cost)
import Foundation
import HTTPTypes
import TGEventLoop
import TGHTTPClient
import TGHTTPServer

actor Hop {
    func value() -> Int { 1 }
}

let hop = Hop()

/// Stands in for an I/O thread (libpq worker, libcurl event thread): resumes each continuation
/// handed to it from its own thread, at once.
final class Completer: @unchecked Sendable {
    // Invariant: `pending` is only accessed with `condition` locked.
    private let condition = NSCondition()
    private var pending: [CheckedContinuation<Void, Never>] = []

    init() {
        let thread = Thread { [self] in
            while true {
                condition.lock()
                while pending.isEmpty { condition.wait() }
                let batch = pending
                pending.removeAll(keepingCapacity: true)
                condition.unlock()
                for continuation in batch { continuation.resume() }
            }
        }
        thread.start()
    }

    func complete() async {
        await withCheckedContinuation { continuation in
            condition.lock()
            pending.append(continuation)
            condition.signal()
            condition.unlock()
        }
    }
}
let completer = Completer()
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
let upstream = CommandLine.arguments.dropFirst(2).first ?? "127.0.0.1:8091"
var clientConfiguration = HTTPClient.Configuration()
clientConfiguration.allowPlainHTTPToLoopbackForTesting = true
clientConfiguration.maxConnectionsPerHost = 64
let client = HTTPClient(configuration: clientConfiguration)

@Sendable func forward(_ request: ServerRequest) async -> ServerResponse {
    let target = String(request.target.dropFirst("/proxy".count))
    var outgoing = HTTPRequest(method: request.method, scheme: "http", authority: upstream, path: target)
    outgoing.headerFields[.authorization] = "Bearer upstream-token"
    do {
        let response = try await client.send(outgoing, timeout: .seconds(10))
        var fields = HTTPFields()
        fields[.contentType] = response.head.headerFields[.contentType]
        return ServerResponse(status: response.head.status, headerFields: fields, body: .bytes(response.body))
    } catch {
        return ServerResponse(status: .badGateway)
    }
}
var configuration = HTTPServer.Configuration()
configuration.port = port
configuration.connectionLimit = 20000
configuration.connectionTimeoutSeconds = 60
let loops = EventLoopGroup(count: configuration.threads)
let loopClients = loops.loops.map { loop in
    var clientConfiguration = HTTPClient.Configuration()
    clientConfiguration.allowPlainHTTPToLoopbackForTesting = true
    clientConfiguration.maxConnectionsPerHost = 256
    clientConfiguration.maxConnections = 256
    return HTTPClient(configuration: clientConfiguration, loop: loop)
}
let server = HTTPServer(configuration: configuration, loops: loops, stopsLoops: true) { request in
    // Before the switch, which compares strings character by character: the hop measured
    // against the C floor matches its route on bytes, as the floor does.
    if LoopHop.matches(request.target) { return .deferred(LoopHop(request: request)) }
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
    case "/async-io":
        return .async { _ in
            await completer.complete()
            return plain
        }
    case "/sleep":
        return .async { _ in
            try? await Task.sleep(for: .seconds(1))
            return plain
        }
    case let path where path.hasPrefix("/proxy/"):
        return .async(forward)
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

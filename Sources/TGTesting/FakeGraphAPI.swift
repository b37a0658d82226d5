import Foundation
public import HTTPTypes
import Synchronization
import TGBase
import TGCrypto
import TGHTTPServer

/// A Graph-shaped API on loopback for proxy tests and benchmarks: it checks bearer tokens with a
/// closure (e.g. ``FakeIdentityProvider/subject(ofAccessToken:)``), records what it received, and
/// serves the shapes that matter: JSON, binary `$value` bodies, large streamed bodies, slow
/// answers, chosen statuses with `Retry-After`, and `@odata.nextLink` pages.
///
/// Paths, below ``basePath`` (Graph's `/v1.0`, say; none by default): `/me`, `/me/photo/$value`,
/// `/echo` (what arrived, as JSON), `/upload` (the body is streamed in and answered as
/// `{"bytes":N,"sha256":"…"}`), `/bytes?count=N` (N bytes, streamed), `/events` (server-sent
/// events: what the test ``publish(_:)``es, as it does; `?heartbeat_ms=N`: a `: heartbeat`
/// comment every N ms besides), `/slow?ms=N`,
/// `/status/{code}`, `/users` (a page with an absolute `@odata.nextLink` to the second,
/// `/users?$skiptoken=2`, which has an `@odata.deltaLink`), and whatever a test set with
/// ``serve(_:status:fields:body:chunked:)``.
public final class FakeGraphAPI: Sendable {
    /// A request as the API saw it.
    public struct Received: Sendable {
        public var method: String
        public var path: String
        public var headerFields: HTTPFields
        public var bodyCount: Int
    }

    private let server: HTTPServer
    private let log = Mutex<[Received]>([])
    private let rejections = Mutex<Int>(0)
    private let uploadLog = Mutex<[(bytes: Int, sha256: String)]>([])
    private let canned = Mutex<[String: Canned]>([:])
    private let demands = Mutex<[String: Demand]>([:])
    private let slowCalls = Mutex<(inFlight: Int, peak: Int)>((0, 0))
    private let eventStreams = Mutex<[UUID: AsyncStream<[UInt8]>.Continuation]>([:])
    /// The server's origin, `http://127.0.0.1:PORT`.
    public let baseURL: String
    /// The path the API lives under (no trailing `/`); the base URL to configure is ``apiURL``.
    public let basePath: String
    /// ``baseURL`` + ``basePath``.
    public var apiURL: String { baseURL + basePath }

    /// The most `/slow` calls that were in flight at once (each holds a connection of its caller's
    /// while it sleeps).
    public var peakConcurrentSlowCalls: Int { slowCalls.withLock { $0.peak } }

    /// An answer set by a test.
    struct Canned: Sendable {
        var status: Int
        var fields: [(String, String)]
        var body: [UInt8]
        var chunked: Bool
    }

    /// A path that wants more of a token than its being valid (a step-up, RFC 9470).
    struct Demand: Sendable {
        var challenge: String
        var accepts: @Sendable (String) -> Bool
    }

    /// The photo `/me/photo/$value` serves: every byte value, 64 times.
    public static let photo: [UInt8] = (0..<(256 * 64)).map { UInt8($0 & 0xFF) }

    /// Starts on a free loopback port; `subject` says who a token belongs to (nil: refused).
    public init(threads: Int = 2, basePath: String = "", subject: @escaping @Sendable (String) -> String?) throws {
        var configuration = HTTPServer.Configuration()
        configuration.threads = threads
        configuration.connectionLimit = 20_000
        configuration.requestTimeout = .seconds(120)
        // libmicrohttpd 0.9.75 notices a client that dropped a chunked body mid-chunk only at the
        // connection timeout: stopping waits for such a request briefly, not 10 s.
        configuration.drainTimeout = .seconds(1)
        configuration.maxBodySize = 64 << 20
        // Room for answers with larger heads than TokenGate's own connection memory takes (what
        // TokenGate does with an API's oversized head is tested).
        configuration.connectionMemoryLimit = 64 * 1024
        configuration.limits = { _, path in
            path == "/upload" ? HTTPServer.RequestLimits(maxBodySize: 256 << 20, requestTimeout: .seconds(120), streamsBody: true) : nil
        }
        let box = Mutex<FakeGraphAPI?>(nil)
        server = HTTPServer(configuration: configuration) { request in
            guard let api = box.withLock({ $0 }) else { return .response(ServerResponse(status: .serviceUnavailable)) }
            return api.handle(request, subject: subject)
        }
        try server.start()
        baseURL = "http://127.0.0.1:\(server.port)"
        self.basePath = basePath
        box.withLock { $0 = self }
    }

    public func stop() async {
        for stream in eventStreams.withLock({ Array($0.values) }) { stream.finish() }
        await server.shutdown()
    }

    /// Sends `text` as it is (`data: …\n\n`, or a part of an event) on every open `/events` stream.
    public func publish(_ text: String) {
        for stream in eventStreams.withLock({ Array($0.values) }) { stream.yield(Array(text.utf8)) }
    }

    /// `/events` streams open now (one ends when its client is gone and the next write fails).
    public var openEventStreams: Int { eventStreams.withLock { $0.count } }

    /// Everything received so far.
    public var received: [Received] { log.withLock { $0 } }

    /// The size and SHA-256 (hex) of every body `/upload` read to its end, in order.
    public var uploads: [(bytes: Int, sha256: String)] { uploadLog.withLock { $0 } }

    /// Answers GET and HEAD of `path` (below ``basePath``) with `body` and `fields` from now on:
    /// with its `Content-Length`, or `chunked` in pieces of 16 KiB without one.
    public func serve(
        _ path: String,
        status: Int = 200,
        fields: [(String, String)] = [("Content-Type", "application/json")],
        body: [UInt8],
        chunked: Bool = false
    ) {
        canned.withLock { $0[path] = Canned(status: status, fields: fields, body: body, chunked: chunked) }
    }

    /// Answers calls to `path` (below ``basePath``) whose token `accepts` refuses with 401 and
    /// `WWW-Authenticate: <challenge>` (RFC 9470's `Bearer error="insufficient_user_authentication",
    /// acr_values="…"`, or Entra's claims challenge), from now on.
    public func demand(_ path: String, challenge: String, accepts: @escaping @Sendable (String) -> Bool) {
        demands.withLock { $0[path] = Demand(challenge: challenge, accepts: accepts) }
    }

    /// Refuse the next `count` valid tokens with 401 `invalid_token` (a token revoked upstream).
    public func rejectNextTokens(_ count: Int) { rejections.withLock { $0 = count } }

    private func handle(_ request: ServerRequest, subject: @Sendable (String) -> String?) -> HTTPServer.Reply {
        let path = String(request.path)
        log.withLock {
            $0.append(
                Received(method: request.head.method.rawValue, path: path, headerFields: request.head.headerFields, bodyCount: request.body.count)
            )
        }
        let authorization = request.head.headerFields[.authorization] ?? ""
        let token = authorization.hasPrefix("Bearer ") ? String(authorization.dropFirst(7)) : ""
        let rejectThis = rejections.withLock { remaining in
            guard remaining > 0 else { return false }
            remaining -= 1
            return true
        }
        guard let user = subject(token), !rejectThis else {
            return .response(
                ServerResponse(
                    status: .unauthorized,
                    contentType: "application/json",
                    body: #"{"error":{"code":"InvalidAuthenticationToken","message":"Access token is invalid."}}"#,
                    headerFields: [.wwwAuthenticate: #"Bearer realm="fake-graph", error="invalid_token""#]
                )
            )
        }
        guard path.hasPrefix(basePath + "/") else {
            return .response(ServerResponse(status: .notFound, contentType: "application/json", body: #"{"error":{"code":"NotFound"}}"#))
        }
        let below = String(path.dropFirst(basePath.count))
        if let demand = demands.withLock({ $0[below] }), !demand.accepts(token) {
            return .response(
                ServerResponse(
                    status: .unauthorized,
                    contentType: "application/json",
                    body: #"{"error":{"code":"InsufficientAuthentication","message":"A stronger sign-in is required."}}"#,
                    headerFields: [.wwwAuthenticate: demand.challenge]
                )
            )
        }
        if let answer = canned.withLock({ $0[below] }) { return .response(Self.response(answer)) }
        switch below {
        case "/me":
            return .response(Self.json(["id": user, "displayName": "User \(user)"]))
        case "/me/photo/$value":
            return .response(ServerResponse(status: .ok, headerFields: [.contentType: "image/jpeg"], body: .bytes(Self.photo)))
        case "/echo":
            var headers: [String: String] = [:]
            for field in request.head.headerFields {
                headers[field.name.canonicalName, default: ""] += (headers[field.name.canonicalName] == nil ? "" : ", ") + field.value
            }
            let object: [String: Any] = [
                "method": request.head.method.rawValue, "path": below, "query": request.rawQuery.map(String.init) ?? "",
                "headers": headers, "body_count": request.body.count,
            ]
            return .response(Self.json(object))
        case "/upload":
            return .async { request in
                guard let stream = request.bodyStream, let body = try? await stream.collect(upTo: 256 << 20) else {
                    return ServerResponse(status: .badRequest, contentType: "application/json", body: #"{"error":{"code":"BadBody"}}"#)
                }
                let digest = Hex.lowercase(Digest.sha256(body))
                self.uploadLog.withLock { $0.append((body.count, digest)) }
                return Self.json(["bytes": body.count, "sha256": digest])
            }
        case "/bytes":
            let count = Int(request.queryValue("count") ?? "") ?? 0
            // `pause_ms`: a trickling API (each 64 KiB chunk after that long).
            let pause = Int(request.queryValue("pause_ms") ?? "") ?? 0
            return .response(
                ServerResponse(
                    status: .ok,
                    headerFields: [.contentType: "application/octet-stream"],
                    body: .stream { writer in
                        let chunk = [UInt8](repeating: 0x5A, count: 1 << 16)
                        var left = count
                        while left > 0 {
                            let size = min(left, chunk.count)
                            if pause > 0 { try await Task.sleep(for: .milliseconds(pause)) }
                            try await writer.write(size == chunk.count ? chunk : Array(chunk[0..<size]))
                            left -= size
                        }
                    }
                )
            )
        case "/events":
            return .response(eventStream(heartbeat: Int(request.queryValue("heartbeat_ms") ?? "") ?? 0))
        case "/slow":
            let millis = Int(request.queryValue("ms") ?? "") ?? 1000
            slowCalls.withLock {
                $0.inFlight += 1
                $0.peak = max($0.peak, $0.inFlight)
            }
            return .async { [self] _ in
                try? await Task.sleep(for: .milliseconds(millis))
                slowCalls.withLock { $0.inFlight -= 1 }
                return Self.json(["slept_ms": millis])
            }
        case "/redirect":
            // Answers with `Location: <to>` (an API pointing at itself or elsewhere).
            let status = Int(request.queryValue("status") ?? "") ?? 302
            return .response(
                ServerResponse(status: HTTPResponse.Status(code: status), headerFields: [.location: request.queryValue("to") ?? "/"])
            )
        case "/users":
            if request.queryValue("$skiptoken") == "2" {
                return .response(Self.json(["value": [["id": "2"]], "@odata.deltaLink": apiURL + "/users/delta?$deltatoken=d1"]))
            }
            return .response(Self.json(["value": [["id": "1"]], "@odata.nextLink": apiURL + "/users?$skiptoken=2"]))
        default:
            if below.hasPrefix("/status/"), let code = Int(below.dropFirst(8)), (200...599).contains(code) {
                var fields: HTTPFields = [:]
                if code == 429 || code == 503 { fields[.retryAfter] = "7" }
                return .response(
                    ServerResponse(
                        status: HTTPResponse.Status(code: code),
                        contentType: "application/json",
                        body: #"{"status":\#(code)}"#,
                        headerFields: fields
                    )
                )
            }
            return .response(ServerResponse(status: .notFound, contentType: "application/json", body: #"{"error":{"code":"NotFound"}}"#))
        }
    }

    /// A `/events` answer: `: open`, then what ``publish(_:)`` sends (and a heartbeat every
    /// `heartbeat` ms when positive), each written as it comes, until the client is gone.
    private func eventStream(heartbeat: Int) -> ServerResponse {
        let id = UUID()
        let (stream, continuation) = AsyncStream<[UInt8]>.makeStream()
        eventStreams.withLock { $0[id] = continuation }
        if heartbeat > 0 {
            let beating = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(heartbeat))
                    continuation.yield(Array(": heartbeat\n\n".utf8))
                }
            }
            continuation.onTermination = { _ in beating.cancel() }
        }
        return ServerResponse(
            status: .ok,
            headerFields: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: .stream { [self] writer in
                defer {
                    eventStreams.withLock { $0[id] = nil }
                    continuation.finish()
                }
                try await writer.write(Array(": open\n\n".utf8))
                for await bytes in stream { try await writer.write(bytes) }
            }
        )
    }

    private static func response(_ answer: Canned) -> ServerResponse {
        var fields = HTTPFields()
        for (name, value) in answer.fields { if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) } }
        guard answer.chunked else {
            return ServerResponse(status: HTTPResponse.Status(code: answer.status), headerFields: fields, body: .bytes(answer.body))
        }
        let body = answer.body
        return ServerResponse(
            status: HTTPResponse.Status(code: answer.status),
            headerFields: fields,
            body: .stream { writer in
                var start = 0
                while start < body.count {
                    let end = min(start + 16 * 1024, body.count)
                    try await writer.write(Array(body[start..<end]))
                    start = end
                }
            }
        )
    }

    private static func json(_ object: [String: Any]) -> ServerResponse {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return ServerResponse(status: .ok, headerFields: [.contentType: "application/json"], body: .bytes(Array(data)))
    }
}

import Foundation
public import HTTPTypes
import Synchronization
public import TGApp
import TGBase
import TGHTTPServer

/// Drives an ``Application`` in-process, without sockets: each request goes through
/// ``Application/respond(to:)``, the code a served request goes through (route match, request id,
/// error mapping, metrics, access log); only the transport differs. What the HTTP server does on
/// its own (body limits, deadlines, `Content-Length`, connection handling) is not here: tests of
/// that stay on sockets.
public struct TestClient: Sendable {
    public let application: Application
    /// The `Host` field sent (nil: none).
    public var authority: String?
    /// The TCP peer the request seems to come from (nil: unknown).
    public var clientAddress: String?

    /// A client of `application`; requests come from `clientAddress` (the loopback address by
    /// default, as the system curl's would).
    public init(_ application: Application, authority: String? = nil, clientAddress: String? = "127.0.0.1") {
        self.application = application
        self.authority = authority
        self.clientAddress = clientAddress
    }

    /// Sends a request: `target` is the path with its query, as sent on the wire. A streamed
    /// answer is read to its end; a `HEAD` answer's body is left out, as the server does.
    public func execute(
        uri target: String,
        method: HTTPRequest.Method = .get,
        headers: HTTPFields = [:],
        body: [UInt8] = []
    ) async -> TestResponse {
        let head = HTTPRequest(method: method, scheme: "http", authority: authority, path: target, headerFields: headers)
        let response = await application.respond(to: ServerRequest(head: head, body: body, remoteAddress: clientAddress))
        var bytes = await Self.drain(response.body)
        if method == .head { bytes = [] }
        var fields = response.headerFields
        response.rawHeaderFields.forEachField { name, value in
            if let name = HTTPField.Name(String(cString: name)) { fields.append(HTTPField(name: name, value: String(cString: value))) }
        }
        if let requestID = response.requestID { fields.append(HTTPField(name: HTTPField.Name("X-Request-ID")!, value: requestID)) }
        return TestResponse(status: response.status.code, headerFields: fields, bytes: bytes)
    }

    /// `GET path?query`, with a bearer token and more header fields.
    public func get(_ path: String, query: [(String, String)] = [], bearer: String? = nil, headers: HTTPFields = [:]) async -> TestResponse {
        await execute(uri: path + Self.queryString(query), method: .get, headers: Self.fields(headers, bearer: bearer))
    }

    /// `POST path` with a form body (`application/x-www-form-urlencoded`).
    public func post(_ path: String, form: [(String, String)], bearer: String? = nil, headers: HTTPFields = [:]) async -> TestResponse {
        var fields = Self.fields(headers, bearer: bearer)
        fields[.contentType] = "application/x-www-form-urlencoded"
        let body = FormURLEncoding.encode(form.map { (name: $0.0, value: $0.1) })
        return await execute(uri: path, method: .post, headers: fields, body: Array(body.utf8))
    }

    /// `DELETE path`.
    public func delete(_ path: String, bearer: String? = nil, headers: HTTPFields = [:]) async -> TestResponse {
        await execute(uri: path, method: .delete, headers: Self.fields(headers, bearer: bearer))
    }

    static func queryString(_ query: [(String, String)]) -> String {
        query.isEmpty ? "" : "?" + FormURLEncoding.encode(query.map { (name: $0.0, value: $0.1) })
    }

    static func fields(_ headers: HTTPFields, bearer: String?) -> HTTPFields {
        var fields = headers
        if let bearer { fields[.authorization] = "Bearer \(bearer)" }
        return fields
    }

    /// The body's bytes: a streamed one read to its end (a producer that throws ends it there, as
    /// a cut connection would).
    static func drain(_ body: ServerResponse.Body) async -> [UInt8] {
        switch body {
        case .bytes(let bytes):
            return bytes
        case .stream(let produce):
            let collected = Mutex<[UInt8]>([])
            try? await produce(ResponseBodyWriter(inProcess: { chunk in collected.withLock { $0 += chunk } }))
            return collected.withLock { $0 }
        case .source(let source):
            return await drain(source)
        case .upgrade(let handler):
            // In-process requests have no connection to hand over.
            handler.abandoned()
            return []
        }
    }

    /// A loop source's bytes. Only the proxy's call from an event loop makes one, which an
    /// in-process request (no loop) never takes; read here for completeness.
    private static func drain(_ source: any ResponseBodySource) async -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 32 * 1024)
        defer { source.close() }
        while true {
            switch buffer.withUnsafeMutableBytes({ source.read(into: $0) }) {
            case .bytes(let count): bytes += buffer[..<count]
            case .end, .failed: return bytes
            case .wait: await withCheckedContinuation { continuation in source.notify { continuation.resume() } }
            }
        }
    }
}

/// What a ``TestClient`` got back.
public struct TestResponse: Sendable {
    public var status: Int
    public var headerFields: HTTPFields
    public var bytes: [UInt8]

    public init(status: Int, headerFields: HTTPFields, bytes: [UInt8]) {
        self.status = status
        self.headerFields = headerFields
        self.bytes = bytes
    }

    /// The body as UTF-8 text.
    public var body: String { String(decoding: bytes, as: UTF8.self) }

    /// The first value of header field `name` (case-insensitive), as a client reading the lines
    /// of the head finds it.
    public func header(_ name: String) -> String? {
        HTTPField.Name(name).flatMap { headerFields[values: $0].first }
    }

    /// The body as a JSON object (empty when it is not one).
    public var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] ?? [:]
    }
}

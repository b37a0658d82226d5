public import HTTPTypes
public import TGEventLoop

#if canImport(Glibc)
import Glibc
import TGBase
#endif

/// A request as the server received it: the head, the whole body (at most the configured size)
/// or, for a route that streams its body, the body as it arrives; and the peer's address.
public struct ServerRequest: Sendable {
    /// What a request is made of, kept in one immutable box: a copy of the request (into a
    /// route's call, a task, a proxied call) retains one object instead of each of its parts,
    /// and a change makes a new box (value semantics; requests are rarely changed).
    private struct Parts: Sendable {
        var method: HTTPRequest.Method
        var authority: String?
        var target: String
        var fields: RequestFields
        var body: [UInt8]
        var bodyStream: ServerRequestBody?
        var peer: PeerAddress
        var loop: EventLoop?
        var connectionMemo: ConnectionMemo?
        var answerHeadRoom: Int
    }

    private final class Box: Sendable {
        let parts: Parts
        init(_ parts: Parts) { self.parts = parts }
    }

    private var box: Box

    private mutating func change(_ edit: (inout Parts) -> Void) {
        var parts = box.parts
        edit(&parts)
        box = Box(parts)
    }

    public var method: HTTPRequest.Method {
        get { box.parts.method }
        set { change { $0.method = newValue } }
    }
    /// The `Host` header, if any: the first one, read from the fields when asked (a served
    /// request's is not made a string on every request), unless set.
    public var authority: String? {
        get { box.parts.authority ?? box.parts.fields.first(Self.hostField) }
        set { change { $0.authority = newValue } }
    }
    private static let hostField = HTTPField.Name("Host")!
    /// The raw request target (path and query, exactly as sent: nothing is unescaped).
    public var target: String {
        get { box.parts.target }
        set { change { $0.target = newValue } }
    }
    /// The header fields, as bytes (see ``RequestFields``).
    public var fields: RequestFields {
        get { box.parts.fields }
        set { change { $0.fields = newValue } }
    }
    /// The request body, complete. Its size never exceeds `HTTPServer.Configuration.maxBodySize`.
    /// Empty when the body streams (see ``bodyStream``).
    public var body: [UInt8] {
        get { box.parts.body }
        set { change { $0.body = newValue } }
    }
    /// The body as it arrives, for requests whose ``HTTPServer/RequestLimits/streamsBody`` is set;
    /// nil otherwise. Read it once.
    public var bodyStream: ServerRequestBody? {
        get { box.parts.bodyStream }
        set { change { $0.bodyStream = newValue } }
    }
    /// The TCP peer's address, formatted only when ``remoteAddress`` is read.
    var peer: PeerAddress { box.parts.peer }
    /// The event loop serving the request (nil for a request made up outside a server). Work a
    /// handler starts there for a ``HTTPServer/Reply/deferred(_:)`` answer needs no thread hop.
    public var loop: EventLoop? {
        get { box.parts.loop }
        set { change { $0.loop = newValue } }
    }

    /// What a handler remembered from the connection's previous request (nil for a request made
    /// up outside a server). Only on ``loop``, by code that runs there (the request's first job
    /// does; a task it starts does not).
    public var connectionMemo: ConnectionMemo? { box.parts.connectionMemo }

    /// How many bytes the answer's head (status line and fields, as ``ServerResponse/headSize``
    /// counts them) may take: libmicrohttpd builds it in the connection's memory, next to this
    /// request's head, which it keeps there (docs/operations.md, "Request heads near the
    /// connection memory"). A larger one is not sent (``HTTPServer``); a proxy answers an API's
    /// oversized head with an error of its own instead. `Int.max` for a request made up outside
    /// a server.
    public var answerHeadRoom: Int { box.parts.answerHeadRoom }

    public init(head: HTTPRequest, body: [UInt8] = [], remoteAddress: String? = nil) {
        box = Box(
            Parts(
                method: head.method,
                authority: head.authority,
                target: head.path ?? "/",
                fields: RequestFields(head.headerFields),
                body: body,
                bodyStream: nil,
                peer: remoteAddress.map(PeerAddress.text) ?? .unknown,
                loop: nil,
                connectionMemo: nil,
                answerHeadRoom: .max
            )
        )
    }

    init(
        method: HTTPRequest.Method,
        authority: String?,
        target: String,
        fields: RequestFields,
        body: [UInt8],
        bodyStream: ServerRequestBody? = nil,
        peer: PeerAddress,
        loop: EventLoop? = nil,
        connectionMemo: ConnectionMemo? = nil,
        answerHeadRoom: Int = .max
    ) {
        box = Box(
            Parts(
                method: method,
                authority: authority,
                target: target,
                fields: fields,
                body: body,
                bodyStream: bodyStream,
                peer: peer,
                loop: loop,
                connectionMemo: connectionMemo,
                answerHeadRoom: answerHeadRoom
            )
        )
    }

    /// Method, scheme (`http`), authority (the `Host` header), the raw request target and the
    /// header fields as HTTPTypes has them: built on each read (the server keeps the fields as
    /// bytes; see ``fields``), taken apart on each write.
    public var head: HTTPRequest {
        get { HTTPRequest(method: method, scheme: "http", authority: authority, path: target, headerFields: fields.httpFields) }
        set {
            change { parts in
                parts.method = newValue.method
                parts.authority = newValue.authority
                parts.target = newValue.path ?? "/"
                parts.fields = RequestFields(newValue.headerFields)
            }
        }
    }

    /// The TCP peer's IP address as text (`127.0.0.1`, `::1`), or nil if unknown.
    public var remoteAddress: String? {
        get { peer.text }
        set { change { $0.peer = newValue.map(PeerAddress.text) ?? .unknown } }
    }

    /// The path without the query, still percent-encoded as sent.
    public var path: Substring {
        guard let mark = Self.queryMark(in: target) else { return target[...] }
        return target[..<mark]
    }

    /// The raw query string after `?`, or nil when there is none.
    public var rawQuery: Substring? {
        guard let mark = Self.queryMark(in: target) else { return nil }
        return target[target.utf8.index(after: mark)...]
    }

    /// The `?` that starts the query in a request target, if any: found with `memchr` in the
    /// string's bytes (every request's target is split here, some more than once).
    static func queryMark(in target: String) -> String.Index? {
        let offset = target.withUTF8Bytes { bytes -> Int? in
            guard let base = bytes.baseAddress, let mark = memchr(base, Int32(UInt8(ascii: "?")), bytes.count) else { return nil }
            return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(mark))
        }
        return offset.map { target.utf8.index(target.utf8.startIndex, offsetBy: $0) }
    }

    /// Query parameters in order, percent- and `+`-decoded (`application/x-www-form-urlencoded`).
    /// Pairs that do not decode as UTF-8 are dropped.
    public var queryItems: [(name: String, value: String)] {
        guard let query = rawQuery else { return [] }
        return FormURLEncoding.decode(query)
    }

    /// The first value of query parameter `name`.
    public func queryValue(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }

    /// Cookies from every `Cookie` header, in order. Values are returned as sent.
    public var cookies: [(name: String, value: String)] {
        var result: [(name: String, value: String)] = []
        for header in fields.values(.cookie) {
            for pair in header.split(separator: ";") {
                let trimmed = pair.drop { $0 == " " }
                guard let equals = trimmed.firstIndex(of: "=") else { continue }
                let name = String(trimmed[..<equals])
                var value = trimmed[trimmed.index(after: equals)...]
                if value.count >= 2, value.first == "\"", value.last == "\"" {
                    value = value.dropFirst().dropLast()
                }
                result.append((name, String(value)))
            }
        }
        return result
    }
}

public import HTTPTypes
public import TGEventLoop

#if canImport(Glibc)
import Glibc
import TGBase
#endif

/// A request as the server received it: the head, the whole body (at most the configured size)
/// or, for a route that streams its body, the body as it arrives; and the peer's address.
public struct ServerRequest: Sendable {
    public var method: HTTPRequest.Method
    /// The `Host` header, if any.
    public var authority: String?
    /// The raw request target (path and query, exactly as sent: nothing is unescaped).
    public var target: String
    /// The header fields, as bytes (see ``RequestFields``).
    public var fields: RequestFields
    /// The request body, complete. Its size never exceeds `HTTPServer.Configuration.maxBodySize`.
    /// Empty when the body streams (see ``bodyStream``).
    public var body: [UInt8]
    /// The body as it arrives, for requests whose ``HTTPServer/RequestLimits/streamsBody`` is set;
    /// nil otherwise. Read it once.
    public var bodyStream: ServerRequestBody?
    /// The TCP peer's address, formatted only when ``remoteAddress`` is read.
    var peer: PeerAddress
    /// The event loop serving the request (nil for a request made up outside a server). Work a
    /// handler starts there for a ``HTTPServer/Reply/deferred(_:)`` answer needs no thread hop.
    public var loop: EventLoop?

    public init(head: HTTPRequest, body: [UInt8] = [], remoteAddress: String? = nil) {
        method = head.method
        authority = head.authority
        target = head.path ?? "/"
        fields = RequestFields(head.headerFields)
        self.body = body
        self.peer = remoteAddress.map(PeerAddress.text) ?? .unknown
    }

    init(
        method: HTTPRequest.Method,
        authority: String?,
        target: String,
        fields: RequestFields,
        body: [UInt8],
        bodyStream: ServerRequestBody? = nil,
        peer: PeerAddress,
        loop: EventLoop? = nil
    ) {
        self.method = method
        self.authority = authority
        self.target = target
        self.fields = fields
        self.body = body
        self.bodyStream = bodyStream
        self.peer = peer
        self.loop = loop
    }

    /// Method, scheme (`http`), authority (the `Host` header), the raw request target and the
    /// header fields as HTTPTypes has them: built on each read (the server keeps the fields as
    /// bytes; see ``fields``), taken apart on each write.
    public var head: HTTPRequest {
        get { HTTPRequest(method: method, scheme: "http", authority: authority, path: target, headerFields: fields.httpFields) }
        set {
            method = newValue.method
            authority = newValue.authority
            target = newValue.path ?? "/"
            fields = RequestFields(newValue.headerFields)
        }
    }

    /// The TCP peer's IP address as text (`127.0.0.1`, `::1`), or nil if unknown.
    public var remoteAddress: String? {
        get { peer.text }
        set { peer = newValue.map(PeerAddress.text) ?? .unknown }
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

import HTTPTypes
import TGAuth
import TGHTTPClient
import TGHTTPServer

/// The header fields of a proxied call, both ways (RFC 9110 §7.6.1): hop-by-hop fields, the
/// caller's credentials and cookies, forwarding claims the caller made up and TokenGate's own
/// fields never pass; the upstream token, true forwarding fields and the request id are added.
enum ProxyHeaders {
    /// Fields meaningful for one connection only.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization",
    ]

    /// Fields the proxy sets or strips itself, which configuration may not set either.
    static let managed: Set<String> =
        hopByHop.union([
            // `dpop`: the app's proof is for TokenGate's URL and key-bound token, not the API's.
            "host", "authorization", "dpop", "cookie", "content-length", "expect", "forwarded", "x-forwarded-for",
            "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "x-forwarded-prefix", "x-real-ip", "x-request-id",
        ]).union(overrides)

    /// Fields some frameworks read as another method or another URL than the request's own
    /// (Spring's `HiddenHttpMethodFilter` kin, IIS URL Rewrite, Symfony, Laravel): never forwarded.
    static let overrides: Set<String> = [
        "x-http-method-override", "x-http-method", "x-method-override", "x-original-method", "x-original-url", "x-rewrite-url",
        "x-override-url", "x-forwarded-path", "x-forwarded-uri", "x-forwarded-url", "x-original-uri", "x-forwarded-server",
        "x-forwarded-scheme", "x-forwarded-ssl", "x-host", "x-original-host", "x-scheme",
    ]

    /// What the upstream learns about the original request.
    struct Forwarding {
        var clientAddress: String?
        /// Scheme and host of TokenGate's public base URL.
        var proto: String
        var host: String
        var requestID: String
    }

    /// The fields to send upstream, one by one (the rules of both paths, here once): the app's
    /// own fields but the managed ones, those its `Connection` names and `X-TokenGate-*`; the
    /// configured ones (replacing the app's of the same name); then the upstream token and the
    /// forwarding fields.
    static func forEachRequestField(
        _ incoming: RequestFields,
        token: String,
        forwarding: Forwarding,
        extra: HTTPFields,
        bearer: (String) -> Void,
        relay: (_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Void,
        emit: (HTTPField.Name, String) -> Void
    ) {
        forEachAppField(incoming, extra: extra, relay)
        for field in extra { emit(field.name, field.value) }
        // Managed names: none is left from the app or the configuration, so they are appended.
        // The token comes last: the cached path links to it, built once per token
        // (``bearerLines(_:)``), after the call's own lines.
        if let address = forwarding.clientAddress { emit(HTTPField.Name.xForwardedFor, address) }
        emit(Self.forwardedProto, forwarding.proto)
        emit(Self.forwardedHost, forwarding.host)
        emit(Application.requestIDField, forwarding.requestID)
        bearer(token)
    }

    /// The app's fields that pass: all but the managed ones, those its `Connection` names,
    /// `X-TokenGate-*` and those the configuration sets (`extra`).
    private static func forEachAppField(
        _ incoming: RequestFields,
        extra: HTTPFields,
        _ relay: (_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Void
    ) {
        let dropped = droppedByConnection(incoming)
        incoming.forEachField { name, value in
            if isManaged(name) || hasTokenGatePrefix(name) { return }
            // Rare (a `Connection` that names fields, configured fields): names as strings.
            if !dropped.isEmpty || !extra.isEmpty {
                let canonical = lowercased(name)
                if dropped.contains(canonical) || extra.contains(where: { $0.name.canonicalName == canonical }) { return }
            }
            relay(name, value)
        }
    }

    /// `managed.contains(name)` on a name's bytes in any case, without a string or a hash (every
    /// field of every proxied request comes through here): the names by length, compared folded.
    static func isManaged(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        guard name.count < managedByLength.count else { return false }
        for candidate in managedByLength[name.count] where foldedEqual(name, candidate) { return true }
        return false
    }

    /// ``managed``'s names grouped by their length (index: the length).
    private static let managedByLength: [[[UInt8]]] = {
        var table = [[[UInt8]]](repeating: [], count: (managed.map(\.utf8.count).max() ?? 0) + 1)
        for name in managed { table[name.utf8.count].append(Array(name.utf8)) }
        return table
    }()

    /// `name` in any case equals `lowercase` (as long).
    private static func foldedEqual(_ name: UnsafeBufferPointer<UInt8>, _ lowercase: [UInt8]) -> Bool {
        for index in 0..<name.count {
            let byte = name[index]
            if ((0x41...0x5A).contains(byte) ? byte | 0x20 : byte) != lowercase[index] { return false }
        }
        return true
    }

    /// The name starts `X-TokenGate-`, in any case (TokenGate's own fields never pass).
    static func hasTokenGatePrefix(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        name.count >= tokenGatePrefix.count && foldedEqual(UnsafeBufferPointer(rebasing: name[..<tokenGatePrefix.count]), tokenGatePrefix)
    }

    private static let tokenGatePrefix = Array("x-tokengate-".utf8)

    /// A field name in lowercase (most names fit a string without an allocation).
    private static func lowercased(_ name: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: name.count) { buffer in
            for index in 0..<name.count {
                let byte = name[index]
                buffer[index] = (0x41...0x5A).contains(byte) ? byte | 0x20 : byte
            }
            return name.count
        }
    }

    /// The fields to send upstream (the async path).
    static func request(_ incoming: RequestFields, token: String, forwarding: Forwarding, extra: HTTPFields) -> HTTPFields {
        var fields = HTTPFields()
        forEachRequestField(
            incoming,
            token: token,
            forwarding: forwarding,
            extra: extra,
            bearer: { fields.append(HTTPField(name: .authorization, value: "Bearer \($0)")) },
            relay: { name, value in
                // The server kept only token names.
                guard let name = HTTPField.Name(String(decoding: name, as: UTF8.self)) else { return }
                fields.append(HTTPField(name: name, value: String(decoding: value, as: UTF8.self)))
            },
            emit: { fields.append(HTTPField(name: $0, value: $1)) }
        )
        return fields
    }

    /// Configured fields as header lines, made once per API (copied into every call's lines).
    static func lines(_ fields: HTTPFields) -> HeaderLines {
        var lines = HeaderLines()
        for field in fields { lines.append(name: field.name.rawName, value: field.value) }
        return lines
    }

    /// `X-Forwarded-Proto` and `-Host` (TokenGate's public scheme and host), made once.
    static func forwardedLines(proto: String, host: String) -> HeaderLines {
        var lines = HeaderLines()
        lines.append("X-Forwarded-Proto", value: proto)
        lines.append("X-Forwarded-Host", value: host)
        return lines
    }

    /// ``request(_:token:forwarding:extra:)``'s fields but the last, the token's
    /// (``bearerLines(_:)``), as libcurl's header lines, in the same order (the cached path on the
    /// loop: no `HTTPFields` per call; `extraLines` are ``lines(_:)`` of `extra`,
    /// `forwardedLines` ``forwardedLines(proto:host:)``, copied in).
    static func requestLines(
        _ incoming: RequestFields,
        clientAddress: String?,
        requestID: String,
        extra: HTTPFields,
        extraLines: HeaderLines,
        forwardedLines: HeaderLines
    ) -> HeaderLines {
        // Room for a typical request's lines: one buffer, never grown.
        var lines = HeaderLines(capacity: 512)
        forEachAppField(incoming, extra: extra) { lines.append(name: $0, value: $1) }
        lines.append(contentsOf: extraLines)
        if let clientAddress { lines.append("X-Forwarded-For", value: clientAddress) }
        lines.append(contentsOf: forwardedLines)
        lines.append("X-Request-ID", value: requestID)
        return lines
    }

    /// `Authorization: Bearer <token>`, the last line of a proxied call's request, built once per
    /// upstream token and shared by every call that sends it (``UpstreamAccessToken/memo``):
    /// a call in flight holds a reference, not a copy of a token that can be 2 KB. Nil for a
    /// token that cannot be a field value (the call then takes the async path, which refuses it).
    static func bearerLines(_ token: UpstreamAccessToken) -> SharedHeaderLines? {
        let shared = token.memo.value {
            var lines = HeaderLines(capacity: 32 + token.value.utf8.count)
            return lines.appendBearer(token.value) ? SharedHeaderLines(lines) : SharedHeaderLines(HeaderLines(capacity: 0))
        }
        return shared.isEmpty ? nil : shared
    }

    /// Configured extra fields, parsed once (the validator refused names that do not parse).
    static func extraFields(_ configured: [String: String]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in configured.sorted(by: { $0.key < $1.key }) {
            if let name = HTTPField.Name(name) { fields[name] = value }
        }
        return fields
    }

    /// The fields to pass back to the app.
    static func response(_ upstream: HTTPFields) -> HTTPFields {
        let dropped = droppedByConnection(upstream)
        var fields = HTTPFields()
        fields.reserveCapacity(upstream.count + 1)
        for field in upstream {
            let name = field.name.canonicalName
            if isHopByHop(name) || (!dropped.isEmpty && dropped.contains(name)) || isReplacedInAnswers(name) {
                continue
            }
            fields.append(field)
        }
        return fields
    }

    /// ``response(_:)`` on an answer's raw lines, into `response`: kept fields go to its
    /// `rawHeaderFields` as bytes; a `Location` that `location` rewrites goes to its `headerFields`.
    /// `Content-Length` is left to the caller (the server sets it for a complete body).
    /// `location` is asked for only when the answer has a `Location` (most have none, and finding
    /// an API's rewrite costs a lookup by name). With `links` (the API's `rewrite_links`), `Link`
    /// fields whose targets name the API are rewritten, in their place.
    static func relay(
        _ head: RawHead,
        location: () -> ProxyLocation?,
        links: ProxyLinkRewrite? = nil,
        into response: inout ServerResponse
    ) {
        // Names listed in `Connection` (rare: most answers have none, or `keep-alive`).
        var dropped: [[UInt8]] = []
        if head.connectionNamesFields {
            head.forEachField { name, value in
                guard RawHeaderFields.equalsIgnoringCase(name, "connection") else { return }
                RawHead.forEachListItem(value) { token in
                    // `keep-alive` and the other hop-by-hop names go anyway; `close` names no field.
                    if !isHopByHop(token), !RawHeaderFields.equalsIgnoringCase(token, "close") {
                        dropped.append(token.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 })
                    }
                }
            }
        }
        head.forEachField { name, value in
            if isHopByHop(name) || isReplacedInAnswers(name) || RawHeaderFields.equalsIgnoringCase(name, "content-length")
                || dropped.contains(where: { $0.elementsEqual(name.lazy.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }) })
            {
                return
            }
            if let links, RawHeaderFields.equalsIgnoringCase(name, "link"), let rewritten = links.rewriteLinkField(value) {
                _ = rewritten.withUnsafeBufferPointer { response.rawHeaderFields.append(name: name, value: $0) }
                return
            }
            if RawHeaderFields.equalsIgnoringCase(name, "location"), let location = location() {
                let original = String(decoding: value, as: UTF8.self)
                if let rewritten = location.rewrite(original) {
                    response.headerFields[.location] = rewritten
                    return
                }
            }
            response.rawHeaderFields.append(name: name, value: value)
        }
    }

    /// End-to-end fields of an API's answer that the app does not get: `Set-Cookie` (the API's
    /// cookies are not the app's), `X-Request-ID` (TokenGate sends its own), `Server` (which software
    /// runs behind TokenGate is none of the app's business) and `Date` (TokenGate's server sends its
    /// own), as nginx's `proxy_pass` does for the last two.
    static func isReplacedInAnswers(_ name: String) -> Bool {
        switch name {
        case "set-cookie", "x-request-id", "server", "date": true
        default: false
        }
    }

    /// ``isReplacedInAnswers(_:)`` on a name's bytes, in any case.
    static func isReplacedInAnswers(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        switch name.count {
        case 4: RawHeaderFields.equalsIgnoringCase(name, "date")
        case 6: RawHeaderFields.equalsIgnoringCase(name, "server")
        case 10: RawHeaderFields.equalsIgnoringCase(name, "set-cookie")
        case 12: RawHeaderFields.equalsIgnoringCase(name, "x-request-id")
        default: false
        }
    }

    /// ``isHopByHop(_:)`` on a name's bytes, in any case.
    static func isHopByHop(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        switch name.count {
        case 2: RawHeaderFields.equalsIgnoringCase(name, "te")
        case 7: RawHeaderFields.equalsIgnoringCase(name, "trailer") || RawHeaderFields.equalsIgnoringCase(name, "upgrade")
        case 10: RawHeaderFields.equalsIgnoringCase(name, "connection") || RawHeaderFields.equalsIgnoringCase(name, "keep-alive")
        case 16: RawHeaderFields.equalsIgnoringCase(name, "proxy-connection")
        case 17: RawHeaderFields.equalsIgnoringCase(name, "transfer-encoding")
        case 18: RawHeaderFields.equalsIgnoringCase(name, "proxy-authenticate")
        case 19: RawHeaderFields.equalsIgnoringCase(name, "proxy-authorization")
        default: false
        }
    }

    /// `hopByHop.contains(name)` without hashing (every field of every answer comes through here).
    static func isHopByHop(_ name: String) -> Bool {
        switch name {
        case "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "proxy-authenticate",
            "proxy-authorization":
            true
        default: false
        }
    }

    /// Names listed in `Connection` (hop-by-hop by declaration).
    private static func droppedByConnection(_ fields: HTTPFields) -> Set<String> {
        droppedByConnection(fields[values: .connection])
    }

    private static func droppedByConnection(_ fields: RequestFields) -> Set<String> {
        // Most requests have no `Connection` field: no array is made for them.
        fields.contains(.connection) ? droppedByConnection(fields.values(.connection)) : []
    }

    private static func droppedByConnection(_ values: [String]) -> Set<String> {
        guard !values.isEmpty else { return [] }
        var names: Set<String> = []
        for value in values {
            for name in value.utf8.split(separator: UInt8(ascii: ",")) {
                let isBlank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
                guard let first = name.firstIndex(where: { !isBlank($0) }), let last = name.lastIndex(where: { !isBlank($0) }) else {
                    continue
                }
                names.insert(String(Substring(name[first...last])).lowercased())
            }
        }
        return names
    }

    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!
    static let forwardedHost = HTTPField.Name("X-Forwarded-Host")!
}

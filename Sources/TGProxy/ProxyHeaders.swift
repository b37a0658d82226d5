import HTTPTypes
public import TGHTTPClient
import TGHTTPServer

/// The header fields of a proxied call, both ways (RFC 9110 §7.6.1): hop-by-hop fields, the
/// caller's credentials and cookies, forwarding claims the caller made up and TokenGate's own
/// fields never pass; the upstream token, true forwarding fields and the request id are added.
public enum ProxyHeaders {
    /// Fields meaningful for one connection only.
    static let hopByHop = FieldNames([
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization",
    ])

    /// Fields the proxy sets or strips itself, which configuration may not set either.
    public static let managed = FieldNames(
        hopByHop.names.union([
            // `dpop`: the app's proof is for TokenGate's URL and key-bound token, not the API's.
            "host", "authorization", "dpop", "cookie", "content-length", "expect", "forwarded", "x-forwarded-for",
            "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "x-forwarded-prefix", "x-real-ip", "x-request-id",
        ]).union(overrides)
    )

    /// Fields some frameworks read as another method or another URL than the request's own
    /// (Spring's `HiddenHttpMethodFilter` kin, IIS URL Rewrite, Symfony, Laravel): never forwarded.
    static let overrides: Set<String> = [
        "x-http-method-override", "x-http-method", "x-method-override", "x-original-method", "x-original-url", "x-rewrite-url",
        "x-override-url", "x-forwarded-path", "x-forwarded-uri", "x-forwarded-url", "x-original-uri", "x-forwarded-server",
        "x-forwarded-scheme", "x-forwarded-ssl", "x-host", "x-original-host", "x-scheme",
    ]

    /// End-to-end fields of an API's answer that the app does not get: `Set-Cookie` (the API's
    /// cookies are not the app's), `X-Request-ID` (TokenGate sends its own), `Server` (which
    /// software runs behind TokenGate is none of the app's business) and `Date` (TokenGate's
    /// server sends its own), as nginx's `proxy_pass` does for the last two; and `Content-Length`,
    /// which the server sets for the body it sends.
    static let replacedInAnswers = FieldNames(["set-cookie", "x-request-id", "server", "date", "content-length"])

    /// What an answer's field is looked up in: ``hopByHop`` and ``replacedInAnswers`` as one set
    /// (one lookup per field of every answer, not two).
    static let notRelayed = FieldNames(hopByHop.names.union(replacedInAnswers.names))

    /// The app's fields that pass: all but the managed ones, those its `Connection` names,
    /// `X-TokenGate-*` and those the configuration sets (`extra`).
    private static func forEachAppField(
        _ incoming: RequestFields,
        extra: HTTPFields,
        _ relay: (_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Void
    ) {
        let dropped = droppedByConnection(incoming)
        incoming.forEachField { name, value in
            if managed.contains(name) || hasTokenGatePrefix(name) { return }
            // Rare (a `Connection` that names fields, configured fields): names as strings.
            if !dropped.isEmpty || !extra.isEmpty {
                let canonical = lowercased(name)
                if dropped.contains(canonical) || extra.contains(where: { $0.name.canonicalName == canonical }) { return }
            }
            relay(name, value)
        }
    }

    /// The name starts `X-TokenGate-`, in any case (TokenGate's own fields never pass).
    static func hasTokenGatePrefix(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        name.count >= tokenGatePrefix.count
            && tokenGatePrefix.withUnsafeBufferPointer {
                FieldNames.foldedEqual(UnsafeBufferPointer(rebasing: name[..<tokenGatePrefix.count]), $0)
            }
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

    /// The fields to send upstream but the last, the token's (``bearerLines(_:)``), as libcurl's
    /// header lines: the app's own fields but the managed ones, those its `Connection` names,
    /// `X-TokenGate-*` and those the configuration sets; the configured ones (`extraLines`,
    /// ``lines(_:)`` of `extra`); then the forwarding fields (`forwardedLines`,
    /// ``forwardedLines(proto:host:)``) and the request id. No `HTTPFields` per call.
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

    /// `Authorization: Bearer <token>`, the last line of a proxied call's request. Whoever hands
    /// the proxy a token builds this once per token and shares it with every call that sends it
    /// (``ProxyCredential``): a call in flight holds a reference, not a copy of a token that can
    /// be 2 KB. Empty for a token that cannot be a field value.
    public static func bearerLines(_ token: String) -> SharedHeaderLines {
        var lines = HeaderLines(capacity: 32 + token.utf8.count)
        return lines.appendBearer(token) ? SharedHeaderLines(lines) : SharedHeaderLines(HeaderLines(capacity: 0))
    }

    /// Configured extra fields, parsed once (the validator refused names that do not parse).
    static func extraFields(_ configured: [String: String]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in configured.sorted(by: { $0.key < $1.key }) {
            if let name = HTTPField.Name(name) { fields[name] = value }
        }
        return fields
    }

    /// An API's answer's fields that pass back to the app: all but the hop-by-hop ones, those its
    /// `Connection` names and ``replacedInAnswers``. From its raw lines into `response`: kept
    /// fields go to its `rawHeaderFields` as bytes; a `Location` that `location` rewrites goes to its `headerFields`.
    /// `Content-Length` is left to the caller (the server sets it for a complete body).
    /// With `links` (the API's `rewrite_links`), `Link`
    /// fields whose targets name the API are rewritten, in their place.
    static func relay(
        _ head: RawHead,
        location: ProxyLocation?,
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
                    if !hopByHop.contains(token), !RawHeaderFields.equalsIgnoringCase(token, "close") {
                        dropped.append(token.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 })
                    }
                }
            }
        }
        head.forEachField { name, value in
            if notRelayed.contains(name)
                || dropped.contains(where: { $0.elementsEqual(name.lazy.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }) })
            {
                return
            }
            if let links, RawHeaderFields.equalsIgnoringCase(name, "link"), let rewritten = links.rewriteLinkField(value) {
                _ = rewritten.withUnsafeBufferPointer { response.rawHeaderFields.append(name: name, value: $0) }
                return
            }
            if let location, RawHeaderFields.equalsIgnoringCase(name, "location") {
                let original = String(decoding: value, as: UTF8.self)
                if let rewritten = location.rewrite(original) {
                    response.headerFields[.location] = rewritten
                    return
                }
            }
            response.rawHeaderFields.append(name: name, value: value)
        }
    }

    /// RFC 6750 §3.1: the API says the token itself is the problem
    /// (`WWW-Authenticate: Bearer error="invalid_token"`).
    static func saysInvalidToken(_ head: RawHead) -> Bool {
        var found = false
        head.forEachField { name, value in
            if !found, RawHeaderFields.equalsIgnoringCase(name, "www-authenticate") {
                found = String(decoding: value, as: UTF8.self).contains("invalid_token")
            }
        }
        return found
    }

    /// Whether the app's own token came with the `DPoP` scheme (RFC 9449 §7.1).
    static func presentsDPoP(_ request: ServerRequest) -> Bool {
        var dpop = false
        _ = request.fields.withFirst(.authorization) { value in
            dpop = value.count > 5 && RawHeaderFields.equalsIgnoringCase(UnsafeBufferPointer(rebasing: value[0..<5]), "dpop ")
        }
        return dpop
    }

    /// Names an app's `Connection` lists (hop-by-hop by declaration), in lowercase.
    private static func droppedByConnection(_ fields: RequestFields) -> Set<String> {
        // Most requests have no `Connection` field: no array is made for them.
        guard fields.hasConnectionField else { return [] }
        var names: Set<String> = []
        for value in fields.values(.connection) {
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
}

/// A set of field names, looked up on a name's bytes in any case without a string, a hash or a
/// reference count (every field of every proxied call comes through here): the names' bytes in one
/// array, grouped by length, compared folded.
public struct FieldNames: Sendable {
    /// The names, in lowercase.
    public let names: Set<String>
    /// Every name's bytes, shortest first: the names `n` bytes long are `bytes[byLength[n]]`, one
    /// after the other.
    private let bytes: [UInt8]
    private let byLength: [Range<Int>]

    init(_ names: Set<String>) {
        self.names = names
        let sorted = names.sorted { ($0.utf8.count, $0) < ($1.utf8.count, $1) }
        var bytes: [UInt8] = []
        var byLength = [Range<Int>](repeating: 0..<0, count: (names.map(\.utf8.count).max() ?? 0) + 1)
        for name in sorted {
            let count = name.utf8.count
            if byLength[count].isEmpty { byLength[count] = bytes.count..<bytes.count }
            bytes += name.utf8
            byLength[count] = byLength[count].lowerBound..<bytes.count
        }
        self.bytes = bytes
        self.byLength = byLength
    }

    public func contains(_ name: String) -> Bool { names.contains(name.lowercased()) }

    func contains(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = name.count
        guard count > 0, count < byLength.count else { return false }
        let candidates = byLength[count]
        guard !candidates.isEmpty else { return false }
        return bytes.withUnsafeBytes { all in
            guard let names = all.baseAddress, let given = UnsafeRawPointer(name.baseAddress) else { return false }
            var start = candidates.lowerBound
            while start < candidates.upperBound {
                if Self.foldedEqual(given, names + start, count) { return true }
                start += count
            }
            return false
        }
    }

    /// `count` bytes at `name` in any case equal the lowercase ones at `lowercase`, compared eight
    /// at a time. Setting bit 5 of a byte lowercases a letter and leaves a digit and `-` as they
    /// are, and every byte of a name in the set has it; a byte that differs from the name's only in
    /// bit 5 is otherwise a control byte (CR for `-`, DLE to EM for digits), which no field name
    /// holds (a name with one is taken as in the set: dropped, never passed on).
    private static func foldedEqual(_ name: UnsafeRawPointer, _ lowercase: UnsafeRawPointer, _ count: Int) -> Bool {
        guard count >= 8 else {
            for index in 0..<count {
                let given = name.load(fromByteOffset: index, as: UInt8.self) | 0x20
                if given != lowercase.load(fromByteOffset: index, as: UInt8.self) { return false }
            }
            return true
        }
        let bit5: UInt64 = 0x2020_2020_2020_2020
        var offset = 0
        while true {
            // The last word ends at the last byte (it may overlap the one before).
            let at = min(offset, count - 8)
            let given = name.loadUnaligned(fromByteOffset: at, as: UInt64.self) | bit5
            if given != lowercase.loadUnaligned(fromByteOffset: at, as: UInt64.self) { return false }
            if at == count - 8 { return true }
            offset += 8
        }
    }

    /// `name` in any case equals `lowercase` (as long).
    static func foldedEqual(_ name: UnsafeBufferPointer<UInt8>, _ lowercase: UnsafeBufferPointer<UInt8>) -> Bool {
        for index in 0..<name.count {
            let byte = name[index]
            if ((0x41...0x5A).contains(byte) ? byte | 0x20 : byte) != lowercase[index] { return false }
        }
        return true
    }
}

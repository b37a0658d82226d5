/// An absolute URL of an API (its configured origin, under its base path) names a URL the app
/// cannot call with its TokenGate token, and leaks the API's address: it becomes TokenGate's URL
/// for the same resource. The one rule for an answer's `Location`, the targets of its `Link`
/// fields and the links in its JSON bodies (docs/proxy.md, "Next links and other absolute URLs").
///
/// A URL names the API when its scheme and host (in any case) and port (the scheme's default when
/// none is written) are the base URL's, it has no user info, and its path is the base URL's path or
/// continues it after a `/`. It becomes `<public base URL>/api/<name>` followed by the rest of the
/// path, the query and the fragment, byte for byte as they were. A network-path reference
/// (`//host:port/path`) is read with the API's scheme. Anything else (relative references,
/// another host or port, `https://api.example@evil.example/`, `https://api.example.evil.example/`,
/// a path that only starts like the base path, a host spelled with escapes, a path the proxy
/// refuses such as one with a dot segment) is left as it is.
///
/// One immutable object per API, made once: every cached call captures it (one reference).
final class ProxyLocation: Sendable {
    /// The API's scheme and host, lower-cased, and its port (the scheme's default when none).
    let scheme: [UInt8]
    let host: [UInt8]
    let port: Int
    /// The base URL's path without its trailing `/`.
    let basePath: [UInt8]
    /// `<public base URL>/api/<name>`.
    let gatewayBase: [UInt8]

    init?(baseURL: String, name: String, publicBaseURL: String) {
        guard let base = Self.split(Array(baseURL.utf8)), let scheme = base.scheme, let port = base.port ?? Self.defaultPort(scheme) else {
            return nil
        }
        // The base URL has no query or fragment (check-config refuses them).
        self.scheme = scheme
        host = base.host
        self.port = port
        basePath = base.rest.last == UInt8(ascii: "/") ? Array(base.rest.dropLast()) : base.rest
        gatewayBase = Array((publicBaseURL.hasSuffix("/") ? String(publicBaseURL.dropLast()) : publicBaseURL).utf8) + Array("/api/\(name)".utf8)
    }

    /// TokenGate's URL for `location`, or nil when it does not point under the API's base URL.
    func rewrite(_ location: String) -> String? {
        var text = location
        return text.withUTF8 { rewrite($0) }.map { String(decoding: $0, as: UTF8.self) }
    }

    /// ``rewrite(_:)`` on a URL's bytes (a `Link` target, a string of a JSON body). Most strings
    /// are no URL of the API: they are told apart by their first bytes, without an allocation.
    func rewrite(_ url: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard startsLikeTheAPI(url), let parts = Self.split(Array(url)), parts.host == host,
            (parts.port ?? Self.defaultPort(parts.scheme ?? scheme)) == port, parts.scheme == nil || parts.scheme == scheme
        else { return nil }
        let rest = parts.rest
        // The path: up to the query or the fragment.
        let pathEnd = rest.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.count
        guard pathEnd >= basePath.count, rest.starts(with: basePath),
            pathEnd == basePath.count || rest[basePath.count] == UInt8(ascii: "/")
        else { return nil }
        // Only to a path TokenGate forwards (no dot segment in any spelling, no `//`, ...): the
        // app's URL parser would take `/api/<name>/../x` out of the API's routes.
        let below = rest[min(basePath.count + 1, pathEnd)..<pathEnd]
        guard (try? ProxyTarget(rest: String(decoding: below, as: UTF8.self))) != nil else { return nil }
        return gatewayBase + rest[basePath.count...]
    }

    /// Whether a JSON string's raw content, escapes not yet decoded, can be a URL of the API: it
    /// starts with an escape, a `/` or the scheme's first letter (most strings of a body are
    /// told apart so, without decoding them).
    func mightStartEscaped(_ content: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = content.first else { return false }
        return first == UInt8(ascii: "\\") || first == UInt8(ascii: "/") || Self.lower(first) == scheme.first
    }

    /// `<scheme>://` in any case, or `//`.
    private func startsLikeTheAPI(_ url: UnsafeBufferPointer<UInt8>) -> Bool {
        let slash = UInt8(ascii: "/")
        if url.count >= 2, url[0] == slash, url[1] == slash { return true }
        guard url.count >= scheme.count + 3 else { return false }
        for index in 0..<scheme.count where Self.lower(url[index]) != scheme[index] { return false }
        return url[scheme.count] == UInt8(ascii: ":") && url[scheme.count + 1] == slash && url[scheme.count + 2] == slash
    }

    /// A URL with an authority (RFC 3986 §3): its scheme (lower-cased; nil for `//…`), host
    /// (lower-cased), port (nil when none is written) and the rest after the authority (path,
    /// query, fragment). Nil for anything else, for an authority with user info or a backslash
    /// (which WHATWG parsers read as a slash), and for a port that is no number up to 65535.
    private static func split(_ url: [UInt8]) -> (scheme: [UInt8]?, host: [UInt8], port: Int?, rest: [UInt8])? {
        let slash = UInt8(ascii: "/")
        var scheme: [UInt8]?
        var start = 0
        if !(url.count >= 2 && url[0] == slash && url[1] == slash) {
            guard let colon = url.firstIndex(of: UInt8(ascii: ":")), colon > 0, url.count >= colon + 3, url[colon + 1] == slash,
                url[colon + 2] == slash
            else { return nil }
            scheme = url[..<colon].map(lower)
            start = colon + 1
        }
        start += 2
        let end = url[start...].firstIndex { $0 == slash || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? url.count
        let authority = url[start..<end]
        guard !authority.contains(UInt8(ascii: "@")), !authority.contains(UInt8(ascii: "\\")), !authority.isEmpty else { return nil }
        // The port follows the last `:`, outside an IPv6 literal's brackets.
        var hostEnd = end
        var port: Int?
        if let colon = authority.lastIndex(of: UInt8(ascii: ":")), authority.lastIndex(of: UInt8(ascii: "]")).map({ $0 < colon }) ?? true {
            hostEnd = colon
            let digits = url[(colon + 1)..<end]
            if !digits.isEmpty {
                guard digits.count <= 5, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
                let number = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                guard number <= 65535 else { return nil }
                port = number
            }
        }
        guard hostEnd > start else { return nil }
        return (scheme, url[start..<hostEnd].map(lower), port, Array(url[end...]))
    }

    private static func lower(_ byte: UInt8) -> UInt8 { (0x41...0x5A).contains(byte) ? byte | 0x20 : byte }

    private static func defaultPort(_ scheme: [UInt8]) -> Int? {
        switch String(decoding: scheme, as: UTF8.self) {
        case "https": 443
        case "http": 80
        default: nil
        }
    }
}

import TGHTTPServer

/// Where a call to `/api/{name}/{path}` goes: `{base_url}/{path}?{query}`, and nowhere else. The
/// path is checked segment by segment so that no spelling of `..`, of an extra `/` or of a
/// backslash reaches an upstream that would read it differently from TokenGate; it is forwarded
/// as the app encoded it.
struct ProxyTarget: Equatable {
    /// The path below the upstream's base, as sent (percent-encoding kept), with its leading `/`.
    var rawPath: String
    /// The same, decoded once: what path prefixes are compared with.
    var decodedPath: String

    init(rest: String) throws(ProxyError) {
        rawPath = "/" + rest
        // Checked on the bytes; a path without `%` (the common case) is its own decoded form.
        let hasEscapes = rest.utf8.contains(UInt8(ascii: "%"))
        var decoded = ""
        var start = rest.utf8.startIndex
        while true {
            let end = rest.utf8[start...].firstIndex(of: UInt8(ascii: "/")) ?? rest.utf8.endIndex
            let segment = rest.utf8[start..<end]
            guard !segment.isEmpty || end == rest.utf8.endIndex else { throw .invalidPath("empty path segment (//)") }
            guard segment.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) else {
                throw .invalidPath("characters that must be percent-encoded, or a bad percent-encoding")
            }
            if segment.contains(UInt8(ascii: "%")) {
                decoded += "/" + (try Self.decode(segment))
            } else {
                guard !segment.elementsEqual(".".utf8), !segment.elementsEqual("..".utf8) else {
                    throw .invalidPath("a dot segment or an encoded slash")
                }
                if hasEscapes { decoded += "/" + String(Substring(segment)) }
            }
            guard end != rest.utf8.endIndex else { break }
            start = rest.utf8.index(after: end)
        }
        decodedPath = hasEscapes ? decoded : rawPath
    }

    /// One percent-encoded segment, decoded, unless it decodes to something a server could read
    /// differently (a dot segment, a slash or backslash, NUL, or another escape).
    private static func decode(_ segment: Substring.UTF8View) throws(ProxyError) -> String {
        guard let text = FormURLEncoding.percentDecode(segment, plusAsSpace: false) else {
            throw .invalidPath("characters that must be percent-encoded, or a bad percent-encoding")
        }
        guard text != ".", text != "..", !text.contains("/"), !text.contains("\\"), !text.utf8.contains(0) else {
            throw .invalidPath("a dot segment or an encoded slash")
        }
        let lowered = text.lowercased()
        guard !["%2e", "%2f", "%5c", "%00", "%25"].contains(where: lowered.contains) else {
            throw .invalidPath("double percent-encoding")
        }
        return text
    }

    /// Whether a configured prefix (`/me`, `/users/`) covers the path, on segment boundaries.
    func isAllowed(by prefixes: [String]) -> Bool {
        prefixes.contains { prefix in
            let bare = prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
            return bare.isEmpty || decodedPath == bare || decodedPath.hasPrefix(bare + "/")
        }
    }

    /// The upstream URL for this path and the caller's query.
    func url(base: String, query: Substring?) -> String {
        let trimmed = base.hasSuffix("/") ? String(base.dropLast()) : base
        guard let query else { return trimmed + rawPath }
        return trimmed + rawPath + "?" + query
    }
}

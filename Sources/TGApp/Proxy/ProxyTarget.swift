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
        let segments = rest.split(separator: "/", omittingEmptySubsequences: false)
        var decoded: [String] = []
        for (index, segment) in segments.enumerated() {
            guard !segment.isEmpty || index == segments.count - 1 else { throw .invalidPath("empty path segment (//)") }
            guard segment.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }),
                let text = FormURLEncoding.percentDecode(segment.utf8, plusAsSpace: false)
            else { throw .invalidPath("characters that must be percent-encoded, or a bad percent-encoding") }
            guard text != ".", text != "..", !text.contains("/"), !text.contains("\\"), !text.utf8.contains(0) else {
                throw .invalidPath("a dot segment or an encoded slash")
            }
            let lowered = text.lowercased()
            guard !["%2e", "%2f", "%5c", "%00", "%25"].contains(where: lowered.contains) else {
                throw .invalidPath("double percent-encoding")
            }
            decoded.append(text)
        }
        rawPath = "/" + rest
        decodedPath = "/" + decoded.joined(separator: "/")
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

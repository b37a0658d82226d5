import Foundation
import TGBase
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
        // Most paths are plain (no escape, no character the full check refuses or decodes): one
        // pass over the bytes in place finds that, and the path is its own decoded form.
        if rest.withUTF8Bytes(Self.isPlain) {
            let path = Self.slashed(rest)
            self.init(rawPath: path, decodedPath: path)
        } else {
            try self.init(checking: rest)
        }
    }

    /// `/` and `rest`, written into the string's storage at once (a concatenation goes through
    /// the general append, on every call).
    private static func slashed(_ rest: String) -> String {
        rest.withUTF8Bytes { bytes in
            String(unsafeUninitializedCapacity: bytes.count + 1) { buffer in
                buffer[0] = UInt8(ascii: "/")
                if let source = bytes.baseAddress, !bytes.isEmpty {
                    UnsafeMutableRawPointer(buffer.baseAddress! + 1).copyMemory(from: source, byteCount: bytes.count)
                }
                return bytes.count + 1
            }
        }
    }

    private init(rawPath: String, decodedPath: String) {
        self.rawPath = rawPath
        self.decodedPath = decodedPath
    }

    /// The full check, segment by segment.
    init(checking rest: String) throws(ProxyError) {
        rawPath = "/" + rest
        // Checked on the bytes; a path without `%` (the common case) is its own decoded form.
        let hasEscapes = rest.utf8.contains(UInt8(ascii: "%"))
        var decoded = ""
        var start = rest.utf8.startIndex
        while true {
            let end = rest.utf8[start...].firstIndex(of: UInt8(ascii: "/")) ?? rest.utf8.endIndex
            let segment = rest.utf8[start..<end]
            guard !segment.isEmpty || end == rest.utf8.endIndex else { throw .invalidPath("empty path segment (//)") }
            // Not `\` (a separator to some servers), nor `#` (where a URL parser, libcurl's
            // included, cuts the path and the query off).
            guard segment.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") && $0 != UInt8(ascii: "#") }) else {
                throw .invalidPath("characters that must be percent-encoded, or a bad percent-encoding")
            }
            // Path parameters: Tomcat and Spring strip `;…` from a segment, so `..;` is `..`.
            guard !segment.contains(UInt8(ascii: ";")) else { throw .invalidPath("a path parameter (;)") }
            if segment.contains(UInt8(ascii: "%")) {
                decoded += "/" + (try Self.decode(segment))
            } else {
                guard !Self.isDotSegment(Substring(segment)) else { throw .invalidPath("a dot segment or an encoded slash") }
                if hasEscapes { decoded += "/" + String(Substring(segment)) }
            }
            guard end != rest.utf8.endIndex else { break }
            start = rest.utf8.index(after: end)
        }
        decodedPath = hasEscapes ? decoded : rawPath
    }

    /// Visible ASCII but `%`, `;`, backslash and `#`, in segments that are neither empty (but the
    /// last) nor all dots: what the full check passes unchanged.
    private static func isPlain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var segmentStart = 0
        var allDots = true
        for index in 0..<bytes.count {
            let byte = bytes[index]
            guard byte > 0x20, byte < 0x7F, byte != UInt8(ascii: "%"), byte != UInt8(ascii: ";"), byte != UInt8(ascii: "\\"),
                byte != UInt8(ascii: "#")
            else { return false }
            if byte == UInt8(ascii: "/") {
                guard index > segmentStart, !allDots else { return false }
                segmentStart = index + 1
                allDots = true
            } else if byte != UInt8(ascii: ".") {
                allDots = false
            }
        }
        // The last segment may be empty (a trailing `/`), not all dots.
        return segmentStart == bytes.count || !allDots
    }

    /// `.`, `..`, and what servers trim to them: more dots (`...`), or dots followed by spaces
    /// or tabs (IIS and Windows drop trailing dots and spaces).
    private static func isDotSegment(_ segment: Substring) -> Bool {
        guard segment.first == "." else { return false }
        return segment.allSatisfy { $0 == "." || $0 == " " || $0 == "\t" }
    }

    /// One percent-encoded segment, decoded, unless it decodes to something a server could read
    /// differently: a dot segment, a slash or backslash, a `;`, a control character, another
    /// escape anywhere (double encoding), or a Unicode look-alike that normalisation (NFKC, as some servers
    /// and filesystems apply) turns into one of those. Bad escapes (`%u002e`) and bytes that are
    /// not UTF-8 (overlong forms such as `%c0%ae`) are refused too.
    private static func decode(_ segment: Substring.UTF8View) throws(ProxyError) -> String {
        guard let text = FormURLEncoding.percentDecode(segment, plusAsSpace: false) else {
            throw .invalidPath("characters that must be percent-encoded, or a bad percent-encoding")
        }
        // C0, DEL and C1 (U+0085 is a line break to some).
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
            throw .invalidPath("a control character")
        }
        let normalised = text.utf8.allSatisfy({ $0 < 0x80 }) ? text : text.precomposedStringWithCompatibilityMapping
        guard !isDotSegment(Substring(normalised)), !normalised.contains("/"), !normalised.contains("\\"), !normalised.contains(";")
        else {
            throw .invalidPath("a dot segment, an encoded slash or a path parameter")
        }
        // Anywhere in the segment, not only after its first `%` (`%%2f` is `%/` decoded again),
        // and in the normalised form too (`％２ｅ` is `%2e` to NFKC).
        guard !holdsEscape(text.utf8), !holdsEscape(normalised.utf8) else { throw .invalidPath("double percent-encoding") }
        return text
    }

    /// Whether decoding `text` once more would change it: a `%` followed by two hex digits, or by
    /// IIS's `u` and four.
    private static func holdsEscape(_ text: String.UTF8View) -> Bool {
        var rest = text[...]
        while let percent = rest.firstIndex(of: UInt8(ascii: "%")) {
            rest = rest[rest.index(after: percent)...]
            if rest.prefix(2).count == 2, rest.prefix(2).allSatisfy(isHexDigit) { return true }
            if rest.first.map({ $0 | 0x20 == UInt8(ascii: "u") }) == true, rest.dropFirst().prefix(4).count == 4,
                rest.dropFirst().prefix(4).allSatisfy(isHexDigit)
            {
                return true
            }
        }
        return false
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x66)
    }

    /// Whether a configured prefix (`/me`, `/users/`) covers the path, on segment boundaries:
    /// the path is the prefix or continues it after a `/`, compared in place. Each prefix is
    /// given without its trailing `/` (``bare(_:)``, made once per API).
    func isAllowed(byBare prefixes: [String]) -> Bool {
        prefixes.contains { bare in
            if bare.isEmpty { return true }
            let path = decodedPath.utf8
            guard path.starts(with: bare.utf8) else { return false }
            let next = path.index(path.startIndex, offsetBy: bare.utf8.count)
            return next == path.endIndex || path[next] == UInt8(ascii: "/")
        }
    }

    static func bare(_ prefix: String) -> String {
        prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
    }
}

/// The proxy's path check as a pure function (for the fuzz target in `Sources/Fuzz/ProxyPath`):
/// the path once decoded, or nil when `/api/{name}/<rest>` would be refused as `invalid_path`.
public enum ProxyPathCheck {
    public static func decodedPath(_ rest: String) -> String? {
        try? ProxyTarget(rest: rest).decodedPath
    }
}

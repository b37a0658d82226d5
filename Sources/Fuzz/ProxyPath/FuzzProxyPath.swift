import TGFuzzing
import TGProxy

/// The proxy's path check (`/api/{name}/<this>`): never crashes, and no path it accepts holds,
/// once decoded, a dot segment, an empty segment, a backslash, a `;`, a control character or
/// another escape (`%` and two hex digits, or `%u` and four, anywhere in a segment), nor a raw `#`.
func check(_ input: [UInt8]) {
    let rest = String(decoding: input, as: UTF8.self)
    guard let decoded = ProxyPathCheck.decodedPath(rest) else { return }
    let segments = decoded.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
    for (index, segment) in segments.enumerated() {
        precondition(segment != "." && segment != "..", "a dot segment passed: \(rest)")
        precondition(!segment.isEmpty || index == segments.count - 1, "an empty segment passed: \(rest)")
    }
    precondition(!decoded.contains("\\") && !decoded.contains(";"), "a backslash or ; passed: \(rest)")
    precondition(!decoded.utf8.contains { $0 < 0x20 || $0 == 0x7F }, "a control character passed")
    // A raw `#` would cut the URL libcurl sends; an encoded one (`%23`) is forwarded encoded.
    precondition(!rest.contains("#"), "a raw # passed: \(rest)")
    precondition(!holdsEscape(Array(decoded.utf8)), "another escape passed: \(rest)")
    precondition(ProxyPathCheck.decodedPath(rest) == decoded, "not deterministic")
}

/// Whether a second decoding would change `bytes`: `%` and two hex digits, or `%u` and four.
func holdsEscape(_ bytes: [UInt8]) -> Bool {
    func isHex(_ index: Int) -> Bool {
        index < bytes.count && (bytes[index] >= 0x30 && bytes[index] <= 0x39 || bytes[index] | 0x20 >= 0x61 && bytes[index] | 0x20 <= 0x66)
    }
    func isU(_ index: Int) -> Bool { index < bytes.count && bytes[index] | 0x20 == UInt8(ascii: "u") }
    return bytes.indices.contains { index in
        bytes[index] == UInt8(ascii: "%") && (isHex(index + 1) && isHex(index + 2) || isU(index + 1) && (2...5).allSatisfy { isHex(index + $0) })
    }
}

#if FUZZING
@_cdecl("tokengate_fuzz_proxy_path_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { Fuzzing.main(argc, argv, check) }
#else
@main struct Replay { static func main() { Fuzzing.replay("proxy-path", check) } }
#endif

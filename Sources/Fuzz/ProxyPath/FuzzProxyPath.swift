import TGApp
import TGFuzzing

/// The proxy's path check (`/api/{name}/<this>`): never crashes, and no path it accepts holds,
/// once decoded, a dot segment, an empty segment, a backslash, a `;`, a control character or
/// another escape.
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
    precondition(ProxyPathCheck.decodedPath(rest) == decoded, "not deterministic")
}

#if FUZZING
@_cdecl("tokengate_fuzz_proxy_path_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { Fuzzing.main(argc, argv, check) }
#else
@main struct Replay { static func main() { Fuzzing.replay("proxy-path", check) } }
#endif

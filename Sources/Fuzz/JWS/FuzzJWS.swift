import TGBase
import TGCrypto
import TGFuzzing
import TGOIDC

/// JWS compact serialization (ID tokens, client assertions) and the JSON of its parts: never
/// crashes; what parses has three parts and an algorithm.
func check(_ input: [UInt8]) {
    let text = String(decoding: input, as: UTF8.self)
    guard let jws = try? JWS(compactSerialization: text) else { return }
    precondition(text.split(separator: ".", omittingEmptySubsequences: false).count == 3, "not three parts")
    precondition(!jws.header.algorithm.isEmpty, "no algorithm")
    _ = JSONValue(parsing: jws.payload)
    _ = JSONValue(parsing: jws.header.json)
}

#if FUZZING
@_cdecl("tokengate_fuzz_jws_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { Fuzzing.main(argc, argv, check) }
#else
@main struct Replay { static func main() { Fuzzing.replay("jws", check) } }
#endif

import TGBase
import TGFuzzing

/// `application/x-www-form-urlencoded` decoding (token endpoint and callback bodies, every query
/// string): never crashes, and what it decodes encodes and decodes back to the same pairs.
func check(_ input: [UInt8]) {
    let text = String(decoding: input, as: UTF8.self)
    let pairs = FormURLEncoding.decode(text)
    let again = FormURLEncoding.decode(FormURLEncoding.encode(pairs))
    precondition(again.map(\.name) == pairs.map(\.name) && again.map(\.value) == pairs.map(\.value), "encode/decode round trip")
    if let strict = FormURLEncoding.decodeAll(text) {
        precondition(strict.map(\.name) == pairs.map(\.name) && strict.map(\.value) == pairs.map(\.value), "strict and lenient differ")
    }
    _ = FormURLEncoding.percentDecode(input, plusAsSpace: true)
}

#if FUZZING
@_cdecl("tokengate_fuzz_form_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { Fuzzing.main(argc, argv, check) }
#else
@main struct Replay { static func main() { Fuzzing.replay("form", check) } }
#endif

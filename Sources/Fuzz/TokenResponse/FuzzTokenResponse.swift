import Foundation
import TGFuzzing
import TGOIDC

/// A provider's token endpoint answer (JSON): never crashes; what is accepted has an access token
/// and lifetimes in the future of the time it was received.
func check(_ input: [UInt8]) {
    let received = Date(timeIntervalSince1970: 1_800_000_000)
    guard let response = try? TokenResponse(json: input, receivedAt: received) else { return }
    precondition(!response.accessToken.isEmpty, "an accepted answer without an access token")
    if let expiry = response.accessTokenExpiresAt { precondition(expiry >= received, "an access token that expired before it came") }
}

#if FUZZING
@_cdecl("tokengate_fuzz_token_response_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { Fuzzing.main(argc, argv, check) }
#else
@main struct Replay { static func main() { Fuzzing.replay("token-response", check) } }
#endif

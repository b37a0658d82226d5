import Crypto
import Foundation

/// Base64url without padding (RFC 7636 appendix A, RFC 7515 §2).
enum Base64URL {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func encode(_ text: String) -> String { encode(Array(text.utf8)) }
}

/// Random strings and the S256 challenge of a verifier (RFC 7636).
enum PKCE {
    /// 32 random bytes, base64url: 43 characters, as RFC 7636 §4.1 recommends.
    static func makeVerifier() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    static func challenge(for verifier: String) -> String {
        Base64URL.encode(SHA256.hash(data: Data(verifier.utf8)))
    }

    /// The base64url SHA-256 of `text` (a DPoP proof's `ath`).
    static func hash(_ text: String) -> String { challenge(for: text) }
}

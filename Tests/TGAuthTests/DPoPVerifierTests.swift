import Foundation
import TGAuth
import TGCrypto
import TGTesting
import Testing

/// Every rule of a DPoP proof (RFC 9449 §4.3), each broken once.
@Suite struct DPoPVerifierTests {
    static let url = "https://gw.example/api/graph/me"
    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
    let key: DPoPKey

    init() throws { key = try DPoPKey() }

    func verifier(_ change: (inout DPoPSettings) -> Void = { _ in }) throws -> DPoPVerifier {
        var settings = DPoPSettings()
        change(&settings)
        let ring = try KeyRing(currentKeyID: "k1", keys: ["k1": try SymmetricKey(bytes: Array(repeating: 7, count: 32))])
        return DPoPVerifier(settings: settings, vault: TokenVault(keyRing: ring), clock: clock.wallClock)
    }

    func target(_ method: String = "GET", _ url: String = url, token: String? = "access-token") -> DPoPTarget {
        DPoPTarget(method: method, uri: url, accessToken: token.map { $0[...] })
    }

    func proof(_ method: String = "GET", _ url: String = url, token: String? = "access-token", at offset: TimeInterval = 0) throws -> String {
        try key.proof(method, url, accessToken: token, issuedAt: clock.now.addingTimeInterval(offset))
    }

    func refusal(_ verifier: DPoPVerifier, _ proof: String, _ target: DPoPTarget) -> DPoPError? {
        do {
            _ = try verifier.verify(proof, for: target)
            return nil
        } catch {
            return error
        }
    }

    @Test func aValidProofGivesItsKeysThumbprintOnceOnly() throws {
        let verifier = try verifier()
        let proof = try proof()
        #expect(try verifier.verify(proof, for: target()) == key.thumbprint)
        #expect(refusal(verifier, proof, target())?.description.contains("used before") == true)
        // The same jti from another key is another proof.
        let other = try DPoPKey()
        let jti = "same-jti"
        let first = try key.proof("GET", Self.url, accessToken: "access-token", issuedAt: clock.now, jti: jti)
        let second = try other.proof("GET", Self.url, accessToken: "access-token", issuedAt: clock.now, jti: jti)
        #expect(try verifier.verify(first, for: target()) == key.thumbprint)
        #expect(try verifier.verify(second, for: target()) == other.thumbprint)
    }

    @Test(arguments: [JWSAlgorithm.es256, .es384, .edDSA, .ps256, .rs256])
    func eachAllowedAlgorithmVerifies(algorithm: JWSAlgorithm) throws {
        let key = try DPoPKey(algorithm)
        let proof = try key.proof("POST", "https://gw.example/auth/token", issuedAt: clock.now)
        #expect(try verifier().verify(proof, for: target("POST", "https://gw.example/auth/token", token: nil)) == key.thumbprint)
    }

    @Test func theHeaderMustBeADPoPJWTOfAnAllowedAlgorithmWithAPublicKeyThatSignedIt() throws {
        let verifier = try verifier { $0.algorithms = [.es256] }
        let claims: [String: Any] = ["jti": "j", "htm": "GET", "htu": Self.url, "iat": Int(clock.now.timeIntervalSince1970)]
        // typ
        #expect(refusal(verifier, try key.signed(claims, type: "JWT"), target(token: nil))?.description.contains("typ") == true)
        #expect(refusal(verifier, try key.signed(claims, type: nil), target(token: nil))?.description.contains("typ") == true)
        // alg outside the allowlist (an RSA key), and none or HS256, which cannot even be expressed
        let rsa = try DPoPKey(.rs256)
        #expect(refusal(verifier, try rsa.signed(claims), target(token: nil))?.description.contains("alg") == true)
        for alg in ["none", "HS256"] {
            let header = Base64URL.encode(Array(#"{"alg":"\#(alg)","typ":"dpop+jwt"}"#.utf8))
            let body = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
            #expect(refusal(verifier, "\(header).\(body).\(Base64URL.encode([1, 2, 3]))", target(token: nil))?.code == .invalidProof)
        }
        // a jwk with the private key in it
        var privateJWK = try #require(try JSONSerialization.jsonObject(with: Data(key.jwk.json())) as? [String: Any])
        privateJWK["d"] = Base64URL.encode(Array(repeating: 1, count: 32))
        let header = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: ["alg": "ES256", "typ": "dpop+jwt", "jwk": privateJWK])))
        let body = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
        #expect(
            refusal(verifier, "\(header).\(body).\(Base64URL.encode(Array(repeating: 1, count: 64)))", target(token: nil))?
                .description.contains("public key only") == true
        )
        // signed by another key than the jwk it carries
        let other = try DPoPKey()
        #expect(refusal(verifier, try other.signed(claims, jwk: key.jwk), target(token: nil))?.description.contains("signature") == true)
        // no jwk, or not a JWS at all
        #expect(refusal(verifier, "not.a.jws", target(token: nil))?.code == .invalidProof)
        #expect(refusal(verifier, String(repeating: "a", count: 9000), target(token: nil))?.code == .invalidProof)
    }

    @Test func aHeaderSeenBeforeStillNeedsItsKeysSignature() throws {
        let verifier = try verifier()
        #expect(try verifier.verify(try proof(), for: target()) == key.thumbprint)
        // The same header (this key's jwk), signed by another key: the kept header does not vouch for it.
        let claims: [String: Any] = [
            "jti": "forged", "htm": "GET", "htu": Self.url, "iat": Int(clock.now.timeIntervalSince1970),
            "ath": Base64URL.encode(Digest.sha256(utf8: "access-token")),
        ]
        let forged = try DPoPKey().signed(claims, jwk: key.jwk)
        #expect(refusal(verifier, forged, target())?.description.contains("signature") == true)
        #expect(try verifier.verify(try proof(), for: target()) == key.thumbprint)
    }

    @Test func theProofMustNameThisRequestsMethodAndURL() throws {
        let verifier = try verifier()
        #expect(refusal(verifier, try proof("POST"), target())?.description.contains("htm") == true)
        for other in ["https://evil.example/api/graph/me", "https://gw.example/api/graph/you", "http://gw.example/api/graph/me"] {
            #expect(refusal(verifier, try proof("GET", other), target())?.description.contains("htu") == true)
        }
        // Normalised: case of scheme and host, the default port, escapes of unreserved characters,
        // and the query and fragment, which htu leaves out.
        for same in ["HTTPS://GW.example:443/api/graph/me", "https://gw.example/api/%67raph/me", "https://gw.example/api/graph/me?x=1#f"] {
            #expect(try verifier.verify(try proof("GET", same), for: target()) == key.thumbprint)
        }
        #expect(try verifier.verify(try proof("GET", Self.url), for: target("GET", Self.url + "?$top=5")) == key.thumbprint)
    }

    @Test func theProofMustBeFreshAndCarryTheAccessTokensHash() throws {
        let verifier = try verifier { $0.proofMaxAge = 60 }
        #expect(refusal(verifier, try proof(at: -61), target())?.description.contains("iat") == true)
        #expect(refusal(verifier, try proof(at: 6), target())?.description.contains("iat") == true)
        #expect(try verifier.verify(try proof(at: -59), for: target()) == key.thumbprint)
        #expect(refusal(verifier, try proof(token: nil), target())?.description.contains("ath") == true)
        #expect(refusal(verifier, try proof(token: "another-token"), target())?.description.contains("ath") == true)
        let missing = try key.signed(["htm": "GET", "htu": Self.url, "iat": Int(clock.now.timeIntervalSince1970)])
        #expect(refusal(verifier, missing, target(token: nil))?.description.contains("jti") == true)
    }

    @Test func withNoncesOnAProofNeedsACurrentNonceWhichEveryInstanceAccepts() throws {
        let verifier = try verifier {
            $0.requireNonce = true
            $0.nonceLifetime = 300
        }
        let asked = refusal(verifier, try proof(), target())
        #expect(asked?.code == .useNonce)
        let nonce = try #require(asked?.nonce)
        #expect(nonce == verifier.currentNonce())
        let withNonce = try key.proof("GET", Self.url, accessToken: "access-token", nonce: nonce, issuedAt: clock.now)
        // Another instance (its own verifier, the same keys) accepts it.
        #expect(try self.verifier { $0.requireNonce = true }.verify(withNonce, for: target()) == key.thumbprint)
        let forged = try key.proof("GET", Self.url, accessToken: "access-token", nonce: "forged", issuedAt: clock.now)
        #expect(refusal(verifier, forged, target())?.code == .useNonce)
        // A nonce is good for its period and the next, not after.
        clock.advance(by: 600)
        let stale = try key.proof("GET", Self.url, accessToken: "access-token", nonce: nonce, issuedAt: clock.now)
        #expect(refusal(verifier, stale, target())?.code == .useNonce)
    }

    @Test func aFullReplayCacheRefusesNewProofsAndEmptiesAsProofsAge() throws {
        let verifier = try verifier {
            $0.replayCapacity = 2
            $0.proofMaxAge = 60
        }
        _ = try verifier.verify(try proof(), for: target())
        _ = try verifier.verify(try proof(), for: target())
        #expect(refusal(verifier, try proof(), target())?.description.contains("too many") == true)
        clock.advance(by: 2 * 65)
        #expect(try verifier.verify(try proof(), for: target()) == key.thumbprint)
    }
}

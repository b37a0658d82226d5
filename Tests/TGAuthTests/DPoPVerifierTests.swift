import Foundation
import TGCrypto
import TGTesting
import Testing

@testable import TGAuth

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

    /// The header part a proof's checked header is remembered under: up to the first `.`, or the
    /// whole text without one, by bytes (a multi-byte character before the dot included).
    @Test func theHeaderPartEndsAtTheFirstDotOrTheEnd() {
        #expect(DPoPVerifier.headerPart(of: "eyJh.eyJi.c2ln") == "eyJh")
        #expect(DPoPVerifier.headerPart(of: "no-dot-at-all") == "no-dot-at-all")
        #expect(DPoPVerifier.headerPart(of: ".payload.sig") == "")
        #expect(DPoPVerifier.headerPart(of: "") == "")
        #expect(DPoPVerifier.headerPart(of: "é€.x") == "é€")
        let long = String(repeating: "A", count: 5000) + "." + String(repeating: "B", count: 100)
        #expect(DPoPVerifier.headerPart(of: long).utf8.count == 5000)
    }

    @Test func aValidProofGivesItsKeysThumbprintAndIsNotRecordedByVerifying() throws {
        let verifier = try verifier()
        let proof = try proof()
        #expect(try verifier.verify(proof, for: target()).jkt == key.thumbprint)
        // Verifying records nothing: the caller records the proof once the request is authentic
        // (DPoPReplayTests).
        #expect(try verifier.verify(proof, for: target()).jkt == key.thumbprint)
        // The same jti from another key is another proof.
        let other = try DPoPKey()
        let jti = "same-jti"
        let first = try verifier.verify(try key.proof("GET", Self.url, accessToken: "access-token", issuedAt: clock.now, jti: jti), for: target())
        let second = try verifier.verify(try other.proof("GET", Self.url, accessToken: "access-token", issuedAt: clock.now, jti: jti), for: target())
        #expect(first.jkt == key.thumbprint && second.jkt == other.thumbprint && first.replayKey != second.replayKey)
    }

    @Test(arguments: [JWSAlgorithm.es256, .es384, .edDSA, .ps256, .rs256])
    func eachAllowedAlgorithmVerifies(algorithm: JWSAlgorithm) throws {
        let key = try DPoPKey(algorithm)
        let proof = try key.proof("POST", "https://gw.example/auth/token", issuedAt: clock.now)
        #expect(try verifier().verify(proof, for: target("POST", "https://gw.example/auth/token", token: nil)).jkt == key.thumbprint)
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
        #expect(try verifier.verify(try proof(), for: target()).jkt == key.thumbprint)
        // The same header (this key's jwk), signed by another key: the kept header does not vouch for it.
        let claims: [String: Any] = [
            "jti": "forged", "htm": "GET", "htu": Self.url, "iat": Int(clock.now.timeIntervalSince1970),
            "ath": Base64URL.encode(Digest.sha256(utf8: "access-token")),
        ]
        let forged = try DPoPKey().signed(claims, jwk: key.jwk)
        #expect(refusal(verifier, forged, target())?.description.contains("signature") == true)
        #expect(try verifier.verify(try proof(), for: target()).jkt == key.thumbprint)
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
            #expect(try verifier.verify(try proof("GET", same), for: target()).jkt == key.thumbprint)
        }
        #expect(try verifier.verify(try proof("GET", Self.url), for: target("GET", Self.url + "?$top=5")).jkt == key.thumbprint)
    }

    @Test func theProofMustBeFreshAndCarryTheAccessTokensHash() throws {
        let verifier = try verifier { $0.proofMaxAge = 60 }
        #expect(refusal(verifier, try proof(at: -61), target())?.description.contains("iat") == true)
        #expect(refusal(verifier, try proof(at: 6), target())?.description.contains("iat") == true)
        #expect(try verifier.verify(try proof(at: -59), for: target()).jkt == key.thumbprint)
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
        #expect(try self.verifier { $0.requireNonce = true }.verify(withNonce, for: target()).jkt == key.thumbprint)
        let forged = try key.proof("GET", Self.url, accessToken: "access-token", nonce: "forged", issuedAt: clock.now)
        #expect(refusal(verifier, forged, target())?.code == .useNonce)
        // A nonce is good for its period and the next, not after.
        clock.advance(by: 600)
        let stale = try key.proof("GET", Self.url, accessToken: "access-token", nonce: nonce, issuedAt: clock.now)
        #expect(refusal(verifier, stale, target())?.code == .useNonce)
    }

    @Test func theReplayMemoryKeepsRoomForOtherKeysAndEmptiesAsProofsAge() throws {
        let cache = DPoPReplayCache(window: 65, capacity: 8)
        func insert(_ jkt: String, _ jti: String) -> DPoPReplayCache.Insertion {
            cache.insert(DPoPReplayCache.Key(jkt: jkt, jti: jti), jkt: jkt, now: clock.now)
        }
        // One key holds at most a quarter: a flood of its proofs leaves the others room.
        #expect(insert("flood", "1") == .fresh && insert("flood", "2") == .fresh)
        #expect(insert("flood", "3") == .full)
        #expect(insert("flood", "1") == .replayed)
        for index in 0..<6 { #expect(insert("key-\(index % 3)", "\(index)") == .fresh) }
        #expect(insert("key-9", "x") == .full)
        clock.advance(by: 2 * 65)
        #expect(insert("flood", "1") == .fresh)
    }

    /// A proof whose header carries `jwk` and is signed with garbage: what the key check refuses
    /// needs no signature check.
    func unsignedProof(jwk: [String: String], algorithm: String = "RS256") throws -> String {
        let claims: [String: Any] = ["jti": UUID().uuidString, "htm": "GET", "htu": Self.url, "iat": Int(clock.now.timeIntervalSince1970)]
        let header = Base64URL.encode(
            Array(try JSONSerialization.data(withJSONObject: ["alg": algorithm, "typ": "dpop+jwt", "jwk": jwk] as [String: Any]))
        )
        let body = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
        return "\(header).\(body).\(Base64URL.encode(Array(repeating: 1, count: 512)))"
    }

    @Test func anRSAKeyOutsideSaneBoundsIsRefusedWithoutASignatureCheck() throws {
        let verifier = try verifier()
        let rsa = try DPoPKey(.rs256)
        let modulus = try #require(rsa.jwk.modulus)
        let refused: [(String, [String: String])] = [
            ("a 16384-bit modulus", ["kty": "RSA", "n": Base64URL.encode([0x80] + Array(repeating: 1, count: 2047)), "e": "AQAB"]),
            ("a 4097-bit modulus", ["kty": "RSA", "n": Base64URL.encode([0x01] + Array(repeating: 1, count: 512)), "e": "AQAB"]),
            ("a 1024-bit modulus", ["kty": "RSA", "n": Base64URL.encode([0x80] + Array(repeating: 1, count: 127)), "e": "AQAB"]),
            ("a 2048-byte exponent", ["kty": "RSA", "n": modulus, "e": Base64URL.encode([0x80] + Array(repeating: 1, count: 2047))]),
            ("an exponent of 2^32 + 1", ["kty": "RSA", "n": modulus, "e": Base64URL.encode([1, 0, 0, 0, 1])]),
            ("an even exponent", ["kty": "RSA", "n": modulus, "e": Base64URL.encode([1, 0, 0])]),
            ("an exponent of 1", ["kty": "RSA", "n": modulus, "e": Base64URL.encode([1])]),
        ]
        for (what, jwk) in refused {
            let refusal = refusal(verifier, try unsignedProof(jwk: jwk), target(token: nil))
            #expect(refusal?.description.contains("2048 to 4096 bits") == true, "\(what): \(String(describing: refusal))")
        }
        #expect(verifier.signatureChecks == 0)
        // A 2048-bit key with 65537 (and with 3) is within them: its signature is checked.
        #expect(
            try verifier.verify(try rsa.proof("GET", Self.url, accessToken: "access-token", issuedAt: clock.now), for: target()).jkt == rsa.thumbprint
        )
        #expect(
            refusal(verifier, try unsignedProof(jwk: ["kty": "RSA", "n": modulus, "e": "Aw"]), target(token: nil))?.description.contains("signature")
                == true
        )
        #expect(verifier.signatureChecks == 2)
    }

    @Test func aProofOfAnotherKeyThanTheBoundOneIsRefusedWithoutASignatureCheck() throws {
        let verifier = try verifier()
        let other = try DPoPKey()
        var refusal: DPoPError?
        do {
            _ = try verifier.verify(
                try other.proof("GET", Self.url, accessToken: "access-token", issuedAt: clock.now),
                for: target(),
                boundTo: key.thumbprint
            )
        } catch let error as DPoPError { refusal = error }
        #expect(refusal?.description.contains("another key") == true)
        #expect(verifier.signatureChecks == 0)
        // So is one whose header was checked before (its key known), and one for another URL.
        #expect(
            try verifier.verify(try other.proof("GET", Self.url, accessToken: "access-token", issuedAt: clock.now), for: target()).jkt
                == other.thumbprint
        )
        #expect(verifier.signatureChecks == 1)
        #expect(throws: DPoPError.self) {
            try verifier.verify(
                try other.proof("GET", Self.url, accessToken: "access-token", issuedAt: clock.now),
                for: target(),
                boundTo: key.thumbprint
            )
        }
        #expect(throws: DPoPError.self) {
            try verifier.verify(
                try key.proof("GET", Self.url + "x", accessToken: "access-token", issuedAt: clock.now),
                for: target(),
                boundTo: key.thumbprint
            )
        }
        #expect(verifier.signatureChecks == 1)
        #expect(try verifier.verify(try proof(), for: target(), boundTo: key.thumbprint).jkt == key.thumbprint)
        #expect(verifier.signatureChecks == 2)
    }
}

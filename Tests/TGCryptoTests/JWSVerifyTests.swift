import TGCrypto
import Testing

struct JWSVerifyTests {
    @Test func verifiesRFC7515RS256Example() throws {
        let jws = try JWS(compactSerialization: RFCExamples.rs256JWS)
        #expect(jws.header.algorithm == "RS256")
        #expect(jws.algorithm == .rs256)
        #expect(jws.header.keyID == nil)
        #expect(jws.payload == utf8(RFCExamples.payload))
        #expect(Array(jws.signature.prefix(15)) == RFCExamples.rs256SignaturePrefix)
        #expect(jws.signature.count == 256)
        try jws.verify(using: .fromRFC7515RSAExample())
    }

    @Test func verifiesRFC7515ES256Example() throws {
        let jws = try JWS(compactSerialization: RFCExamples.es256JWS)
        #expect(jws.algorithm == .es256)
        #expect(jws.payload == utf8(RFCExamples.payload))
        #expect(jws.signature == RFCExamples.es256R + RFCExamples.es256S)
        try jws.verify(using: .fromRFC7515ECExample())
    }

    @Test func modifiedPayloadOrSignatureIsInvalid() throws {
        let parts = RFCExamples.rs256JWS.split(separator: ".").map(String.init)
        let otherPayload = Base64URL.encode(utf8(RFCExamples.payload.uppercased()))
        let swapped = try JWS(compactSerialization: [parts[0], otherPayload, parts[2]].joined(separator: "."))
        #expect(throws: CryptoError.invalidSignature) { try swapped.verify(using: .fromRFC7515RSAExample()) }

        var signature = try Base64URL.decode(parts[2])
        signature[100] ^= 0x04
        let flipped = try JWS(compactSerialization: [parts[0], parts[1], Base64URL.encode(signature)].joined(separator: "."))
        #expect(throws: CryptoError.invalidSignature) { try flipped.verify(using: .fromRFC7515RSAExample()) }

        let ecParts = RFCExamples.es256JWS.split(separator: ".").map(String.init)
        var ecSignature = try Base64URL.decode(ecParts[2])
        ecSignature[40] ^= 0x01
        let ecFlipped = try JWS(compactSerialization: [ecParts[0], ecParts[1], Base64URL.encode(ecSignature)].joined(separator: "."))
        #expect(throws: CryptoError.invalidSignature) { try ecFlipped.verify(using: .fromRFC7515ECExample()) }
        let ecShort = try JWS(compactSerialization: [ecParts[0], ecParts[1], Base64URL.encode(Array(ecSignature.dropLast()))].joined(separator: "."))
        #expect(throws: CryptoError.invalidSignature) { try ecShort.verify(using: .fromRFC7515ECExample()) }
    }

    @Test func refusesAlgNone() throws {
        let payload = RFCExamples.rs256JWS.split(separator: ".")[1]
        let unsecured = Base64URL.encode(utf8("{\"alg\":\"none\"}")) + "." + payload + "."
        let jws = try JWS(compactSerialization: unsecured)
        #expect(jws.algorithm == nil)
        #expect(throws: CryptoError.unsupportedAlgorithm) { try jws.verify(using: .fromRFC7515RSAExample()) }
    }

    @Test func refusesHS256SignedWithThePublicKeyAsHMACSecret() throws {
        // The classic confusion: an attacker HMACs with the public key bytes a verifier holds.
        let key = PublicKey.fromRFC7515RSAExample()
        for secret in [key.jwk().json(), try Base64URL.decode(RFCExamples.rs256Key.n)] {
            let signingInput = Base64URL.encode(utf8("{\"alg\":\"HS256\",\"typ\":\"JWT\"}")) + "." + Base64URL.encode(utf8("{\"sub\":\"admin\"}"))
            let mac = Digest.hmacSHA256(key: secret, message: utf8(signingInput))
            let jws = try JWS(compactSerialization: signingInput + "." + Base64URL.encode(mac))
            #expect(jws.header.type == "JWT")
            #expect(throws: CryptoError.unsupportedAlgorithm) { try jws.verify(using: key) }
        }
    }

    @Test func refusesAlgorithmOutsideCallersAllowlist() throws {
        let jws = try JWS(compactSerialization: RFCExamples.rs256JWS)
        #expect(throws: CryptoError.unsupportedAlgorithm) { try jws.verify(using: .fromRFC7515RSAExample(), allowedAlgorithms: [.es256]) }
        try jws.verify(using: .fromRFC7515RSAExample(), allowedAlgorithms: [.rs256])
    }

    @Test func refusesAlgorithmDifferentFromKeysOwnAlg() throws {
        let jws = try JWS(compactSerialization: RFCExamples.rs256JWS)
        #expect(throws: CryptoError.unsupportedAlgorithm) { try jws.verify(using: .fromRFC7515RSAExample(algorithm: "PS256")) }
        try jws.verify(using: .fromRFC7515RSAExample(algorithm: "RS256"))
    }

    @Test func refusesES256SignatureCheckedWithP384Key() throws {
        let jws = try JWS(compactSerialization: RFCExamples.es256JWS)
        let p384 = try PrivateKey.generate(.ec(.p384)).publicKey
        #expect(throws: CryptoError.invalidKey) { try jws.verify(using: p384) }
    }

    @Test func refusesKeyOfTheWrongTypeForTheAlgorithm() throws {
        let rsaJWS = try JWS(compactSerialization: RFCExamples.rs256JWS)
        #expect(throws: CryptoError.invalidKey) { try rsaJWS.verify(using: .fromRFC7515ECExample()) }
        let ecJWS = try JWS(compactSerialization: RFCExamples.es256JWS)
        #expect(throws: CryptoError.invalidKey) { try ecJWS.verify(using: .fromRFC7515RSAExample()) }
        // The same ES256 signature relabelled ES384 must not verify with the P-256 key.
        let parts = RFCExamples.es256JWS.split(separator: ".").map(String.init)
        let relabelled = try JWS(
            compactSerialization: [Base64URL.encode(utf8("{\"alg\":\"ES384\"}")), parts[1], parts[2]].joined(separator: ".")
        )
        #expect(throws: CryptoError.invalidKey) { try relabelled.verify(using: .fromRFC7515ECExample()) }
    }

    @Test func refusesRSAKeysUnder2048Bits() throws {
        let smallKeyJWK = JWK(keyType: "RSA", modulus: Base64URL.encode([0xC5] + SecureRandom.bytes(127)), exponent: "AQAB")
        let small = try PublicKey(jwk: smallKeyJWK)
        #expect(small.keyType == .rsa(modulusBits: 1024))
        let jws = try JWS(compactSerialization: RFCExamples.rs256JWS)
        #expect(throws: CryptoError.invalidKey) { try jws.verify(using: small) }
    }

    @Test(arguments: [
        "", ".", "..", "...", "a.b", "a.b.c.d", "eyJhbGciOiJSUzI1NiJ9.e30", ".e30.AA",
        "eyJhbGciOiJSUzI1NiJ9=.e30.AA", "eyJhbGciOiJSUzI1NiJ9.e30=.AA", "eyJhbGciOiJSUzI1NiJ9.e30.A+A",
        "eyJhbGciOiJSUzI1NiJ9.e30.AA.eyJ.AA",
    ])
    func refusesMalformedCompactSerialization(text: String) {
        #expect(throws: CryptoError.malformed) { try JWS(compactSerialization: text) }
    }

    @Test(arguments: [
        "not json", "[]", "{}", "{\"alg\":256}", "{\"alg\":null}", "{\"alg\": \"\"}", "{\"alg\":\"RS256\",\"kid\":1}",
        "{\"alg\":\"RS256\",\"typ\":[]}", "{\"alg\":\"RS256\",\"crit\":[\"b64\"],\"b64\":false}",
    ])
    func refusesHeadersThatAreNotUsableJSONObjects(header: String) {
        let text = Base64URL.encode(utf8(header)) + ".e30.AA"
        #expect(throws: CryptoError.malformed) { try JWS(compactSerialization: text) }
    }

    @Test func garbageSignatureBytesThrowInsteadOfCrashing() throws {
        let header = Base64URL.encode(utf8("{\"alg\":\"ES256\"}"))
        for signature in [[], [0], [UInt8](repeating: 0, count: 64), [UInt8](repeating: 0xFF, count: 64)] {
            let jws = try JWS(compactSerialization: header + ".e30." + Base64URL.encode(signature))
            #expect(throws: CryptoError.invalidSignature) { try jws.verify(using: .fromRFC7515ECExample()) }
        }
        let rsaHeader = Base64URL.encode(utf8("{\"alg\":\"RS256\"}"))
        for signature in [[], [1], [UInt8](repeating: 0xFF, count: 256), [UInt8](repeating: 0, count: 512)] {
            let jws = try JWS(compactSerialization: rsaHeader + ".e30." + Base64URL.encode(signature))
            #expect(throws: CryptoError.invalidSignature) { try jws.verify(using: .fromRFC7515RSAExample()) }
        }
    }
}

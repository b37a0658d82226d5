import TGCrypto
import Testing

struct JWKTests {
    @Test func parsesJWKSetKeepingKeyIDTypeAlgorithmAndUse() throws {
        let json = """
            {"keys":[
              {"kty":"RSA","kid":"rsa-1","alg":"RS256","use":"sig","n":"\(RFCExamples.rs256Key.n)","e":"AQAB","x5c":["MIIB"]},
              {"kty":"EC","kid":"ec-1","crv":"P-256","x":"\(RFCExamples.es256X)","y":"\(RFCExamples.es256Y)"},
              {"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"ed"},
              {"kid":"no-kty"}, 42
            ]}
            """
        let set = try JWKSet(json: utf8(json))
        #expect(set.keys.map(\.keyID) == ["rsa-1", "ec-1", "ed"])
        let rsa = try #require(set.keys(withID: "rsa-1").first)
        #expect(rsa.keyType == "RSA")
        #expect(rsa.algorithm == "RS256")
        #expect(rsa.use == "sig")
        #expect(try PublicKey(jwk: rsa).keyType == .rsa(modulusBits: 2048))
        #expect(try PublicKey(jwk: set.keys[1]).keyType == .ec(.p256))
        #expect(try PublicKey(jwk: set.keys[2]).keyType == .ed25519)
    }

    @Test func refusesDocumentsThatAreNotJWKSets() {
        for json in ["", "[]", "{}", "{\"keys\":{}}", "not json", "{\"keys\":[}"] {
            #expect(throws: CryptoError.malformed) { try JWKSet(json: utf8(json)) }
        }
        #expect(throws: CryptoError.malformed) { try JWK(json: utf8("{\"kty\":\"RSA\",\"kid\":7}")) }
        #expect(throws: CryptoError.malformed) { try JWK(json: utf8("{\"n\":\"AQAB\"}")) }
    }

    @Test func thumbprintMatchesRFC7638Example() throws {
        let jwk = JWK(keyType: "RSA", keyID: "2011-04-29", algorithm: "RS256", modulus: RFCExamples.thumbprintKeyN, exponent: "AQAB")
        #expect(try jwk.thumbprint() == RFCExamples.thumbprint)
        #expect(throws: CryptoError.unsupportedAlgorithm) { try JWK(keyType: "oct").thumbprint() }
        #expect(throws: CryptoError.malformed) { try JWK(keyType: "EC", curve: "P-256").thumbprint() }
    }

    @Test func exportedPublicJWKReloadsToTheSameKey() throws {
        let rsa = PublicKey.fromRFC7515RSAExample()
        let exported = rsa.jwk(keyID: "k1", algorithm: "RS256")
        #expect(exported.modulus == RFCExamples.rs256Key.n)
        #expect(exported.exponent == "AQAB")
        let reloaded = try JWK(json: exported.json())
        #expect(reloaded == exported)
        #expect(try PublicKey(jwk: reloaded).jwk(keyID: "k1") == exported)

        let ec = try PublicKey(jwk: JWK(keyType: "EC", curve: "P-256", x: RFCExamples.es256X, y: RFCExamples.es256Y))
        #expect(ec.jwk().x == RFCExamples.es256X)
        #expect(ec.jwk().y == RFCExamples.es256Y)
        #expect(try Base64URL.decode(RFCExamples.es256X) == RFCExamples.es256XOctets)
    }

    @Test func jwkSetSerializesForAJWKSEndpoint() throws {
        let key = try PrivateKey.generate(.ec(.p256))
        let set = JWKSet(keys: [key.publicJWK(keyID: "idp-1", algorithm: "ES256")])
        let parsed = try JWKSet(json: set.json())
        #expect(parsed == set)
        #expect(!String(decoding: set.json(), as: UTF8.self).contains("\"d\""))
    }

    @Test func refusesBrokenKeyMaterial() throws {
        let n = RFCExamples.rs256Key.n
        let leadingZeroN = Base64URL.encode([0] + (try Base64URL.decode(n)))
        let x = RFCExamples.es256X
        let y = RFCExamples.es256Y
        // y of another point: (x, y') is not on P-256.
        var badY = Array(y)
        badY[10] = badY[10] == "A" ? "B" : "A"
        let cases: [(JWK, CryptoError)] = [
            (JWK(keyType: "RSA", exponent: "AQAB"), .invalidKey),
            (JWK(keyType: "RSA", modulus: n + "=", exponent: "AQAB"), .invalidKey),
            (JWK(keyType: "RSA", modulus: leadingZeroN, exponent: "AQAB"), .invalidKey),
            (JWK(keyType: "RSA", modulus: "", exponent: ""), .invalidKey),
            (JWK(keyType: "RSA", use: "enc", modulus: n, exponent: "AQAB"), .invalidKey),
            (JWK(keyType: "EC", curve: "P-256", x: x, y: String(badY)), .invalidKey),
            (JWK(keyType: "EC", curve: "P-256", x: x, y: String(y.dropLast(2))), .invalidKey),
            (JWK(keyType: "EC", curve: "P-384", x: x, y: y), .invalidKey),
            (JWK(keyType: "EC", curve: "P-521", x: x, y: y), .unsupportedAlgorithm),
            (JWK(keyType: "EC", x: x, y: y), .invalidKey),
            (JWK(keyType: "oct"), .unsupportedAlgorithm),
            (JWK(keyType: ""), .unsupportedAlgorithm),
        ]
        for (jwk, error) in cases {
            #expect(throws: error) { try PublicKey(jwk: jwk) }
        }
    }
}

extension PublicKey {
    static func fromRFC7515RSAExample(algorithm: String? = nil) -> PublicKey {
        try! PublicKey(jwk: JWK(keyType: "RSA", algorithm: algorithm, modulus: RFCExamples.rs256Key.n, exponent: RFCExamples.rs256Key.e))
    }

    static func fromRFC7515ECExample() -> PublicKey {
        try! PublicKey(jwk: JWK(keyType: "EC", curve: "P-256", x: RFCExamples.es256X, y: RFCExamples.es256Y))
    }
}

import TGCrypto
import Testing

/// RFC 8037 Appendix A: the Ed25519 key (A.1, A.2), its thumbprint (A.3), a signature (A.4)
/// and its verification (A.5). Ed25519 is deterministic, so signing must give these exact bytes.
enum RFC8037 {
    static let seed = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
    static let x = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
    static let thumbprint = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
    static let payload = "Example of Ed25519 signing"
    static let jws =
        "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc"
        + ".hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
    static var publicJWK: JWK { JWK(keyType: "OKP", curve: "Ed25519", x: x) }
}

struct EdDSATests {
    @Test func rfc8037PublicKeyAndThumbprint() throws {
        let key = try PrivateKey(ed25519Seed: Base64URL.decode(RFC8037.seed))
        #expect(key.keyType == .ed25519)
        #expect(key.publicJWK(use: nil) == RFC8037.publicJWK)
        #expect(try RFC8037.publicJWK.thumbprint() == RFC8037.thumbprint)
        #expect(try PublicKey(jwk: RFC8037.publicJWK).keyType == .ed25519)
    }

    @Test func signsTheRFC8037ExampleToTheExactSignature() throws {
        let key = try PrivateKey(ed25519Seed: Base64URL.decode(RFC8037.seed))
        let jws = try JWS.sign(payload: Array(RFC8037.payload.utf8), algorithm: .edDSA, type: nil, using: key)
        #expect(jws == RFC8037.jws)
    }

    @Test func verifiesTheRFC8037ExampleAndRefusesAnyChange() throws {
        let key = try PublicKey(jwk: RFC8037.publicJWK)
        try JWS(compactSerialization: RFC8037.jws).verify(using: key)
        var parts = RFC8037.jws.split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array("Example of Ed25519 signinG".utf8))
        #expect(throws: CryptoError.invalidSignature) {
            try JWS(compactSerialization: parts.joined(separator: ".")).verify(using: key)
        }
        var signature = try Base64URL.decode(RFC8037.jws.split(separator: ".")[2])
        signature[10] ^= 0x01
        let flipped = RFC8037.jws.split(separator: ".").prefix(2).joined(separator: ".") + "." + Base64URL.encode(signature)
        #expect(throws: CryptoError.invalidSignature) { try JWS(compactSerialization: flipped).verify(using: key) }
    }

    @Test func refusesEdDSAWithOtherKeysAndOtherAlgorithmsWithEd25519Keys() throws {
        let edKey = try PublicKey(jwk: RFC8037.publicJWK)
        let ecKey = try PrivateKey.generate(.ec(.p256))
        let es256 = try JWS.sign(payload: [1, 2, 3], algorithm: .es256, using: ecKey)
        #expect(throws: CryptoError.invalidKey) { try JWS(compactSerialization: es256).verify(using: edKey) }
        #expect(throws: CryptoError.invalidKey) { try JWS(compactSerialization: RFC8037.jws).verify(using: ecKey.publicKey) }
        let edPrivate = try PrivateKey(ed25519Seed: Base64URL.decode(RFC8037.seed))
        #expect(throws: CryptoError.invalidKey) { try JWS.sign(payload: [1], algorithm: .es256, using: edPrivate) }
        #expect(throws: CryptoError.unsupportedAlgorithm) {
            try JWS(compactSerialization: RFC8037.jws).verify(using: edKey, allowedAlgorithms: [.rs256, .es256])
        }
    }

    @Test func refusesMalformedOKPKeys() throws {
        #expect(throws: CryptoError.unsupportedAlgorithm) { try PublicKey(jwk: JWK(keyType: "OKP", curve: "Ed448", x: RFC8037.x)) }
        #expect(throws: CryptoError.unsupportedAlgorithm) { try PublicKey(jwk: JWK(keyType: "OKP", curve: "X25519", x: RFC8037.x)) }
        #expect(throws: CryptoError.invalidKey) { try PublicKey(jwk: JWK(keyType: "OKP", curve: "Ed25519")) }
        #expect(throws: CryptoError.invalidKey) { try PublicKey(jwk: JWK(keyType: "OKP", curve: "Ed25519", x: "AQAB")) }
        #expect(throws: CryptoError.invalidKey) { try PrivateKey(ed25519Seed: [1, 2, 3]) }
    }

    @Test func generatedKeysSignVerifyAndSurvivePEMAndJWKExport() throws {
        let key = try PrivateKey.generate(.ed25519)
        let jws = try JWS.sign(payload: Array("hello".utf8), algorithm: .edDSA, keyID: "k1", using: key)
        let reloadedPublic = try PublicKey(jwk: key.publicJWK(keyID: "k1"))
        try JWS(compactSerialization: jws).verify(using: reloadedPublic)
        let reloaded = try PrivateKey(pemRepresentation: key.pemRepresentation)
        #expect(reloaded.publicJWK() == key.publicJWK())
        #expect(key.pemRepresentation.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
    }
}

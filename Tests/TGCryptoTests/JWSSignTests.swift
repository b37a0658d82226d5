import Testing

@testable import TGCrypto

struct JWSSignTests {
    /// A P-256 key made with `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`
    /// for this test only (PKCS #8), and its public point from `openssl pkey -pubout`.
    static let pkcs8P256PEM = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgjHvXQUKsCxTZhIla
        cudELvNkbuQbJJHBNAcfQInYQcOhRANCAASfFrowbngJOsxOXoFI/42TAqb2K7H4
        a4UjbB1rC0ALUU96aFrSsVTYzCD4TZtePUwsHcCrXpsB1RX5RSEag+sT
        -----END PRIVATE KEY-----

        """
    static let pkcs8P256Point = hex(
        "9f16ba306e78093acc4e5e8148ff8d9302a6f62bb1f86b85236c1d6b0b400b51 4f7a685ad2b154d8cc20f84d9b5e3d4c2c1dc0ab5e9b01d515f945211a83eb13"
    )

    // Generated once per test process: RSA generation costs tens of milliseconds.
    static let rsaKey = try! PrivateKey.generate(.rsa(bits: 2048))
    static let p256Key = try! PrivateKey.generate(.ec(.p256))

    @Test(arguments: [JWSAlgorithm.rs256, .rs384, .rs512, .ps256])
    func rsaSignatureRoundTripsThroughPublicJWK(algorithm: JWSAlgorithm) throws {
        let key = Self.rsaKey
        #expect(key.keyType == .rsa(modulusBits: 2048))
        let token = try JWS.sign(payload: utf8("{\"sub\":\"alice\"}"), algorithm: algorithm, keyID: "idp-rsa", using: key)
        let jws = try JWS(compactSerialization: token)
        #expect(jws.header.algorithm == algorithm.rawValue)
        #expect(jws.header.keyID == "idp-rsa")
        #expect(jws.header.type == "JWT")
        #expect(jws.payload == utf8("{\"sub\":\"alice\"}"))
        let published = try JWKSet(json: JWKSet(keys: [key.publicJWK(keyID: "idp-rsa")]).json())
        try jws.verify(using: PublicKey(jwk: try #require(published.keys(withID: "idp-rsa").first)))
    }

    @Test func es256SignatureIsRawRSAndRoundTrips() throws {
        let token = try JWS.sign(payload: utf8("{}"), algorithm: .es256, keyID: "idp-ec", type: nil, using: Self.p256Key)
        let jws = try JWS(compactSerialization: token)
        #expect(jws.signature.count == 64)
        #expect(jws.header.type == nil)
        #expect(jws.header.json == utf8("{\"alg\":\"ES256\",\"kid\":\"idp-ec\"}"))
        try jws.verify(using: PublicKey(jwk: Self.p256Key.publicJWK()))
        #expect(throws: CryptoError.invalidSignature) { try jws.verify(using: PrivateKey.generate(.ec(.p256)).publicKey) }
    }

    @Test func es384SignsWithP384Key() throws {
        let key = try PrivateKey.generate(.ec(.p384))
        let jws = try JWS(compactSerialization: JWS.sign(payload: [1, 2, 3], algorithm: .es384, using: key))
        #expect(jws.signature.count == 96)
        try jws.verify(using: key.publicKey)
    }

    @Test func signingRefusesKeyThatDoesNotFitAlgorithm() throws {
        #expect(throws: CryptoError.invalidKey) { try JWS.sign(payload: [], algorithm: .es256, using: Self.rsaKey) }
        #expect(throws: CryptoError.invalidKey) { try JWS.sign(payload: [], algorithm: .rs256, using: Self.p256Key) }
        #expect(throws: CryptoError.invalidKey) { try JWS.sign(payload: [], algorithm: .es384, using: Self.p256Key) }
        #expect(throws: CryptoError.invalidKey) { try PrivateKey.generate(.rsa(bits: 1024)) }
    }

    @Test func loadsPKCS8PEMAndSignsES256() throws {
        let key = try PrivateKey(pemRepresentation: Self.pkcs8P256PEM)
        #expect(key.keyType == .ec(.p256))
        let jwk = key.publicJWK()
        #expect(try Base64URL.decode(try #require(jwk.x)) + Base64URL.decode(try #require(jwk.y)) == Self.pkcs8P256Point)
        let token = try JWS.sign(payload: utf8("{\"iss\":\"client\"}"), algorithm: .es256, keyID: "client-key", using: key)
        try JWS(compactSerialization: token).verify(using: PublicKey(jwk: jwk))
    }

    @Test func exportedPEMReloadsToTheSameKey() throws {
        for key in [Self.rsaKey, Self.p256Key] {
            let pem = key.pemRepresentation
            #expect(pem.hasPrefix(key.keyType == .ec(.p256) ? "-----BEGIN EC PRIVATE KEY-----\n" : "-----BEGIN RSA PRIVATE KEY-----\n"))
            let reloaded = try PrivateKey(pemRepresentation: "comment before\n" + pem)
            #expect(reloaded.publicJWK() == key.publicJWK())
            #expect("\(reloaded)" == "PrivateKey(<redacted>)")
        }
    }

    @Test(arguments: [
        "", "garbage", "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgjHvXQUKsCxTZhIla\n-----END PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
    ])
    func refusesUnusablePEM(pem: String) {
        #expect(throws: CryptoError.self) { try PrivateKey(pemRepresentation: pem) }
        #expect(CryptoError.openSSLErrorQueueIsEmpty)
    }

    @Test func failuresLeaveNoStaleOpenSSLError() throws {
        let jws = try JWS(compactSerialization: RFCExamples.es256JWS)
        #expect(throws: CryptoError.invalidSignature) {
            try jws.verify(using: PrivateKey.generate(.ec(.p256)).publicKey)
        }
        #expect(CryptoError.openSSLErrorQueueIsEmpty)
        #expect(throws: CryptoError.invalidKey) {
            try PublicKey(jwk: JWK(keyType: "EC", curve: "P-256", x: RFCExamples.es256X, y: RFCExamples.es256X))
        }
        #expect(CryptoError.openSSLErrorQueueIsEmpty)
        let ring = try KeyRing(currentKeyID: "k", keys: ["k": .generate()])
        var blob = try ring.seal([1])
        blob[blob.count - 1] ^= 1
        do {
            _ = try ring.open(blob)
            Issue.record("tampered blob opened")
        } catch {
            #expect(error == .decryptionFailed)
            #expect("\(error)" == "CryptoError: decryption failed")
        }
        #expect(CryptoError.openSSLErrorQueueIsEmpty)
    }
}

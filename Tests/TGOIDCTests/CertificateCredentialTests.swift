import Foundation
import HTTPTypes
import TGCrypto
import TGTesting
import Testing

@testable import TGOIDC

/// `private_key_jwt` with a certificate (Entra ID's certificate credentials): the assertion names
/// the certificate by its thumbprints, as Entra ID's documented assertion header does
/// (`{"alg":"RS256","typ":"JWT","x5t":"…"}`, with `x5t#S256` for the SHA-256 form).
@Suite struct CertificateCredentialTests {
    /// openssl's own fingerprint of the certificate (`SHA256 Fingerprint=AB:CD:…`), as base64url.
    static func fingerprint(_ path: String, _ digest: String) async throws -> String {
        let out = try await runProcess("/usr/bin/openssl", ["x509", "-noout", "-fingerprint", "-\(digest)", "-in", path]).stdout
        let hex = try #require(out.split(separator: "=").last).trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ":")
        return Base64URL.encode(hex.compactMap { UInt8($0, radix: 16) })
    }

    @Test func theThumbprintsAreTheCertificatesSHA256AndSHA1AndItCertifiesOnlyItsKey() async throws {
        let (certificatePath, keyPath, directory) = try await makeRSACertificate()
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try Certificate(pemRepresentation: try String(contentsOfFile: certificatePath, encoding: .utf8))
        #expect(certificate.sha256Thumbprint == (try await Self.fingerprint(certificatePath, "sha256")))
        #expect(certificate.sha1Thumbprint == (try await Self.fingerprint(certificatePath, "sha1")))
        #expect(certificate.sha256Thumbprint.count == 43 && certificate.sha1Thumbprint.count == 27)
        let key = try PrivateKey(pemRepresentation: try String(contentsOfFile: keyPath, encoding: .utf8))
        #expect(certificate.certifies(key))
        #expect(!certificate.certifies(try PrivateKey.generate(.rsa(bits: 2048))))
        #expect(throws: CryptoError.self) { try Certificate(pemRepresentation: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----") }
        #expect(throws: CryptoError.self) { try Certificate(pemRepresentation: try String(contentsOfFile: keyPath, encoding: .utf8)) }
    }

    @Test func anAssertionWithACertificateCarriesItsThumbprintsInTheShapeEntraIDDocuments() async throws {
        let (certificatePath, keyPath, directory) = try await makeRSACertificate()
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try Certificate(pemRepresentation: try String(contentsOfFile: certificatePath, encoding: .utf8))
        let key = try PrivateKey(pemRepresentation: try String(contentsOfFile: keyPath, encoding: .utf8))
        let endpoint = "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
        func assertion(_ authentication: ClientAuthentication) throws -> JWS {
            var form: [(name: String, value: String)] = []
            var headers = HTTPFields()
            try authentication.apply(clientID: "app-id", endpoint: endpoint, now: Date(), form: &form, headers: &headers)
            #expect(form.first { $0.name == "client_assertion_type" }?.value == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
            return try JWS(compactSerialization: try #require(form.first { $0.name == "client_assertion" }?.value))
        }
        let jws = try assertion(.privateKeyJWT(key: key, keyID: "", algorithm: .rs256, certificate: certificate))
        let header = try #require(try JSONSerialization.jsonObject(with: Data(jws.header.json)) as? [String: String])
        // Entra ID's shape: alg, typ and the thumbprints; no kid when none is configured.
        #expect(header == ["alg": "RS256", "typ": "JWT", "x5t": certificate.sha1Thumbprint, "x5t#S256": certificate.sha256Thumbprint])
        try jws.verify(using: key.publicKey, allowedAlgorithms: [.rs256])
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
        #expect(Set(claims.keys) == ["aud", "exp", "iat", "iss", "jti", "nbf", "sub"])
        #expect(claims["aud"] as? String == endpoint && claims["iss"] as? String == "app-id" && claims["sub"] as? String == "app-id")
        // With a kid as well, both; without a certificate, only the kid (as before).
        let both = try assertion(.privateKeyJWT(key: key, keyID: "tg-2026", algorithm: .rs256, certificate: certificate))
        #expect(both.header.keyID == "tg-2026" && both.header.json.count > jws.header.json.count)
        let plain = try assertion(.privateKeyJWT(key: key, keyID: "tg-2026", algorithm: .rs256))
        let plainHeader = try #require(try JSONSerialization.jsonObject(with: Data(plain.header.json)) as? [String: String])
        #expect(plainHeader == ["alg": "RS256", "typ": "JWT", "kid": "tg-2026"])
    }
}

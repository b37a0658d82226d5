import Foundation
import TGBase
import TGCrypto
import Testing

@testable import TGOIDC

/// OIDC Core §3.1.3.7, rule by rule: each test breaks one rule and expects exactly that rejection.
@Suite struct IDTokenValidationTests {
    let signer: TokenSigner

    init() throws {
        signer = try TokenSigner()
    }

    @Test func acceptsAValidTokenAndReturnsItsClaims() async throws {
        let token = try signer.sign(signer.claims(["email": "alice@example.com"]))
        let idToken = try await signer.validate(token, signer.expectations())
        #expect(idToken.subject == "alice")
        #expect(idToken.claims["email"] == .string("alice@example.com"))
        #expect(idToken.raw == token)
    }

    @Test func acceptsAnES256Token() async throws {
        let token = try signer.sign(signer.claims(), algorithm: .es256, keyID: "ec-1")
        #expect(try await signer.validate(token, signer.expectations()).subject == "alice")
    }

    @Test func refusesAnUnsignedAlgNoneToken() async throws {
        let token = try signer.unsafeToken(header: ["alg": "none", "kid": "rsa-1"], claims: signer.claims()) { _ in [] }
        #expect(await idTokenProblem { try await signer.validate(token, signer.expectations()) } == .algorithmNotAllowed)
    }

    @Test func refusesHMACSignedWithThePublicKeyAsSecret() async throws {
        // The classic key-confusion forgery: HS256 keyed with the RSA public key's published bytes.
        let publicKeyBytes = signer.rsa.publicJWK(keyID: "rsa-1").json()
        let token = try signer.unsafeToken(header: ["alg": "HS256", "kid": "rsa-1"], claims: signer.claims()) { input in
            Digest.hmacSHA256(key: publicKeyBytes, message: Array(input.utf8))
        }
        #expect(await idTokenProblem { try await signer.validate(token, signer.expectations()) } == .algorithmNotAllowed)
    }

    @Test func refusesAnAllowedAlgorithmTheConfigurationExcludes() async throws {
        let token = try signer.sign(signer.claims(), algorithm: .es256, keyID: "ec-1")
        var expectations = signer.expectations()
        expectations.allowedAlgorithms = [.rs256]
        #expect(await idTokenProblem { try await signer.validate(token, expectations) } == .algorithmNotAllowed)
    }

    @Test func refusesATokenSignedByAKeyTheProviderDoesNotPublish() async throws {
        let stranger = try PrivateKey.generate(.rsa(bits: 2048))
        let unknownKID = try signer.sign(signer.claims(), keyID: "rsa-2", key: stranger)
        #expect(await idTokenProblem { try await signer.validate(unknownKID, signer.expectations()) } == .unknownKey)
        // The same forgery claiming the published kid fails the signature check.
        let spoofedKID = try signer.sign(signer.claims(), keyID: "rsa-1", key: stranger)
        #expect(await idTokenProblem { try await signer.validate(spoofedKID, signer.expectations()) } == .badSignature)
    }

    @Test func refusesATamperedPayload() async throws {
        let token = try signer.sign(signer.claims())
        let parts = token.split(separator: ".")
        let forged = try JSONSerialization.data(withJSONObject: signer.claims(["sub": "mallory"]), options: [.sortedKeys])
        let tampered = "\(parts[0]).\(Base64URL.encode(Array(forged))).\(parts[2])"
        #expect(await idTokenProblem { try await signer.validate(tampered, signer.expectations()) } == .badSignature)
    }

    @Test func refusesAnotherIssuer() async throws {
        let token = try signer.sign(signer.claims(["iss": "https://evil.example/tenant/v2.0"]))
        #expect(await idTokenProblem { try await signer.validate(token, signer.expectations()) } == .issuer)
    }

    @Test func refusesATokenForAnotherClient() async throws {
        let token = try signer.sign(signer.claims(["aud": "someone-else"]))
        #expect(await idTokenProblem { try await signer.validate(token, signer.expectations()) } == .audience)
    }

    @Test func requiresAzpNamingThisClientWhenThereAreSeveralAudiences() async throws {
        let audiences = [TokenSigner.clientID, "other-api"]
        let withoutAzp = try signer.sign(signer.claims(["aud": audiences]))
        #expect(await idTokenProblem { try await signer.validate(withoutAzp, signer.expectations()) } == .authorizedParty)
        let wrongAzp = try signer.sign(signer.claims(["aud": audiences, "azp": "other-api"]))
        #expect(await idTokenProblem { try await signer.validate(wrongAzp, signer.expectations()) } == .authorizedParty)
        let rightAzp = try signer.sign(signer.claims(["aud": audiences, "azp": TokenSigner.clientID]))
        #expect(try await signer.validate(rightAzp, signer.expectations()).audiences == audiences)
    }

    @Test func refusesAnExpiredTokenBeyondTheClockSkewOnly() async throws {
        let issued = Int(signer.now.timeIntervalSince1970)
        let token = try signer.sign(signer.claims(["iat": issued - 3600, "exp": issued - 30]))
        // 30 s past expiry is inside a 60 s skew, outside a 10 s one.
        #expect(try await signer.validate(token, signer.expectations(skew: .seconds(60))).subject == "alice")
        #expect(await idTokenProblem { try await signer.validate(token, signer.expectations(skew: .seconds(10))) } == .expired)
    }

    @Test func refusesATokenIssuedInTheFutureOrNotYetValid() async throws {
        let issued = Int(signer.now.timeIntervalSince1970)
        let future = try signer.sign(signer.claims(["iat": issued + 600, "exp": issued + 4200]))
        #expect(await idTokenProblem { try await signer.validate(future, signer.expectations()) } == .issuedInFuture)
        let notBefore = try signer.sign(signer.claims(["nbf": issued + 600]))
        #expect(await idTokenProblem { try await signer.validate(notBefore, signer.expectations()) } == .notYetValid)
    }

    @Test func refusesAReplayedOrMissingNonce() async throws {
        let replayed = try signer.sign(signer.claims(["nonce": "nonce-of-an-earlier-login"]))
        #expect(await idTokenProblem { try await signer.validate(replayed, signer.expectations()) } == .nonce)
        let missing = try signer.sign(signer.claims(["nonce": nil]))
        #expect(await idTokenProblem { try await signer.validate(missing, signer.expectations()) } == .nonce)
    }

    @Test func refusesARefreshedTokenAboutAnotherSubject() async throws {
        let token = try signer.sign(signer.claims(["sub": "bob", "nonce": nil]))
        let expectations = signer.expectations(nonce: nil, subject: "alice")
        #expect(await idTokenProblem { try await signer.validate(token, expectations) } == .subject)
    }

    @Test func refusesMalformedTokens() async throws {
        for token in ["", "a.b", "not.a.jws", "e30.e30.", try signer.sign(["iss": TokenSigner.issuer])] {
            let problem = await idTokenProblem { try await signer.validate(token, signer.expectations()) }
            #expect(problem == .malformed || problem == .algorithmNotAllowed)
        }
    }
}

import Foundation
import TGBase
import TGCrypto
import Testing

@testable import TGOIDC

/// OpenID Connect Back-Channel Logout 1.0 §2.4 and §2.6, rule by rule: each test breaks one rule
/// of a valid logout token and expects exactly that rejection.
@Suite struct LogoutTokenValidationTests {
    let signer: TokenSigner

    init() throws {
        signer = try TokenSigner()
    }

    static let event = "http://schemas.openid.net/event/backchannel-logout"

    /// A valid logout token's claims, with `changes` applied (nil removes the member).
    func claims(_ changes: [String: Any?] = [:]) -> [String: Any] {
        let issuedAt = Int(signer.now.timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": TokenSigner.issuer, "aud": TokenSigner.clientID, "iat": issuedAt, "exp": issuedAt + 120, "jti": "jti-1",
            "sub": "alice", "sid": "sid-1", "events": [Self.event: [String: Any]()],
        ]
        for (name, value) in changes {
            if let value { claims[name] = value } else { claims.removeValue(forKey: name) }
        }
        return claims
    }

    func sign(_ claims: [String: Any], type: String? = "logout+jwt", keyID: String = "rsa-1", key: PrivateKey? = nil) throws -> String {
        let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        return try JWS.sign(payload: Array(payload), algorithm: .rs256, keyID: keyID, type: type, using: key ?? signer.rsa)
    }

    func expectations(
        issuer: String = TokenSigner.issuer,
        allowedTenants: Set<String> = [],
        maxAge: Duration = .seconds(300),
        typedOnly: Bool = false
    ) -> LogoutTokenExpectations {
        LogoutTokenExpectations(
            issuer: issuer,
            clientID: TokenSigner.clientID,
            allowedTenants: allowedTenants,
            allowedAlgorithms: [.rs256, .es256],
            clockSkew: .seconds(60),
            maxAge: maxAge,
            requiresExplicitType: typedOnly,
            now: signer.now
        )
    }

    func validate(_ token: String, _ expected: LogoutTokenExpectations? = nil) async throws(OIDCError) -> LogoutToken {
        let keys = signer.keys
        return try await LogoutTokenValidator.validate(token, expecting: expected ?? expectations()) { (keyID: String?) throws(OIDCError) in
            keys.filter { keyID == nil || $0.keyID == keyID }.compactMap { try? PublicKey(jwk: $0) }
        }
    }

    /// The logout-token problem `token` is refused with, or nil when it is accepted.
    func problem(_ token: String, _ expected: LogoutTokenExpectations? = nil) async -> LogoutTokenProblem? {
        do {
            _ = try await validate(token, expected)
            return nil
        } catch {
            guard case .invalidLogoutToken(let problem) = error.kind else { return nil }
            return problem
        }
    }

    @Test func acceptsAValidTokenAndReturnsWhomItNamesAndHowLongItsIDMustBeKept() async throws {
        let token = try await validate(try sign(claims()))
        #expect(token.issuer == TokenSigner.issuer && token.subject == "alice" && token.sessionID == "sid-1" && token.tokenID == "jti-1")
        // iat + the window (300 s) + the skew (60 s): past that it is refused as too old anyway.
        #expect(token.replayWindowEnd == signer.now.addingTimeInterval(360))
        #expect(try await validate(try sign(claims(["sub": nil]))).subject == nil)
        #expect(try await validate(try sign(claims(["sid": nil]))).sessionID == nil)
    }

    @Test func acceptsLogoutJWTTypesAndJWTOrNoneUnlessTypedOnly() async throws {
        for type in ["logout+jwt", "application/logout+jwt", "Logout+JWT"] {
            #expect(await problem(try sign(claims(), type: type), expectations(typedOnly: true)) == nil, "\(type)")
        }
        for type in ["JWT", nil] as [String?] {
            #expect(await problem(try sign(claims(), type: type)) == nil, "\(type ?? "none")")
            #expect(await problem(try sign(claims(), type: type), expectations(typedOnly: true)) == .type, "\(type ?? "none")")
        }
        for type in ["at+jwt", "secevent+jwt", "JOSE"] {
            #expect(await problem(try sign(claims(), type: type)) == .type, "\(type)")
        }
    }

    @Test func refusesAlgNoneAndHMACKeyedWithThePublicKey() async throws {
        let unsigned = try signer.unsafeToken(header: ["alg": "none", "typ": "logout+jwt"], claims: claims()) { _ in [] }
        #expect(await problem(unsigned) == .token(.algorithmNotAllowed))
        let publicKeyBytes = signer.rsa.publicJWK(keyID: "rsa-1").json()
        let hmac = try signer.unsafeToken(header: ["alg": "HS256", "kid": "rsa-1", "typ": "logout+jwt"], claims: claims()) { input in
            Digest.hmacSHA256(key: publicKeyBytes, message: Array(input.utf8))
        }
        #expect(await problem(hmac) == .token(.algorithmNotAllowed))
    }

    @Test func refusesAnUnknownKeyAndABadSignature() async throws {
        let stranger = try PrivateKey.generate(.rsa(bits: 2048))
        #expect(await problem(try sign(claims(), keyID: "rsa-unknown", key: stranger)) == .token(.unknownKey))
        #expect(await problem(try sign(claims(), key: stranger)) == .token(.badSignature))
    }

    @Test func refusesAnotherIssuerAndFillsEntrasTenantTemplateFromTid() async throws {
        #expect(await problem(try sign(claims(["iss": "https://evil.example/tenant/v2.0"]))) == .token(.issuer))
        let tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"
        let template = "https://login.microsoftonline.com/{tenantid}/v2.0"
        let entra = try sign(claims(["iss": "https://login.microsoftonline.com/\(tenant)/v2.0", "tid": tenant]))
        #expect(await problem(entra, expectations(issuer: template)) == nil)
        #expect(
            await problem(entra, expectations(issuer: template, allowedTenants: ["f8cdef31-a31e-4b4a-93e4-5f571e91255a"]))
                == .token(.tenantNotAllowed)
        )
        let crafted = try sign(claims(["iss": "https://login.microsoftonline.com/evil.example/v2.0", "tid": "evil.example"]))
        #expect(await problem(crafted, expectations(issuer: template)) == .token(.issuer))
    }

    @Test func refusesATokenForAnotherClient() async throws {
        #expect(await problem(try sign(claims(["aud": "someone-else"]))) == .token(.audience))
        #expect(await problem(try sign(claims(["aud": ["someone-else", TokenSigner.clientID]]))) == nil)
    }

    @Test func refusesAMissingTooOldOrFutureIssuedAt() async throws {
        let issued = Int(signer.now.timeIntervalSince1970)
        #expect(await problem(try sign(claims(["iat": nil]))) == .missingIssuedAt)
        // The window (300 s) plus the skew (60 s): 350 s old is accepted, 400 s is not.
        #expect(await problem(try sign(claims(["iat": issued - 350, "exp": nil]))) == nil)
        #expect(await problem(try sign(claims(["iat": issued - 400, "exp": nil]))) == .tooOld)
        #expect(await problem(try sign(claims(["iat": issued + 30]))) == nil)
        #expect(await problem(try sign(claims(["iat": issued + 600, "exp": issued + 720]))) == .token(.issuedInFuture))
        #expect(await problem(try sign(claims(["iat": "yesterday"]))) == .token(.malformed))
    }

    @Test func refusesAnExpiredTokenAndAcceptsOneWithoutExp() async throws {
        let issued = Int(signer.now.timeIntervalSince1970)
        #expect(await problem(try sign(claims(["iat": issued - 200, "exp": issued - 100]))) == .token(.expired))
        #expect(await problem(try sign(claims(["exp": nil]))) == nil)
    }

    @Test func requiresTheBackChannelLogoutEventAsAnObject() async throws {
        #expect(await problem(try sign(claims(["events": nil]))) == .events)
        #expect(await problem(try sign(claims(["events": [String: Any]()]))) == .events)
        #expect(await problem(try sign(claims(["events": ["http://schemas.openid.net/event/other": [String: Any]()]]))) == .events)
        // Drafts before 04 sent an array; the member's value must be an object.
        #expect(await problem(try sign(claims(["events": [Self.event]]))) == .events)
        #expect(await problem(try sign(claims(["events": [Self.event: true]]))) == .events)
        #expect(await problem(try sign(claims(["events": [Self.event: ["reason": "admin"]]]))) == nil)
    }

    @Test func refusesATokenWithANonceSoThatAnIDTokenCannotPassForOne() async throws {
        #expect(await problem(try sign(claims(["nonce": "n-0S6_WzA2Mj"]))) == .nonce)
        // An ID token of the same provider, for the same client: refused (it has no event).
        #expect(await problem(try signer.sign(signer.claims())) == .events)
    }

    @Test func requiresAUsableJTI() async throws {
        #expect(await problem(try sign(claims(["jti": nil]))) == .tokenID)
        #expect(await problem(try sign(claims(["jti": ""]))) == .tokenID)
        #expect(await problem(try sign(claims(["jti": 42]))) == .tokenID)
        #expect(await problem(try sign(claims(["jti": String(repeating: "j", count: 513)]))) == .tokenID)
    }

    @Test func requiresASubOrASidAsStrings() async throws {
        #expect(await problem(try sign(claims(["sub": nil, "sid": nil]))) == .subjectOrSession)
        #expect(await problem(try sign(claims(["sub": 7]))) == .subjectOrSession)
        #expect(await problem(try sign(claims(["sid": ""]))) == .subjectOrSession)
    }
}

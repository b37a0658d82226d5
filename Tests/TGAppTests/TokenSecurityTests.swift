import Foundation
import HTTPTypes
import TGApp
import TGAppTesting
import TGAuth
import TGCrypto
import TGOIDC
import TGPostgres
import TGStore
import TGTesting
import Testing

/// The token leg's security properties (docs/threat_model.md).
@Suite struct TokenSecurityTests {
    typealias AppLogin = AuthFlowHarness.AppLogin

    func redeem(
        _ h: AuthFlowHarness,
        _ code: String,
        _ login: AppLogin,
        verifier: String? = nil,
        clientID: String? = nil,
        redirectURI: String? = nil,
        deviceSecret: String? = nil
    ) async throws -> TestResponse {
        var form = [
            ("grant_type", "authorization_code"), ("code", code), ("code_verifier", verifier ?? login.verifier),
            ("redirect_uri", redirectURI ?? login.redirectURI), ("client_id", clientID ?? login.clientID),
        ]
        if let deviceSecret { form.append(("device_secret", deviceSecret)) }
        return try await h.post("/auth/token", form: form)
    }

    @Test func aHandoffCodeWorksOnceAndItsReplayEndsTheSessionItStarted() async throws {
        try await AuthFlowHarness.run { h in
            let login = AppLogin()
            let code = try await h.handoffCode(login)
            let first = try await redeem(h, code, login)
            #expect(first.status == 200)
            let access = try #require(first.json["access_token"] as? String)
            let replay = try await redeem(h, code, login)
            #expect(replay.status == 400)
            #expect(replay.json["error"] as? String == "invalid_grant")
            #expect(replay.header("Cache-Control") == "no-store")
            #expect(try await h.get("/auth/me", bearer: access).status == 401)
        }
    }

    @Test func aWrongVerifierIsRefusedAndSpendsTheCode() async throws {
        try await AuthFlowHarness.run { h in
            let login = AppLogin()
            let code = try await h.handoffCode(login)
            let wrong = try await redeem(h, code, login, verifier: AppLogin().verifier)
            #expect(wrong.status == 400)
            #expect(wrong.json["error"] as? String == "invalid_grant")
            #expect(try await redeem(h, code, login).status == 400)
            #expect(try await h.count("SELECT count(*) AS n FROM sessions") == 0)
        }
    }

    @Test func aCodeIsRefusedToAnotherClientOrRedirectURI() async throws {
        try await AuthFlowHarness.run { h in
            let login = AppLogin()
            let other = try await redeem(
                h,
                try await h.handoffCode(login),
                login,
                clientID: AuthFlowHarness.otherClient,
                redirectURI: AuthFlowHarness.otherRedirect
            )
            #expect(other.status == 400)
            #expect(other.json["error"] as? String == "invalid_grant")
            let second = AppLogin()
            let redirect = try await redeem(h, try await h.handoffCode(second), second, redirectURI: "com.example.app:/other")
            #expect(redirect.json["error"] as? String == "invalid_grant")
            let unknown = try await redeem(h, "x", second, clientID: "nobody")
            #expect(unknown.status == 401)
            #expect(unknown.json["error"] as? String == "invalid_client")
            #expect(try await h.count("SELECT count(*) AS n FROM sessions") == 0)
        }
    }

    @Test func anExpiredHandoffCodeIsRefused() async throws {
        try await AuthFlowHarness.run { h in
            let login = AppLogin()
            let code = try await h.handoffCode(login)
            h.clock.advance(by: 61)
            #expect(try await redeem(h, code, login).json["error"] as? String == "invalid_grant")
        }
    }

    @Test func theTokenEndpointAnswersMalformedRequestsPerRFC6749() async throws {
        try await AuthFlowHarness.run { h in
            let missing = try await h.post("/auth/token", form: [("grant_type", "authorization_code")])
            #expect(missing.status == 400)
            #expect(missing.json["error"] as? String == "invalid_request")
            let unsupported = try await h.post("/auth/token", form: [("grant_type", "password")])
            #expect(unsupported.json["error"] as? String == "unsupported_grant_type")
            let twice = try await h.post("/auth/token", form: [("grant_type", "refresh_token"), ("grant_type", "refresh_token")])
            #expect(twice.json["error"] as? String == "invalid_request")
            let json = await h.client.execute(uri: "/auth/token", method: .post, headers: [.contentType: "application/json"], body: Array("{}".utf8))
            #expect(json.status == 400)
            #expect(json.json["error"] as? String == "invalid_request")
        }
    }

    @Test func aRetryWithThePreviousRefreshTokenWithinTheGraceGetsTheSameAnswer() async throws {
        try await AuthFlowHarness.run { h in
            let tokens = try await h.logIn()
            let first = try #require(tokens["refresh_token"] as? String)
            let rotated = try await h.refresh(first)
            h.clock.advance(by: 10)
            let retry = try await h.refresh(first)
            #expect(retry.status == 200)
            #expect(retry.json["access_token"] as? String == rotated.json["access_token"] as? String)
            #expect(retry.json["refresh_token"] as? String == rotated.json["refresh_token"] as? String)
            #expect(try await h.get("/auth/me", bearer: try #require(retry.json["access_token"] as? String)).status == 200)
        }
    }

    @Test func concurrentRefreshesWithOneTokenAllGetTheSameAnswer() async throws {
        try await AuthFlowHarness.run { h in
            let refresh = try #require(try await h.logIn()["refresh_token"] as? String)
            let answers = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                for _ in 0..<6 { group.addTask { try await h.refresh(refresh) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.status == 200 })
            #expect(Set(answers.compactMap { $0.json["refresh_token"] as? String }).count == 1)
        }
    }

    @Test func reusingARotatedRefreshTokenRevokesTheWholeFamily() async throws {
        try await AuthFlowHarness.run { h in
            let tokens = try await h.logIn()
            let first = try #require(tokens["refresh_token"] as? String)
            let second = try #require(try await h.refresh(first).json["refresh_token"] as? String)
            let third = try await h.refresh(second)
            let thirdRefresh = try #require(third.json["refresh_token"] as? String)
            let access = try #require(third.json["access_token"] as? String)
            // An attacker replays the first token, long after the grace window.
            h.clock.advance(by: 31)
            let reuse = try await h.refresh(first)
            #expect(reuse.status == 400)
            #expect(reuse.json["error"] as? String == "invalid_grant")
            // The legitimate holder's newest tokens are dead too.
            #expect(try await h.refresh(thirdRefresh).status == 400)
            #expect(try await h.get("/auth/me", bearer: access).status == 401)
            #expect(h.logs.lines.contains { $0.contains("refresh token reuse") })
        }
    }

    @Test func thePreviousRefreshTokenAfterTheGraceIsReuse() async throws {
        try await AuthFlowHarness.run { h in
            let first = try #require(try await h.logIn()["refresh_token"] as? String)
            let second = try #require(try await h.refresh(first).json["refresh_token"] as? String)
            h.clock.advance(by: 31)
            #expect(try await h.refresh(first).status == 400)
            #expect(try await h.refresh(second).status == 400)
        }
    }

    @Test func aRefreshTokenWorksOnlyForItsClientAndWithinItsLifetime() async throws {
        try await AuthFlowHarness.run { h in
            let refresh = try #require(try await h.logIn()["refresh_token"] as? String)
            #expect(try await h.refresh(refresh, clientID: AuthFlowHarness.otherClient).status == 400)
            h.clock.advance(by: 30 * 86400 + 1)  // idle lifetime
            #expect(try await h.refresh(refresh).json["error"] as? String == "invalid_grant")
            #expect(try await h.count("SELECT count(*) AS n FROM sessions") == 0)
        }
    }

    @Test func tokensCodesAndSecretsNeverReachTheLog() async throws {
        try await AuthFlowHarness.run { h in
            let login = AppLogin()
            let code = try await h.handoffCode(login)
            let tokens = try await redeem(h, code, login).json
            let refreshed = try await h.refresh(try #require(tokens["refresh_token"] as? String)).json
            _ = try await h.refresh(try #require(tokens["refresh_token"] as? String))
            // A transfer code, redeemed, then presented again (the reuse is logged).
            let keep = PKCE.makeVerifier()
            let transfer = try await h.post(
                "/auth/transfer",
                form: [("code_challenge", PKCE.challenge(for: keep)), ("code_challenge_method", "S256")],
                bearer: try #require(refreshed["access_token"] as? String)
            )
            let transferCode = try #require(transfer.json["transfer_code"] as? String)
            let redemption = [
                ("grant_type", "urn:tokengate:params:oauth:grant-type:transfer-code"), ("transfer_code", transferCode),
                ("code_verifier", keep), ("client_id", login.clientID),
            ]
            let moved = try await h.post("/auth/token", form: redemption).json
            // Within the replay grace it would be answered again; past it, it is reuse.
            h.clock.advance(by: 31)
            _ = try await h.post("/auth/token", form: redemption)
            #expect(h.logs.lines.contains { $0.contains("transfer_code_reuse") })
            _ = try await h.post("/auth/logout", form: [], bearer: try #require(refreshed["access_token"] as? String))
            var secrets = [code, login.verifier, "s3cret", transferCode, keep] + h.fake.revokedTokens
            for key in ["access_token", "refresh_token", "device_secret"] {
                secrets += [tokens[key], refreshed[key], moved[key]].compactMap { $0 as? String }
            }
            #expect(secrets.count >= 13)
            let lines = h.logs.lines
            #expect(lines.count > 5)
            for secret in secrets { #expect(!lines.contains { $0.contains(secret) }, "a secret reached the log") }
        }
    }

    @Test func storedTokensAreHashesAndTheGrantIsBoundCiphertext() async throws {
        try await AuthFlowHarness.run { h in
            let tokens = try await h.logIn()
            let access = try #require(tokens["access_token"] as? String)
            let refresh = try #require(tokens["refresh_token"] as? String)
            let row = try #require(
                try await h.database.query(
                    """
                    SELECT s.access_token_hash, s.refresh_token_hash, g.refresh_token, g.key_id, g.account_id
                    FROM sessions s JOIN upstream_grants g ON g.account_id = s.account_id
                    """
                ).first
            )
            #expect(try row.decode(PostgresBytes.self, "access_token_hash").bytes == Digest.sha256(Array(access.utf8)))
            #expect(try row.decode(PostgresBytes.self, "refresh_token_hash").bytes == Digest.sha256(Array(refresh.utf8)))
            #expect(try row.decode(String.self, "key_id") == "k1")
            // The grant opens only as this account's, and it is the provider's live refresh token.
            let blob = try row.decode(SealedBlob.self, "refresh_token")
            let account = try row.decode(UUID.self, "account_id")
            let upstream = try h.vault().open(blob, context: "grant:\(account.uuidString.lowercased())")
            #expect(h.fake.isRefreshTokenActive(upstream))
            #expect(!String(decoding: blob.bytes, as: UTF8.self).contains(upstream))
            #expect(throws: CryptoError.self) { try h.vault().open(blob, context: "grant:\(UUID().uuidString.lowercased())") }
        }
    }

    @Test func aFormWithABadPercentEncodingIsNamedAsSuchNotAsAMissingParameter() async throws {
        try await AuthFlowHarness.run { h in
            for body in ["grant_type=refresh%zz_token&client_id=x", "grant_type=%ff%fe&client_id=x"] {
                let result = await h.client.execute(
                    uri: "/auth/token",
                    method: .post,
                    headers: [.contentType: "application/x-www-form-urlencoded"],
                    body: Array(body.utf8)
                )
                #expect(result.status == 400)
                #expect(result.json["error"] as? String == "invalid_request")
                #expect((result.json["error_description"] as? String)?.contains("percent-encoding") == true, "\(result.body)")
            }
        }
    }
}

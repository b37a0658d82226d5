import Foundation
import TGApp
import TGAppTesting
import TGAuth
import TGCrypto
import TGOIDC
import TGPostgres
import TGTesting
import Testing

/// `POST /auth/transfer` and the transfer-code grant at `/auth/token`, over HTTP (the rules
/// themselves: `TransferCodeTests` in TGAuthTests).
@Suite struct TransferCodeRouteTests {
    static let grantType = "urn:tokengate:params:oauth:grant-type:transfer-code"

    func issue(_ h: AuthFlowHarness, bearer: String, verifier: String) async throws -> TestResponse {
        try await h.post(
            "/auth/transfer",
            form: [("code_challenge", PKCE.challenge(for: verifier)), ("code_challenge_method", "S256")],
            bearer: bearer
        )
    }

    /// The redemption, with a DPoP proof of `key` when given.
    func redeem(_ h: AuthFlowHarness, code: String, verifier: String, key: DPoPKey? = nil) async throws -> TestResponse {
        var headers: [String] = []
        if let key { headers.append("DPoP: " + (try key.proof("POST", h.issuer + "/auth/token"))) }
        return try await h.post(
            "/auth/token",
            form: [
                ("grant_type", Self.grantType), ("transfer_code", code), ("code_verifier", verifier),
                ("client_id", AuthFlowHarness.appClient),
            ],
            headers: headers
        )
    }

    @Test func aFreshInstallRedeemsACodeForANewDeviceSecretAndEveryAccountsTokens() async throws {
        try await AuthFlowHarness.run { h in
            let alice = try await h.logIn(as: "alice")
            h.clock.advance(by: 1)
            let bob = try await h.logIn(as: "bob", deviceSecret: alice["device_secret"] as? String)
            let bobAccess = try #require(bob["access_token"] as? String)
            let verifier = PKCE.makeVerifier()
            let issued = try await issue(h, bearer: bobAccess, verifier: verifier)
            #expect(issued.status == 200, "\(issued.body)")
            #expect(issued.header("Cache-Control") == "no-store")
            let code = try #require(issued.json["transfer_code"] as? String)
            #expect((issued.json["accounts"] as? [String])?.count == 2)
            #expect(issued.json["expires_in"] as? Int == 30 * 86400)
            // Stored only as its SHA-256.
            #expect(
                try await h.count("SELECT count(*) AS n FROM transfer_codes WHERE code_hash = \(PostgresBytes(Digest.sha256(Array(code.utf8))))") == 1
            )

            let moved = try await redeem(h, code: code, verifier: verifier)
            #expect(moved.status == 200, "\(moved.body)")
            #expect(moved.header("Cache-Control") == "no-store")
            let json = moved.json
            let accounts = try #require(json["accounts"] as? [[String: Any]])
            #expect(accounts.compactMap { ($0["account"] as? [String: Any])?["subject"] as? String } == ["alice", "bob"])
            // The top level is an RFC 6749 token response for the first account.
            #expect(json["access_token"] as? String == accounts[0]["access_token"] as? String)
            #expect(json["token_type"] as? String == "Bearer" && json["refresh_token"] is String)
            #expect(json["device_secret"] is String && json["device_secret"] as? String != alice["device_secret"] as? String)
            #expect((json["interaction_required"] as? [Any])?.isEmpty == true)
            for entry in accounts {
                #expect(entry["device_secret"] == nil)
                #expect(try await h.get("/auth/me", bearer: try #require(entry["access_token"] as? String)).status == 200)
            }
            #expect(try await h.get("/auth/me", bearer: bobAccess).status == 401)
            // Once: a second use past the replay grace is refused, and what the first created ends.
            h.clock.advance(by: 31)
            let again = try await redeem(h, code: code, verifier: verifier)
            #expect(again.status == 400 && again.json["error"] as? String == "invalid_grant")
            #expect(try await h.get("/auth/me", bearer: try #require(json["access_token"] as? String)).status == 401)
        }
    }

    @Test func aRetriedRedemptionGetsTheSameAnswerAndAWrongVerifierChangesNothing() async throws {
        try await AuthFlowHarness.run { h in
            let alice = try await h.logIn(as: "alice")
            let verifier = PKCE.makeVerifier()
            let issued = try await issue(h, bearer: try #require(alice["access_token"] as? String), verifier: verifier)
            let code = try #require(issued.json["transfer_code"] as? String)
            let first = try await redeem(h, code: code, verifier: verifier)
            #expect(first.status == 200, "\(first.body)")
            let access = try #require(first.json["access_token"] as? String)
            let wrong = try await redeem(h, code: code, verifier: PKCE.makeVerifier())
            #expect(wrong.status == 400 && wrong.json["error"] as? String == "invalid_grant")
            #expect(try await h.get("/auth/me", bearer: access).status == 200)
            // The answer was lost: the app sends the same request again within the replay grace.
            h.clock.advance(by: 5)
            let retried = try await redeem(h, code: code, verifier: verifier)
            #expect(retried.status == 200, "\(retried.body)")
            #expect(retried.json["access_token"] as? String == access)
            #expect(retried.json["device_secret"] as? String == first.json["device_secret"] as? String)
            #expect(try await h.get("/auth/me", bearer: access).status == 200)
        }
    }

    @Test func aDPoPBoundRedemptionIsAnsweredAgainOnlyToAProofOfItsKey() async throws {
        try await AuthFlowHarness.run(appClientOptions: ", dpop: allowed") { h in
            let alice = try await h.logIn(as: "alice")
            let verifier = PKCE.makeVerifier()
            let issued = try await issue(h, bearer: try #require(alice["access_token"] as? String), verifier: verifier)
            let code = try #require(issued.json["transfer_code"] as? String)
            let key = try DPoPKey()
            let first = try await redeem(h, code: code, verifier: verifier, key: key)
            #expect(first.status == 200 && first.json["token_type"] as? String == "DPoP", "\(first.body)")
            let access = try #require(first.json["access_token"] as? String)
            for other in [nil, try DPoPKey()] {
                let refused = try await redeem(h, code: code, verifier: verifier, key: other)
                #expect(refused.status == 400 && refused.json["error"] as? String == "invalid_dpop_proof", "\(refused.body)")
            }
            let again = try await redeem(h, code: code, verifier: verifier, key: key)
            #expect(again.status == 200 && again.json["access_token"] as? String == access, "\(again.body)")
            let me = try await h.get(
                "/auth/me",
                headers: ["Authorization: DPoP \(access)", "DPoP: " + (try key.proof("GET", h.issuer + "/auth/me", accessToken: access))]
            )
            #expect(me.status == 200, "\(me.body)")
        }
    }

    @Test func issuingNeedsABearerTokenAndAnS256ChallengeAndRevokingKillsTheCodes() async throws {
        try await AuthFlowHarness.run { h in
            let alice = try await h.logIn(as: "alice")
            let access = try #require(alice["access_token"] as? String)
            let verifier = PKCE.makeVerifier()
            let anonymous = try await h.post("/auth/transfer", form: [("code_challenge", PKCE.challenge(for: verifier))])
            #expect(anonymous.status == 401 && anonymous.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            let missing = try await h.post("/auth/transfer", form: [("code_challenge_method", "S256")], bearer: access)
            #expect(missing.status == 400 && missing.json["code"] as? String == "invalid_request")
            let plain = try await h.post("/auth/transfer", form: [("code_challenge", verifier), ("code_challenge_method", "plain")], bearer: access)
            #expect(plain.status == 400 && plain.json["code"] as? String == "invalid_request")
            let code = try #require(try await issue(h, bearer: access, verifier: verifier).json["transfer_code"] as? String)
            let revoked = try await h.delete("/auth/transfer", bearer: access)
            #expect(revoked.status == 200 && revoked.json["revoked"] as? Int == 1)
            let dead = try await redeem(h, code: code, verifier: verifier)
            #expect(dead.status == 400 && dead.json["error"] as? String == "invalid_grant")
            #expect(try await h.get("/auth/me", bearer: access).status == 200)
        }
    }

    @Test func whenNothingCanMoveTheErrorListsTheAccountsToSignInAgain() async throws {
        try await AuthFlowHarness.run { h in
            let alice = try await h.logIn(as: "alice")
            let access = try #require(alice["access_token"] as? String)
            let verifier = PKCE.makeVerifier()
            let code = try #require(try await issue(h, bearer: access, verifier: verifier).json["transfer_code"] as? String)
            try await h.database.query("UPDATE upstream_grants SET expires_at = now() - interval '1 second'")
            let answer = try await redeem(h, code: code, verifier: verifier)
            #expect(answer.status == 400 && answer.json["error"] as? String == "interaction_required")
            let entries = try #require(answer.json["interaction_required"] as? [[String: Any]])
            #expect(entries.count == 1 && entries[0]["provider"] as? String != nil && entries[0]["login_endpoint"] as? String == "/auth/login")
        }
    }

    @Test func transferCodesCanBeTurnedOff() async throws {
        try await AuthFlowHarness.run(extraConfiguration: "sessions: { transfer_codes_per_device: 0 }") { h in
            let alice = try await h.logIn(as: "alice")
            let access = try #require(alice["access_token"] as? String)
            let off = try await issue(h, bearer: access, verifier: PKCE.makeVerifier())
            #expect(off.status == 403 && off.json["code"] as? String == "transfer_disabled")
            let redeem = try await redeem(h, code: String(repeating: "a", count: 43), verifier: PKCE.makeVerifier())
            #expect(redeem.status == 400 && redeem.json["error"] as? String == "unsupported_grant_type")
        }
    }
}

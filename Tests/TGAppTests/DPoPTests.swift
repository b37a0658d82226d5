import Foundation
import HTTPTypes
import TGApp
import TGAppTesting
import TGAuth
import TGCrypto
import TGTesting
import Testing

/// DPoP-bound tokens (RFC 9449) over HTTP: the token endpoint binds, every route and the proxy
/// (on the event loop and off it) insist on a proof of the bound key.
@Suite struct DPoPTests {
    typealias AppLogin = AuthFlowHarness.AppLogin

    /// A login whose code redemption carries a proof of `key` (or none).
    func logIn(_ h: AuthFlowHarness, key: DPoPKey?, nonce: String? = nil) async throws -> TestResponse {
        let login = AppLogin()
        let code = try await h.handoffCode(login)
        let form = [
            ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
            ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
        ]
        var headers: [String] = []
        if let key { headers.append("DPoP: " + (try key.proof("POST", h.issuer + "/auth/token", nonce: nonce, issuedAt: h.clock.now))) }
        return try await h.post("/auth/token", form: form, headers: headers)
    }

    func me(_ h: AuthFlowHarness, token: String, key: DPoPKey?, scheme: String = "DPoP") async throws -> TestResponse {
        var headers = ["Authorization: \(scheme) \(token)"]
        if let key { headers.append("DPoP: " + (try key.proof("GET", h.issuer + "/auth/me", accessToken: token, issuedAt: h.clock.now))) }
        return try await h.get("/auth/me", headers: headers)
    }

    @Test func aBoundTokenWorksOnlyWithTheDPoPSchemeAndAProofOfItsKey() async throws {
        try await AuthFlowHarness.run(appClientOptions: ", dpop: allowed") { h in
            let key = try DPoPKey()
            let answer = try await logIn(h, key: key)
            #expect(answer.status == 200, "\(answer.body)")
            #expect(answer.json["token_type"] as? String == "DPoP")
            let token = try #require(answer.json["access_token"] as? String)
            let ok = try await me(h, token: token, key: key)
            #expect(ok.status == 200, "\(ok.body)")
            #expect((ok.json["cnf"] as? [String: String])?["jkt"] == key.thumbprint)
            // As a bearer token, without a proof, with another key's proof: 401 with a DPoP challenge.
            let bearer = try await me(h, token: token, key: nil, scheme: "Bearer")
            #expect(bearer.status == 401 && bearer.json["code"] as? String == "invalid_token")
            #expect(bearer.header("WWW-Authenticate")?.hasPrefix(#"DPoP realm="tokengate", error="invalid_token", algs="ES256"#) == true)
            let noProof = try await me(h, token: token, key: nil)
            #expect(noProof.status == 401 && noProof.json["code"] as? String == "invalid_dpop_proof")
            let otherKey = try await me(h, token: token, key: try DPoPKey())
            #expect(otherKey.status == 401 && otherKey.json["code"] as? String == "invalid_dpop_proof")
            // A proof is good once.
            let proof = try key.proof("GET", h.issuer + "/auth/me", accessToken: token)
            let headers = ["Authorization: DPoP \(token)", "DPoP: \(proof)"]
            #expect(try await h.get("/auth/me", headers: headers).status == 200)
            #expect(try await h.get("/auth/me", headers: headers).status == 401)
            // Two DPoP headers are refused.
            let twice = ["Authorization: DPoP \(token)", "DPoP: \(proof)", "DPoP: \(proof)"]
            #expect(try await h.get("/auth/me", headers: twice).json["code"] as? String == "invalid_dpop_proof")
            // A bound session logs out only with its key's proof.
            let logout = try await h.post("/auth/logout", form: [], headers: ["Authorization: DPoP \(token)"])
            #expect(logout.status == 401)
            #expect(try await me(h, token: token, key: key).status == 200)
        }
    }

    @Test func aBoundRefreshTokenRefreshesOnlyWithAProofOfItsKey() async throws {
        try await AuthFlowHarness.run(appClientOptions: ", dpop: allowed") { h in
            let key = try DPoPKey()
            let refresh = try #require(try await logIn(h, key: key).json["refresh_token"] as? String)
            let form = [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", AuthFlowHarness.appClient)]
            let url = h.issuer + "/auth/token"
            let none = try await h.post("/auth/token", form: form)
            #expect(none.status == 400 && none.json["error"] as? String == "invalid_dpop_proof")
            let other = try await h.post("/auth/token", form: form, headers: ["DPoP: " + (try DPoPKey().proof("POST", url))])
            #expect(other.status == 400 && other.json["error"] as? String == "invalid_dpop_proof")
            let wrongURL = try await h.post("/auth/token", form: form, headers: ["DPoP: " + (try key.proof("POST", url + "x"))])
            #expect(wrongURL.status == 400 && wrongURL.json["error"] as? String == "invalid_dpop_proof")
            let good = try await h.post("/auth/token", form: form, headers: ["DPoP: " + (try key.proof("POST", url))])
            #expect(good.status == 200 && good.json["token_type"] as? String == "DPoP", "\(good.body)")
            // The spent token's kept answer (a retry within the grace window) also needs the key's proof.
            let retry = try await h.post("/auth/token", form: form)
            #expect(retry.status == 400 && retry.json["error"] as? String == "invalid_dpop_proof")
            let proven = try await h.post("/auth/token", form: form, headers: ["DPoP: " + (try key.proof("POST", url))])
            #expect(proven.json["access_token"] as? String == good.json["access_token"] as? String)
            let token = try #require(good.json["access_token"] as? String)
            #expect(try await me(h, token: token, key: key).status == 200)
            // Token exchange of a bound subject token needs the key's proof too.
            let exchange = [
                ("grant_type", TokenExchangeRequest.grantType), ("subject_token", token),
                ("subject_token_type", TokenExchangeRequest.accessTokenType), ("scope", "openid"),
            ]
            let unproven = try await h.post("/auth/token", form: exchange)
            #expect(unproven.status == 400 && unproven.json["error"] as? String == "invalid_dpop_proof")
        }
    }

    @Test func anAppThatRequiresDPoPGetsNoTokenWithoutAProofAndOneThatAllowsItGetsBearerTokens() async throws {
        try await AuthFlowHarness.run(appClientOptions: ", dpop: required") { h in
            let refused = try await logIn(h, key: nil)
            #expect(refused.status == 400 && refused.json["error"] as? String == "invalid_dpop_proof")
            let proven = try await logIn(h, key: try DPoPKey())
            #expect(proven.status == 200)
        }
        try await AuthFlowHarness.run(appClientOptions: ", dpop: allowed") { h in
            let answer = try await logIn(h, key: nil)
            #expect(answer.json["token_type"] as? String == "Bearer")
            let token = try #require(answer.json["access_token"] as? String)
            #expect(try await me(h, token: token, key: nil, scheme: "Bearer").status == 200)
            // An unbound token sent as DPoP is refused (no downgrade or upgrade by the caller).
            let asDPoP = try await me(h, token: token, key: try DPoPKey())
            #expect(asDPoP.status == 401 && asDPoP.json["code"] as? String == "invalid_token")
        }
        // Apps without dpop ignore a proof: bearer tokens, as before.
        try await AuthFlowHarness.run { h in
            let ignored = try await logIn(h, key: try DPoPKey())
            #expect(ignored.json["token_type"] as? String == "Bearer")
            let login = AppLogin()
            let code = try await h.handoffCode(login)
            let form = [
                ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
                ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
            ]
            let garbage = try await h.post("/auth/token", form: form, headers: ["DPoP: not-a-proof"])
            #expect(garbage.status == 200 && garbage.json["token_type"] as? String == "Bearer")
        }
    }

    @Test func withNoncesOnTheTokenEndpointHandsOutANonceAndTakesItBack() async throws {
        try await AuthFlowHarness.run(extraConfiguration: "dpop: { require_nonce: true }", appClientOptions: ", dpop: required") { h in
            let key = try DPoPKey()
            let login = AppLogin()
            let code = try await h.handoffCode(login)
            let form = [
                ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
                ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
            ]
            let url = h.issuer + "/auth/token"
            let first = try await h.post("/auth/token", form: form, headers: ["DPoP: " + (try key.proof("POST", url))])
            #expect(first.status == 400 && first.json["error"] as? String == "use_dpop_nonce")
            let nonce = try #require(first.header("DPoP-Nonce"))
            let second = try await h.post("/auth/token", form: form, headers: ["DPoP: " + (try key.proof("POST", url, nonce: nonce))])
            #expect(second.status == 200, "\(second.body)")
            #expect(second.header("DPoP-Nonce") == nonce)
            // At a resource: 401 use_dpop_nonce with the nonce in the challenge's answer, then 200 with it.
            let token = try #require(second.json["access_token"] as? String)
            let me = h.issuer + "/auth/me"
            let without = try await h.get(
                "/auth/me",
                headers: ["Authorization: DPoP \(token)", "DPoP: " + (try key.proof("GET", me, accessToken: token))]
            )
            #expect(without.status == 401 && without.json["code"] as? String == "use_dpop_nonce")
            #expect(without.header("WWW-Authenticate")?.contains(#"error="use_dpop_nonce""#) == true)
            let given = try #require(without.header("DPoP-Nonce"))
            let with = try await h.get(
                "/auth/me",
                headers: ["Authorization: DPoP \(token)", "DPoP: " + (try key.proof("GET", me, accessToken: token, nonce: given))]
            )
            #expect(with.status == 200, "\(with.body)")
        }
    }

    @Test func theAuthorizationServerMetadataListsTheProofAlgorithms() async throws {
        try await AuthFlowHarness.run(extraConfiguration: "dpop: { algorithms: [ES256, EdDSA] }") { h in
            let metadata = try await h.get("/.well-known/oauth-authorization-server").json
            #expect(metadata["dpop_signing_alg_values_supported"] as? [String] == ["ES256", "EdDSA"])
            #expect((metadata["grant_types_supported"] as? [String])?.contains(TransferRedemption.grantType) == true)
        }
    }

    @Test func theProxyNeedsAProofOfTheBoundKeyCheckedOffTheEventLoop() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, appClientOptions: ", dpop: required", transport: .sockets) { h in
            let key = try DPoPKey()
            let token = try #require(try await logIn(h, key: key).json["access_token"] as? String)
            let url = h.issuer + "/api/graph/me"
            func call(_ headers: [String]) async throws -> TestResponse {
                try await h.get("/api/graph/me", headers: ["Authorization: DPoP \(token)"] + headers)
            }
            // The first call loads session and token (the task path); the second has them in
            // memory: its proof is checked and recorded in a task (a signature check and a
            // statement), then the call goes on from the event loop.
            for _ in 0..<2 {
                let ok = try await call(["DPoP: " + (try key.proof("GET", url, accessToken: token))])
                #expect(ok.status == 200, "\(ok.body)")
            }
            // The proof never reaches the API.
            #expect(!h.graph!.received.contains { $0.headerFields.contains { $0.name.canonicalName == "dpop" } })
            let none = try await call([])
            #expect(none.status == 401 && none.header("WWW-Authenticate")?.hasPrefix("DPoP ") == true)
            let other = try await call(["DPoP: " + (try DPoPKey().proof("GET", url, accessToken: token))])
            #expect(other.status == 401 && other.json["code"] as? String == "invalid_dpop_proof")
            let bearer = try await h.get("/api/graph/me", bearer: token)
            #expect(bearer.status == 401 && bearer.json["code"] as? String == "invalid_token")
            let scrape = try await h.scrapeMetrics()
            #expect(scrape.contains(#"tokengate_proxy_calls_total{path="task"} 1"#), "\(scrape)")
            #expect(scrape.contains(#"tokengate_proxy_calls_total{path="loop"} 1"#), "\(scrape)")
        }
    }

    @Test func aProofUsedOnOneInstanceIsRefusedOnAnother() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, appClientOptions: ", dpop: required", transport: .sockets) { h in
            let key = try DPoPKey()
            let token = try #require(try await logIn(h, key: key).json["access_token"] as? String)
            let second = try await h.startInstance()
            for path in ["/auth/me", "/api/graph/me"] {
                let headers = [
                    "Authorization: DPoP \(token)",
                    "DPoP: " + (try key.proof("GET", h.issuer + path, accessToken: token, issuedAt: h.clock.now)),
                ]
                let first = try await h.get(path, headers: headers)
                #expect(first.status == 200, "\(path): \(first.body)")
                // The same proof and token sent to another instance, with another query.
                let replayed = try await h.get(path, query: [("replayed", "1")], headers: headers, at: second)
                #expect(replayed.status == 401, "\(path): \(replayed.body)")
                #expect(replayed.json["detail"] as? String == "This DPoP proof was used before: make a new proof (a new jti) for each request.")
                let fresh = [
                    "Authorization: DPoP \(token)",
                    "DPoP: " + (try key.proof("GET", h.issuer + path, accessToken: token, issuedAt: h.clock.now)),
                ]
                #expect(try await h.get(path, headers: fresh, at: second).status == 200)
            }
            await second.stop()
        }
    }

    @Test func aFloodOfProofsWithMadeUpGrantsLeavesAnAuthenticCallItsPlace() async throws {
        try await AuthFlowHarness.run(extraConfiguration: "dpop: { replay_cache_entries: 1000 }", appClientOptions: ", dpop: allowed") { h in
            let key = try DPoPKey()
            let login = try await logIn(h, key: key)
            let refresh = try #require(login.json["refresh_token"] as? String)
            let url = h.issuer + "/auth/token"
            // Anyone can make a key and proofs for the public client_id: more proofs than the
            // replay memory holds, each with a made-up refresh token. (Proofs are made at the
            // harness's time: the flood takes longer than the 5 s a proof may be ahead.)
            let attacker = try DPoPKey()
            for _ in 0..<1_100 {
                let form = [("grant_type", "refresh_token"), ("refresh_token", OpaqueToken.mint().value), ("client_id", AuthFlowHarness.appClient)]
                let answer = try await h.post(
                    "/auth/token",
                    form: form,
                    headers: ["DPoP: " + (try attacker.proof("POST", url, issuedAt: h.clock.now))]
                )
                #expect(answer.status == 400 && answer.json["error"] as? String == "invalid_grant")
            }
            let form = [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", AuthFlowHarness.appClient)]
            let good = try await h.post("/auth/token", form: form, headers: ["DPoP: " + (try key.proof("POST", url, issuedAt: h.clock.now))])
            #expect(good.status == 200, "\(good.body)")
            let token = try #require(good.json["access_token"] as? String)
            #expect(try await me(h, token: token, key: key).status == 200)
        }
    }

    @Test func aSessionBoundBeforeItsAppTurnedDPoPOffKeepsItsBindingOrEnds() async throws {
        try await AuthFlowHarness.run(appClientOptions: ", dpop: allowed") { h in
            let key = try DPoPKey()
            let bound = try await logIn(h, key: key)
            let other = try await logIn(h, key: key)
            // The operator turns the app's DPoP off (an instance started with the new setting).
            let off = try await h.startInstance { configuration in
                for index in configuration.clients.indices { configuration.clients[index].dpop = "off" }
            }
            let url = h.issuer + "/auth/token"
            func refresh(_ tokens: TestResponse, proof: Bool) async throws -> TestResponse {
                let form = [
                    ("grant_type", "refresh_token"), ("refresh_token", try #require(tokens.json["refresh_token"] as? String)),
                    ("client_id", AuthFlowHarness.appClient),
                ]
                return await off.client.post(
                    "/auth/token",
                    form: form,
                    headers: proof ? [.dpop: try key.proof("POST", url, issuedAt: h.clock.now)] : [:]
                )
            }
            // An app that still sends proofs keeps its bound session, and its tokens stay bound.
            let kept = try await refresh(bound, proof: true)
            #expect(kept.status == 200 && kept.json["token_type"] as? String == "DPoP", "\(kept.body)")
            let token = try #require(kept.json["access_token"] as? String)
            let headers = [
                "Authorization: DPoP \(token)",
                "DPoP: " + (try key.proof("GET", h.issuer + "/auth/me", accessToken: token, issuedAt: h.clock.now)),
            ]
            #expect(try await h.get("/auth/me", headers: headers, at: off).status == 200)
            // One that sends none any more gets invalid_grant (sign in again), and the session is over.
            let ended = try await refresh(other, proof: false)
            #expect(ended.status == 400 && ended.json["error"] as? String == "invalid_grant", "\(ended.body)")
            let again = try await refresh(other, proof: true)
            #expect(again.status == 400 && again.json["error"] as? String == "invalid_grant", "\(again.body)")
            await off.stop()
        }
    }
}

extension HTTPField.Name {
    static let dpop = HTTPField.Name("DPoP")!
}

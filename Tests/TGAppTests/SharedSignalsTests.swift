import Foundation
import HTTPTypes
import TGApp
import TGAppTesting
import TGAuth
import TGBase
import TGPostgres
import TGTesting
import Testing

/// `POST /auth/ssf/{provider}` (RFC 8935 push of OpenID Shared Signals Framework 1.0 security
/// event tokens): CAEP and RISC events the fake provider signs (or forges), pushed as a
/// transmitter pushes them.
@Suite struct SharedSignalsTests {
    static let path = "/auth/ssf/fake"
    static let on = ", shared_signals: true"
    typealias Event = FakeIdentityProvider.SecurityEvent

    /// POSTs `token` as a transmitter does (RFC 8935 §2.1) to `instance` (nil: the first).
    static func push(
        _ token: String,
        _ harness: AuthFlowHarness,
        at instance: AuthFlowHarness.Instance? = nil,
        contentType: String? = "application/secevent+jwt",
        authorization: String? = nil
    ) async -> TestResponse {
        var fields = HTTPFields()
        if let contentType { fields[.contentType] = contentType }
        if let authorization { fields[.authorization] = authorization }
        return await (instance?.client ?? harness.client).execute(uri: path, method: .post, headers: fields, body: Array(token.utf8))
    }

    static func value(_ harness: AuthFlowHarness, _ name: String, _ labels: [String: String]) async throws -> Double? {
        MetricsTests.value(try await MetricsTests.parse(try await harness.scrapeMetrics()), name, labels)
    }

    @Test func aSessionRevokedEventEndsTheSubjectsSessionsAndIsAnswered202WithoutLoggingTheToken() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let other = try #require(try await harness.logIn(as: "bob")["access_token"] as? String)
            let set = try harness.fake.securityEventToken([Event.sessionRevoked], subject: "alice")
            let answer = await Self.push(set, harness)
            #expect(answer.status == 202, "\(answer.body)")
            #expect(answer.bytes.isEmpty)
            #expect(try await harness.get("/auth/me", bearer: token).status == 401)
            #expect(try await harness.get("/auth/me", bearer: other).status == 200)
            let logged = harness.logs.lines.joined(separator: "\n")
            #expect(logged.contains("security event token") && logged.contains("session_revoked=ended"))
            #expect(!logged.contains(set))
            let labels = ["provider": "fake", "event": "session_revoked", "outcome": "ended"]
            #expect(try await Self.value(harness, "tokengate_security_events_total", labels) == 1)
            #expect(try await Self.value(harness, "tokengate_security_event_tokens_total", ["provider": "fake", "outcome": "accepted"]) == 1)
        }
    }

    @Test func credentialChangeAndTheRISCEventsEndSessionsAndRevokeTheGrantAtTheProvider() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            let events = [Event.credentialChange, Event.accountDisabled, Event.accountPurged, Event.sessionsRevoked]
            for (index, event) in events.enumerated() {
                let token = try #require(try await harness.logIn()["access_token"] as? String)
                let answer = await Self.push(try harness.fake.securityEventToken([event], subject: "alice"), harness)
                #expect(answer.status == 202, "\(event): \(answer.body)")
                #expect(try await harness.get("/auth/me", bearer: token).status == 401, "\(event)")
                #expect(harness.fake.revokedTokens.count == index + 1, "\(event)")
                #expect(try await harness.count("SELECT count(*) AS n FROM accounts") == 0, "\(event)")
                let label = String(event.split(separator: "/").last!).replacingOccurrences(of: "-", with: "_")
                #expect(
                    try await Self.value(harness, "tokengate_security_events_total", ["provider": "fake", "event": label, "outcome": "ended"]) == 1
                )
            }
        }
    }

    /// The provider says the claims of alice's tokens changed: every instance drops the API
    /// token it holds, and the next call through the proxy refreshes it; the session lives on.
    @Test func aTokenClaimsChangeEventDropsTheCachedUpstreamTokensOnEveryInstanceSoTheNextCallRefreshes() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on, withGraphAPI: true, upstreamOptions: UpstreamTokenTests.graph) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let second = try await harness.startInstance()
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            #expect(try await harness.get("/api/graph/me", bearer: token, at: second).status == 200)
            #expect(second.auth.cache.counts.tokens == 1)
            let before = harness.fake.refreshCount
            let answer = await Self.push(try harness.fake.securityEventToken([Event.tokenClaimsChange], subject: "alice"), harness)
            #expect(answer.status == 202, "\(answer.body)")
            #expect(try await harness.count("SELECT count(*) AS n FROM upstream_access_tokens") == 0)
            try await eventually("instance B drops the token") { second.auth.cache.counts.tokens == 0 }
            #expect(try await harness.get("/api/graph/me", bearer: token, at: second).status == 200)
            #expect(harness.fake.refreshCount == before + 1)
            // The first instance finds the refreshed token stored: no second refresh.
            #expect(try await harness.get("/api/graph/me", bearer: token).status == 200)
            #expect(harness.fake.refreshCount == before + 1)
            #expect(try await harness.get("/auth/me", bearer: token).status == 200)
            let labels = ["provider": "fake", "event": "token_claims_change", "outcome": "tokens_dropped"]
            #expect(try await Self.value(harness, "tokengate_security_events_total", labels) == 1)
            await second.stop()
        }
    }

    @Test func verificationUnknownEventsAndSubjectsThatNameNoAccountAreAcknowledgedAndLogged() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let unknown = "https://schemas.example.com/secevent/event-type/mood-change"
            let email = ["format": "email", "email": "alice@example.com"]
            let sets = [
                try harness.fake.securityEventToken([Event.verification], claims: ["sub_id": ["format": "opaque", "id": "stream-1"]]),
                try harness.fake.securityEventToken([unknown], subject: "alice"),
                try harness.fake.securityEventToken([Event.sessionRevoked], claims: ["sub_id": email]),
                try harness.fake.securityEventToken([Event.sessionRevoked]),
                try harness.fake.securityEventToken([Event.sessionRevoked], subject: "carol"),
            ]
            for set in sets {
                let answer = await Self.push(set, harness)
                #expect(answer.status == 202, "\(answer.body)")
            }
            #expect(try await harness.get("/auth/me", bearer: token).status == 200)
            #expect(harness.logs.lines.joined(separator: "\n").contains(unknown))
            let expected = [
                ("verification", "acknowledged", 1.0), ("unknown", "acknowledged", 1), ("session_revoked", "unmapped_subject", 2),
                ("session_revoked", "no_match", 1),
            ]
            for (event, outcome, count) in expected {
                let labels = ["provider": "fake", "event": event, "outcome": outcome]
                #expect(try await Self.value(harness, "tokengate_security_events_total", labels) == count, "\(event) \(outcome)")
            }
        }
    }

    /// SSF 1.0 subjects at the top level (`sub_id`: `iss_sub`, or a `complex` subject's `user`),
    /// a plain `sub`, and the event's own `subject` member of the drafts before SSF 1.0.
    @Test func theSubjectIsFoundInEveryFormTransmittersSend() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            let issuer = harness.fake.issuer
            let alice: [String: any Sendable] = ["format": "iss_sub", "iss": issuer, "sub": "alice"]
            let complex: [String: any Sendable] = ["format": "complex", "user": alice]
            let forms: [(String, String)] = [
                ("complex", try harness.fake.securityEventToken([Event.sessionRevoked], claims: ["sub_id": complex])),
                ("sub", try harness.fake.securityEventToken([Event.sessionRevoked], claims: ["sub": "alice"])),
                ("event subject", try harness.fake.securityEventToken([Event.sessionRevoked], payload: ["subject": alice])),
            ]
            for (name, set) in forms {
                let token = try #require(try await harness.logIn()["access_token"] as? String)
                #expect(await Self.push(set, harness).status == 202, "\(name)")
                #expect(try await harness.get("/auth/me", bearer: token).status == 401, "\(name)")
            }
        }
    }

    /// CAEP `session-revoked` naming the provider session (a `complex` subject's `session`, in
    /// `sub_id` or in the event's `subject`) ends only the sessions that login started; the
    /// account-wide events end them all.
    @Test func aSessionRevokedEventNamingTheProviderSessionEndsOnlyThatLoginsSessions() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            let issuer = harness.fake.issuer
            let alice: [String: any Sendable] = ["format": "iss_sub", "iss": issuer, "sub": "alice"]
            let phone = try #require(try await harness.logIn()["access_token"] as? String)
            let tablet = try #require(try await harness.logIn()["access_token"] as? String)
            let laptop = try #require(try await harness.logIn()["access_token"] as? String)
            let sids = harness.fake.sessionIDs(of: "alice")
            try #require(sids.count == 3)
            func session(_ sid: String) -> [String: any Sendable] {
                ["format": "complex", "user": alice, "session": ["format": "opaque", "id": sid] as [String: any Sendable]]
            }
            let bySubID = try harness.fake.securityEventToken([Event.sessionRevoked], claims: ["sub_id": session(sids[0])])
            #expect(await Self.push(bySubID, harness).status == 202)
            #expect(try await harness.get("/auth/me", bearer: phone).status == 401)
            #expect(try await harness.get("/auth/me", bearer: tablet).status == 200)
            let byEvent = try harness.fake.securityEventToken([Event.sessionRevoked], payload: ["subject": session(sids[1])])
            #expect(await Self.push(byEvent, harness).status == 202)
            #expect(try await harness.get("/auth/me", bearer: tablet).status == 401)
            #expect(try await harness.get("/auth/me", bearer: laptop).status == 200)
            // credential-change is about the account: every session goes, whatever session it names.
            let change = try harness.fake.securityEventToken([Event.credentialChange], claims: ["sub_id": session(sids[0])])
            #expect(await Self.push(change, harness).status == 202)
            #expect(try await harness.get("/auth/me", bearer: laptop).status == 401)
        }
    }

    /// A login waiting to be redeemed: after `session-revoked` its code starts no session; after
    /// `credential-change` the account goes too, although no session held it, and its grant is
    /// revoked at the provider (the difference between the two).
    @Test func aLoginNotYetRedeemedIsEndedAndOnlyTheGrantRevokingEventsRemoveItsAccount() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            for (event, revokes) in [(Event.sessionRevoked, false), (Event.credentialChange, true)] {
                let login = AuthFlowHarness.AppLogin()
                let code = try await harness.handoffCode(login)
                let answer = await Self.push(try harness.fake.securityEventToken([event], subject: "alice"), harness)
                #expect(answer.status == 202, "\(event): \(answer.body)")
                let form = [
                    ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
                    ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
                ]
                let redeemed = try await harness.post("/auth/token", form: form)
                #expect(redeemed.status == 400 && redeemed.json["error"] as? String == "invalid_grant", "\(event): \(redeemed.body)")
                #expect(try await harness.count("SELECT count(*) AS n FROM accounts") == (revokes ? 0 : 1), "\(event)")
                #expect(harness.fake.revokedTokens.count == (revokes ? 1 : 0), "\(event)")
            }
        }
    }

    @Test func oneTokenPushedToTwoInstancesAtOnceIsActedOnOnce() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let second = try await harness.startInstance()
            let set = try harness.fake.securityEventToken([Event.credentialChange], subject: "alice")
            async let first = Self.push(set, harness)
            async let other = Self.push(set, harness, at: second)
            let statuses = await [first.status, other.status].sorted()
            #expect(statuses == [202, 202])
            #expect(try await harness.get("/auth/me", bearer: token).status == 401)
            #expect(harness.fake.revokedTokens.count == 1)
            await second.stop()
        }
    }

    /// A transmitter with an issuer of its own (`shared_signals_issuer`): its tokens carry that
    /// `iss`, the provider's is refused, and the subjects it names with it are the provider's
    /// accounts. Its keys come from `shared_signals_jwks_uri` when set.
    @Test func aTransmitterWithAnIssuerAndKeysOfItsOwnNamesTheProvidersAccounts() async throws {
        let transmitter = "https://transmitter.example"
        try await AuthFlowHarness.run(providerOptions: Self.on + ", shared_signals_issuer: \"\(transmitter)\"") { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let providers = try harness.fake.securityEventToken([Event.sessionRevoked], subject: "alice")
            let refused = await Self.push(providers, harness)
            #expect(refused.status == 400 && refused.json["err"] as? String == "invalid_issuer")
            let alice: [String: any Sendable] = ["format": "iss_sub", "iss": transmitter, "sub": "alice"]
            let set = try harness.fake.securityEventToken([Event.sessionRevoked], claims: ["iss": transmitter, "sub_id": alice])
            let answer = await Self.push(set, harness)
            #expect(answer.status == 202, "\(answer.body)")
            #expect(try await harness.get("/auth/me", bearer: token).status == 401)
            // A key set at an address that serves none: nothing can be verified (the transmitter retries).
            let keyless = try await harness.startInstance { $0.providers[0].sharedSignalsJWKSURI = harness.fake.issuer + "/no-keys" }
            let unverifiable = try harness.fake.securityEventToken([Event.sessionRevoked], claims: ["iss": transmitter, "sub": "alice"])
            #expect(await Self.push(unverifiable, harness, at: keyless).status == 503)
            await keyless.stop()
            let keyed = try await harness.startInstance { $0.providers[0].sharedSignalsJWKSURI = harness.fake.issuer + "/jwks" }
            #expect(await Self.push(unverifiable, harness, at: keyed).status == 202)
            await keyed.stop()
        }
    }

    /// Each way a security event token can be invalid, with the RFC 8935 §2.4 error it gets.
    static func invalidTokens(_ fake: FakeIdentityProvider) throws -> [(String, String, String)] {
        let now = Int(Date().timeIntervalSince1970)
        let event = Event.sessionRevoked
        func set(
            _ claims: [String: (any Sendable)?] = [:],
            type: String? = "secevent+jwt",
            signing: FakeIdentityProvider.LogoutTokenSigning = .published(),
            audience: String = "tokengate"
        ) throws -> String {
            try fake.securityEventToken([event], subject: "alice", audience: audience, type: type, signing: signing, claims: claims)
        }
        return [
            ("bad signature", "invalid_key", try set(signing: .unpublishedKey())),
            ("unknown kid", "invalid_key", try set(signing: .unpublishedKey(keyID: "rsa-unknown"))),
            ("alg none", "invalid_key", try set(signing: .unsigned)),
            ("HS256 keyed with the public key", "invalid_key", try set(signing: .hmacWithPublishedKey)),
            ("wrong iss", "invalid_issuer", try set(["iss": "http://127.0.0.1:1/elsewhere"])),
            ("wrong aud", "invalid_audience", try set(audience: "another-client")),
            ("missing iat", "invalid_request", try set(["iat": nil])),
            ("iat too old", "invalid_request", try set(["iat": now - 3600])),
            ("iat in the future", "invalid_request", try set(["iat": now + 3600])),
            ("expired", "invalid_request", try set(["iat": now - 200, "exp": now - 100])),
            ("missing jti", "invalid_request", try set(["jti": nil])),
            ("empty jti", "invalid_request", try set(["jti": ""])),
            ("missing events", "invalid_request", try set(["events": nil])),
            ("empty events", "invalid_request", try set(["events": [String: String]()])),
            ("events as a list", "invalid_request", try set(["events": [event]])),
            ("an event payload that is not an object", "invalid_request", try set(["events": [event: "revoked"]])),
            ("sub_id without a format", "invalid_request", try set(["sub_id": ["sub": "alice"]])),
            ("iss_sub without sub", "invalid_request", try set(["sub_id": ["format": "iss_sub", "iss": fake.issuer]])),
            ("an event subject that is not a subject identifier", "invalid_request", try set(["events": [event: ["subject": "alice"]]])),
            (
                "more than 16 events", "invalid_request",
                try set(["events": Dictionary(uniqueKeysWithValues: (0...16).map { ("\(event)-\($0)", [String: String]()) })])
            ),
            ("typ of a logout token", "invalid_request", try set(type: "logout+jwt")),
            ("typ JWT", "invalid_request", try set(type: "JWT")),
            ("not a JWS", "invalid_request", "not.a.jws"),
        ]
    }

    @Test func everyInvalidTokenIsRefusedWithItsRFC8935ErrorAndEndsNothing() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let variants = try Self.invalidTokens(harness.fake)
            for (name, code, set) in variants {
                let answer = await Self.push(set, harness)
                #expect(answer.status == 400, "\(name): \(answer.status) \(answer.body)")
                #expect(answer.header("Content-Type")?.hasPrefix("application/json") == true, "\(name)")
                #expect(answer.json["err"] as? String == code, "\(name): \(answer.body)")
                #expect((answer.json["description"] as? String)?.hasPrefix("The security event token is not valid") == true, "\(name)")
            }
            #expect(try await harness.get("/auth/me", bearer: token).status == 200)
            let invalid = try await Self.value(harness, "tokengate_security_event_tokens_total", ["provider": "fake", "outcome": "invalid"])
            #expect(invalid == Double(variants.count))
        }
    }

    @Test func malformedRequestsAreRefusedWithInvalidRequestAndSpendNothing() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            let valid = try harness.fake.securityEventToken([Event.sessionRevoked], subject: "alice")
            let requests: [(String, String?, [UInt8])] = [
                ("a form", "application/x-www-form-urlencoded", Array("set=\(valid)".utf8)),
                ("JSON", "application/json", Array(#"{"set":"\#(valid)"}"#.utf8)),
                ("no content type", nil, Array(valid.utf8)),
                ("an empty body", "application/secevent+jwt", []),
                ("not UTF-8", "application/secevent+jwt", [0xFF, 0xFE, 0x41]),
                ("a body larger than any token", "application/secevent+jwt", Array(String(repeating: "a", count: 20 * 1024).utf8)),
            ]
            for (name, type, body) in requests {
                var fields = HTTPFields()
                if let type { fields[.contentType] = type }
                let answer = await harness.client.execute(uri: Self.path, method: .post, headers: fields, body: body)
                #expect(answer.status == 400, "\(name): \(answer.status) \(answer.body)")
                #expect(answer.json["err"] as? String == "invalid_request", "\(name)")
            }
            // None of them spent the valid token.
            #expect(await Self.push(valid, harness).status == 202)
        }
    }

    @Test func aTokenDeliveredAgainIsAcknowledgedOnThisInstanceAndOnAnotherAndNotActedOnAgain() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            _ = try await harness.logIn()
            let second = try await harness.startInstance()
            let set = try harness.fake.securityEventToken([Event.sessionRevoked], subject: "alice")
            #expect(await Self.push(set, harness).status == 202)
            // The user signs in again; the transmitter, which lost the 202, sends the token again.
            let token = try #require(try await harness.logIn()["access_token"] as? String)
            let again = await Self.push(set, harness)
            #expect(again.status == 202 && again.body.isEmpty)
            let elsewhere = await Self.push(set, harness, at: second)
            #expect(elsewhere.status == 202)
            #expect(try await harness.get("/auth/me", bearer: token).status == 200, "the new session is not ended by the old token")
            #expect(try await Self.value(harness, "tokengate_security_event_tokens_total", ["provider": "fake", "outcome": "duplicate"]) == 1)
            await second.stop()
        }
    }

    @Test func theConfiguredAuthorizationAndAudienceAreRequired() async throws {
        let options = Self.on + #", shared_signals_authorization: "Bearer push-s3cret", shared_signals_audience: "https://gate.example/ssf""#
        try await AuthFlowHarness.run(providerOptions: options) { harness in
            let set = try harness.fake.securityEventToken([Event.sessionRevoked], subject: "alice", audience: "https://gate.example/ssf")
            for header in [nil, "Bearer push-s3creT", "Bearer push-s3cre", "Bearer push-s3cretx", "push-s3cret"] {
                let answer = await Self.push(set, harness, authorization: header)
                #expect(answer.status == 400 && answer.json["err"] as? String == "authentication_failed", "\(header ?? "none")")
            }
            let clientAudience = try harness.fake.securityEventToken([Event.sessionRevoked], subject: "alice")
            let refused = await Self.push(clientAudience, harness, authorization: "Bearer push-s3cret")
            #expect(refused.status == 400 && refused.json["err"] as? String == "invalid_audience")
            #expect(await Self.push(set, harness, authorization: "Bearer push-s3cret").status == 202)
            #expect(!harness.logs.lines.joined(separator: "\n").contains("push-s3cret"))
        }
    }

    @Test func aProviderWithoutSharedSignalsHasNoEndpointAndOnlyPOSTIsAllowed() async throws {
        try await AuthFlowHarness.run { harness in
            let answer = await Self.push(try harness.fake.securityEventToken([Event.sessionRevoked], subject: "alice"), harness)
            #expect(answer.status == 404 && answer.json["code"] as? String == "not_found")
        }
        try await AuthFlowHarness.run(providerOptions: Self.on) { harness in
            let unknown = await harness.client.execute(
                uri: "/auth/ssf/nobody",
                method: .post,
                headers: [.contentType: "application/secevent+jwt"],
                body: Array(try harness.fake.securityEventToken([Event.sessionRevoked], subject: "alice").utf8)
            )
            #expect(unknown.status == 404)
            #expect(try await harness.get(Self.path).status == 405)
        }
    }

    @Test func aRequestPastTheServersBodyLimitIsRefusedUnread() async throws {
        try await AuthFlowHarness.run(providerOptions: Self.on, transport: .sockets) { harness in
            let arguments = [
                "-i", "-X", "POST", harness.baseURL + Self.path, "-H", "Content-Type: application/secevent+jwt",
                "--data-raw", String(repeating: "a", count: 100 * 1024),
            ]
            let answer = TestResponse(try await curl(arguments))
            #expect(answer.status == 413)
        }
    }

    @Test func theRouteIsRateLimitedPerAddress() async throws {
        try await AuthFlowHarness.run(serverOptions: ", shared_signals_rate_limit_per_minute: 2", providerOptions: Self.on) { harness in
            for _ in 0..<2 { #expect(await Self.push("x", harness).status == 400) }
            let refused = await Self.push("x", harness)
            #expect(refused.status == 429 && refused.header("Retry-After") != nil)
        }
    }
}

import Foundation
import Synchronization
import TGAppTesting
import TGTesting
import Testing
import TokenGateClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app library (`TokenGateClient`, docs/apps.md) against a served gateway over real
/// sockets: the fake provider, PostgreSQL, URLSession. Only the browser and the credential store
/// are the tests' own implementations (Linux has neither `ASWebAuthenticationSession` nor a
/// Keychain).
@Suite struct ClientLibraryTests {
    @Test func anAccountSignsInCallsTheGatewayRefreshesAndLogsOut() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, transport: .sockets) { h in
            let app = AppInstall(h)
            let account = try await app.client.signIn()
            #expect(account.subject == "alice")
            #expect(account.provider == "fake")
            #expect(try await app.client.currentAccount() == account)
            // The login went through the browser with PKCE and a state of the library's own.
            let opened = try #require(app.browser.opened.withLock { $0.first })
            let query = Dictionary(
                uniqueKeysWithValues: (URLComponents(url: opened, resolvingAgainstBaseURL: false)?.queryItems ?? []).map { ($0.name, $0.value ?? "") }
            )
            #expect(query["code_challenge_method"] == "S256")
            #expect(query["code_challenge"]?.count == 43)
            #expect((query["state"] ?? "").count >= 32)
            // The refresh token and device secret are stored; the access token is not.
            let stored = String(decoding: try #require(app.credentials.data(for: "tokengate.state")), as: UTF8.self)
            #expect(stored.contains("refresh_token") && stored.contains("device_secret"))
            let first = try await app.client.accessToken()
            #expect(!stored.contains(first.value))

            let (me, meAnswer) = try await app.client.data(for: app.request(h, "/auth/me"))
            #expect(meAnswer.status == 200)
            #expect(object(me)["subject"] as? String == "alice")
            let (api, apiAnswer) = try await app.client.data(for: app.request(h, "/api/graph/me"))
            #expect(apiAnswer.status == 200)
            #expect(object(api)["id"] as? String == "alice")
            #expect(app.transport.count("refresh_token") == 0, "a token in memory is used as long as it is good")

            // Past its expiry less the margin: one refresh, both tokens rotate.
            app.clock.advance(by: 900 - 20)
            let second = try await app.client.accessToken()
            #expect(second.value != first.value)
            #expect(app.transport.count("refresh_token") == 1)
            #expect(try await app.client.accessToken() == second)

            let logout = try await app.client.logOut(.device)
            #expect(logout.sessionsEnded == 1)
            #expect(logout.accountsRemoved == 1)
            #expect(try await app.client.accounts().isEmpty)
            #expect(try await h.get("/auth/me", bearer: second.value).status == 401)
        }
    }

    @Test func aSecondAccountJoinsTheDeviceAndEachHasItsOwnTokens() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let app = AppInstall(h)
            let alice = try await app.client.signIn()
            app.browser.user.withLock { $0 = "bob" }
            let bob = try await app.client.signIn(provider: "fake", loginHint: "bob")
            #expect(bob.subject == "bob")
            #expect(try await app.client.accounts() == [alice, bob])
            // The provider and the login hint went to the gateway's login as given.
            let second = try #require(app.browser.opened.withLock { $0.last })
            let query = URLComponents(url: second, resolvingAgainstBaseURL: false)?.queryItems ?? []
            #expect(query.contains(URLQueryItem(name: "provider", value: "fake")))
            #expect(query.contains(URLQueryItem(name: "login_hint", value: "bob")))
            #expect(try await app.client.currentAccount() == bob)
            // The second sign-in carried the device secret: the gateway lists both on one device.
            let listed = try await app.client.accountsOnGateway()
            #expect(Set(listed.map(\.subject)) == ["alice", "bob"])
            let aliceToken = try await app.client.accessToken(for: alice.id)
            let bobToken = try await app.client.accessToken(for: bob.id)
            #expect(aliceToken != bobToken)
            try await app.client.switchAccount(to: alice.id)
            let (me, _) = try await app.client.data(for: app.request(h, "/auth/me"))
            #expect(object(me)["subject"] as? String == "alice")
            // Logging one account out leaves the other signed in.
            try await app.client.logOut(.account(alice.id))
            #expect(try await app.client.accounts() == [bob])
            let (still, answer) = try await app.client.data(for: app.request(h, "/auth/me"))
            #expect(answer.status == 200)
            #expect(object(still)["subject"] as? String == "bob")
        }
    }

    @Test func aHundredCallersAtOnceShareOneRefresh() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let app = AppInstall(h)
            let account = try await app.client.signIn()
            app.clock.advance(by: 3600)
            let tokens = try await withThrowingTaskGroup(of: AccessToken.self) { group in
                for _ in 0..<100 { group.addTask { try await app.client.accessToken(for: account.id) } }
                return try await group.reduce(into: [AccessToken]()) { $0.append($1) }
            }
            #expect(tokens.count == 100)
            #expect(Set(tokens.map(\.value)).count == 1)
            #expect(app.transport.count("refresh_token") == 1)
            #expect(try await h.get("/auth/me", bearer: tokens[0].value).status == 200)
        }
    }

    @Test func aRefreshWhoseAnswerWasLostAfterTheGatewayRotatedIsRetriedWithinTheGrace() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let app = AppInstall(h)
            try await app.client.signIn()
            let before = String(decoding: try #require(app.credentials.data(for: "tokengate.state")), as: UTF8.self)
            app.clock.advance(by: 3600)
            app.transport.loseAnswers(of: "refresh_token")
            let token = try await app.client.accessToken()
            // Two requests with the same refresh token: the gateway rotated on the first and gave
            // the same answer to the second, within its replay grace.
            #expect(app.transport.count("refresh_token") == 2)
            #expect(try await h.get("/auth/me", bearer: token.value).status == 200)
            let after = String(decoding: try #require(app.credentials.data(for: "tokengate.state")), as: UTF8.self)
            #expect(after != before, "the rotated refresh token is stored")
            // And the stored one works: the grant was not lost.
            app.clock.advance(by: 3600)
            let next = try await app.client.accessToken()
            #expect(next != token)
            #expect(try await h.get("/auth/me", bearer: next.value).status == 200)
        }
    }

    @Test func aSignInWhoseRedemptionAnswerWasLostIsNotRedeemedTwiceAndCanStartOver() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let app = AppInstall(h)
            app.transport.loseAnswers(of: "authorization_code")
            // The handoff code works once: the network's failure goes to the app as it is,
            // rather than a second redemption the gateway must refuse.
            await #expect(throws: URLError.self) { try await app.client.signIn() }
            #expect(app.transport.count("authorization_code") == 1)
            let none = try await app.client.accounts()
            #expect(none.isEmpty)
            let account = try await app.client.signIn()
            #expect(account.subject == "alice")
            #expect(app.transport.count("authorization_code") == 2)
        }
    }

    @Test func aRotatedRefreshTokenThatCouldNotBeStoredIsNeverUsedAndTheGrantSurvives() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let store = FlakyCredentialStore()
            let app = AppInstall(h)
            let client = TokenGateClient(
                configuration: app.client.configuration,
                browser: app.browser,
                credentials: store,
                transport: app.transport,
                now: app.clock.now
            )
            try await client.signIn()
            let stored = try #require(try store.data(for: "tokengate.state"))
            app.clock.advance(by: 3600)
            // The gateway rotates, but the new refresh token cannot be kept: the new access
            // token is not handed out either (it would outlive the grant it came with).
            store.failsWrites.withLock { $0 = true }
            await #expect(throws: FlakyCredentialStore.WriteFailed.self) { _ = try await client.accessToken() }
            #expect(try store.data(for: "tokengate.state") == stored)
            // Once the store works again, the old refresh token, still kept, gets the same answer
            // within the gateway's replay grace: the grant was not lost.
            store.failsWrites.withLock { $0 = false }
            let token = try await client.accessToken()
            #expect(app.transport.count("refresh_token") == 2)
            #expect(try await h.get("/auth/me", bearer: token.value).status == 200)
            #expect(try store.data(for: "tokengate.state") != stored)
        }
    }

    @Test func aGrantRevokedAtTheProviderIsSignInRequiredAndTheAccountIsForgotten() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/me\"]", transport: .sockets) { h in
            let app = AppInstall(h)
            let account = try await app.client.signIn()
            h.fake.revokeAllTokens(for: "alice")
            let error = await #expect(throws: TokenGateClientError.self) {
                _ = try await app.client.data(for: app.request(h, "/api/graph/me"))
            }
            guard case .signInRequired(let id, let provider, _) = error else {
                Issue.record("not signInRequired: \(String(describing: error))")
                return
            }
            #expect(id == account.id)
            #expect(provider == "fake", "the provider to sign in with again")
            #expect(try await app.client.accounts().isEmpty)
            await #expect(throws: TokenGateClientError.signInRequired(account: nil, provider: nil, loginHint: nil)) {
                _ = try await app.client.accessToken()
            }
        }
    }

    @Test func anAPIsRefusalGetsOneRefreshAndOneRetry() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, transport: .sockets) { h in
            let app = AppInstall(h)
            try await app.client.signIn()
            // A POST refused by the API comes back from the gateway as it is (it retries only
            // idempotent calls): the library refreshes once and sends it once more.
            h.graph!.rejectNextTokens(1)
            let (_, answer) = try await app.client.data(for: app.request(h, "/api/graph/echo", method: "POST", body: "{}"))
            #expect(answer.status == 200)
            #expect(app.transport.count("refresh_token") == 1)
            #expect(app.transport.calls(to: "/api/graph/echo").count == 2)
            // An API that keeps refusing: one refresh, one retry, and its 401 to the app.
            h.graph!.rejectNextTokens(10)
            let (_, refused) = try await app.client.data(for: app.request(h, "/api/graph/echo", method: "POST", body: "{}"))
            #expect(refused.status == 401)
            #expect(app.transport.count("refresh_token") == 2)
            #expect(app.transport.calls(to: "/api/graph/echo").count == 4)
        }
    }

    @Test func noTokenIsEverSentToAnotherOrigin() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let app = AppInstall(h)
            try await app.client.signIn()
            let base = try #require(URL(string: h.baseURL))
            let port = try #require(base.port)
            let others = [
                "http://127.0.0.2:\(port)/auth/me",  // another host
                "http://127.0.0.1:\(port + 1)/auth/me",  // another port
                "https://127.0.0.1:\(port)/auth/me",  // another scheme
                "http://127.0.0.1.evil.example:\(port)/auth/me",
            ]
            let sentBefore = app.transport.sent.count
            for other in others {
                let url = try #require(URL(string: other))
                await #expect(throws: TokenGateClientError.foreignOrigin(url)) {
                    _ = try await app.client.data(for: URLRequest(url: url))
                }
            }
            #expect(app.transport.sent.count == sentBefore, "nothing was sent")
            #expect(app.transport.sent.allSatisfy { $0.url.host == "127.0.0.1" && $0.url.port == port })
        }
    }

    @Test func anAPIsRedirectElsewhereComesBackUnfollowedAndTheGatewaysOwnIsFollowed() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, transport: .sockets) { h in
            let foreign = try FakeGraphAPI { _ in "anyone" }
            defer { Task { await foreign.stop() } }
            let app = AppInstall(h)
            try await app.client.signIn()
            let away = foreign.baseURL + "/me"
            let escaped = try #require(away.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
            let (_, answer) = try await app.client.data(for: app.request(h, "/api/graph/redirect?to=\(escaped)"))
            #expect(answer.status == 302)
            #expect(answer.value(forHTTPHeaderField: "Location") == away)
            #expect(foreign.received.isEmpty, "nothing, and no token, went to the other origin")
            // A redirect the gateway rewrote to itself (the API pointing at itself) is followed,
            // with the token, to the gateway.
            let own = try #require((h.graph!.apiURL + "/me").addingPercentEncoding(withAllowedCharacters: .alphanumerics))
            let (me, followed) = try await app.client.data(for: app.request(h, "/api/graph/redirect?to=\(own)"))
            #expect(followed.status == 200)
            #expect(object(me)["id"] as? String == "alice")
            #expect(app.transport.calls(to: "/api/graph/me").count == 1)
        }
    }
}

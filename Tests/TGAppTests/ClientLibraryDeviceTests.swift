import Foundation
import Synchronization
import TGAppTesting
import TGPostgres
import TGTesting
import Testing
import TokenGateClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app library's DPoP, transfer codes, logouts and failures, against a served gateway over
/// real sockets (``ClientLibraryTests`` has the sign-in and the tokens).
@Suite struct ClientLibraryDeviceTests {
    @Test func tokensAreBoundToTheInstallsKeyAndANonceChallengeIsAnsweredOnce() async throws {
        try await AuthFlowHarness.run(
            extraConfiguration: "dpop: { require_nonce: true }",
            withGraphAPI: true,
            appClientOptions: ", dpop: required",
            transport: .sockets
        ) { h in
            let app = AppInstall(h, usesDPoP: true)
            try await app.client.signIn()
            // The first redemption's proof had no nonce: the gateway asked for one, the library
            // sent the same request once more with it.
            let redemptions = app.transport.sent.filter { $0.grantType == "authorization_code" }
            #expect(redemptions.count == 2)
            #expect(redemptions.allSatisfy { $0.dpop != nil })
            #expect(try claims(of: redemptions[0].dpop)["nonce"] == nil)
            #expect(try claims(of: redemptions[1].dpop)["nonce"] != nil)
            let token = try await app.client.accessToken()
            #expect(token.isDPoPBound)
            let (me, answer) = try await app.client.data(for: app.request(h, "/auth/me"))
            #expect(answer.status == 200, "\(String(decoding: me, as: UTF8.self))")
            #expect((object(me)["cnf"] as? [String: Any])?["jkt"] != nil)
            let (graph, graphAnswer) = try await app.client.data(for: app.request(h, "/api/graph/me?select=id"))
            #expect(graphAnswer.status == 200, "\(String(decoding: graph, as: UTF8.self))")
            // Each proof is for its request: method, URL without the query, the token's hash.
            let call = try #require(app.transport.calls(to: "/api/graph/me").last)
            let proof = try claims(of: call.dpop)
            #expect(proof["htm"] as? String == "GET")
            #expect(proof["htu"] as? String == h.baseURL + "/api/graph/me")
            #expect(proof["ath"] as? String != nil)
            #expect(call.authorization == "DPoP " + token.value)
            // Copied without the key, the token is refused.
            #expect(try await h.get("/auth/me", bearer: token.value).status == 401)
        }
    }

    @Test func aFreshInstallComesBackWithTheTransferCodeAfterTheCredentialStoreIsLost() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let credentials = InMemoryCredentialStore()
            let app = AppInstall(h, credentials: credentials)
            let alice = try await app.client.signIn()
            // The gateway orders restored accounts by when they signed in (its clock is the test's).
            h.clock.advance(by: 1)
            app.browser.user.withLock { $0 = "bob" }
            let bob = try await app.client.signIn()
            let kept = try await app.client.prepareTransferCode()
            #expect(try app.transfers.load() == kept)
            let oldToken = try await app.client.accessToken(for: alice.id)

            // The Keychain is gone; the transfer store survived. A new install of the app:
            credentials.removeAll()
            let fresh = AppInstall(h, credentials: credentials, transfers: app.transfers)
            #expect(try await fresh.client.accounts().isEmpty)
            let restore = try await fresh.client.restoreFromTransferCode()
            #expect(restore.restored.map(\.id) == [alice.id, bob.id])
            #expect(restore.signInRequired.isEmpty)
            #expect(try await fresh.client.accounts().map(\.id) == [alice.id, bob.id])
            #expect(try fresh.transfers.load() == nil, "the code is spent")
            let (me, answer) = try await fresh.client.data(for: fresh.request(h, "/auth/me"), account: bob.id)
            #expect(answer.status == 200)
            #expect(object(me)["subject"] as? String == "bob")
            // The old install's sessions ended.
            #expect(try await h.get("/auth/me", bearer: oldToken.value).status == 401)
            await #expect(throws: TokenGateClientError.noTransferCode) { _ = try await fresh.client.restoreFromTransferCode() }
        }
    }

    @Test func aTransferCodeRestoresOnlyWhatIsStillSignedInAndNamesTheRest() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let credentials = InMemoryCredentialStore()
            let app = AppInstall(h, credentials: credentials)
            let alice = try await app.client.signIn()
            app.browser.user.withLock { $0 = "bob" }
            let bob = try await app.client.signIn()
            try await app.client.prepareTransferCode()
            try await app.client.logOut(.account(alice.id))
            credentials.removeAll()
            let fresh = AppInstall(h, credentials: credentials, transfers: app.transfers)
            let restore = try await fresh.client.restoreFromTransferCode()
            #expect(restore.restored == [bob])
            // Alice's account left the gateway with her logout: only its id is known.
            #expect(restore.signInRequired.map(\.accountID) == [alice.id])
        }
    }

    @Test func logoutEndsOneAccountTheDeviceOrEverywhere() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            // Alice on two phones, Bob on the first.
            let phone = AppInstall(h)
            let alice = try await phone.client.signIn()
            phone.browser.user.withLock { $0 = "bob" }
            let bob = try await phone.client.signIn()
            let otherPhone = AppInstall(h)
            try await otherPhone.client.signIn()
            let elsewhere = try await otherPhone.client.accessToken()

            let everywhere = try await phone.client.logOut(.everywhere(alice.id))
            #expect(everywhere.sessionsEnded == 2)
            #expect(try await phone.client.accounts() == [bob])
            #expect(try await h.get("/auth/me", bearer: elsewhere.value).status == 401, "Alice's other phone is signed out")
            // The other phone finds out at its next call: sign in again, and the account is gone.
            otherPhone.clock.advance(by: 3600)
            await #expect(throws: TokenGateClientError.self) { _ = try await otherPhone.client.accessToken() }
            #expect(try await otherPhone.client.accounts().isEmpty)

            let device = try await phone.client.logOut(.device)
            #expect(device.sessionsEnded == 1)
            #expect(try await phone.client.accounts().isEmpty)
            let stored = String(decoding: try #require(phone.credentials.data(for: "tokengate.state")), as: UTF8.self)
            #expect(!stored.contains("device_secret"), "a device with no account keeps no secret")
        }
    }

    @Test func aDeviceLogoutGoesThroughWhenTheCurrentAccountIsAlreadyGone() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let phone = AppInstall(h)
            try await phone.client.signIn()
            phone.browser.user.withLock { $0 = "bob" }
            let bob = try await phone.client.signIn()
            let bobsToken = try await phone.client.accessToken(for: bob.id)
            // Bob signs out everywhere from another phone: this phone's Bob session ends, and
            // Bob is still its current account.
            let otherPhone = AppInstall(h)
            otherPhone.browser.user.withLock { $0 = "bob" }
            try await otherPhone.client.signIn()
            try await otherPhone.client.logOut(.everywhere(try #require(try await otherPhone.client.currentAccount()).id))
            #expect(try await h.get("/auth/me", bearer: bobsToken.value).status == 401)
            phone.clock.advance(by: 3600)
            // The device's logout goes with Alice's token instead, and ends her session too.
            let result = try await phone.client.logOut(.device)
            #expect(result.sessionsEnded == 1)
            let left = try await phone.client.accounts()
            #expect(left.isEmpty)
            #expect(try await h.count("SELECT count(*) AS n FROM sessions") == 0)
        }
    }

    @Test func aLogoutInTheBrowserEndsTheProvidersSessionAndComesBackWithItsState() async throws {
        var settings = FakeIdentityProvider.Settings()
        settings.registeredPostLogoutRedirectURIs = []
        let signedOut = "com.example.app:/signed-out"
        try await AuthFlowHarness.run(settings: settings, postLogoutRedirectURIs: [signedOut], transport: .sockets) { h in
            h.fake.configure { $0.registeredPostLogoutRedirectURIs = [h.baseURL + "/auth/logout/return"] }
            let app = AppInstall(h, postLogoutRedirectURI: signedOut)
            try await app.client.signIn()
            let result = try await app.client.logOut(.device, inBrowser: true)
            #expect(result.sessionsEnded == 1)
            #expect(result.endSessionURL == nil, "opened in the browser, not handed back")
            let opened = app.browser.opened.withLock { $0 }
            #expect(opened.count == 2)
            #expect(opened.last?.absoluteString.hasPrefix(h.fake.endSessionEndpoint) == true)
            #expect(h.fake.logoutRequests.count == 1)
            // A way back with another state is not this logout's.
            try await app.client.signIn()
            app.browser.altersNextReturn.withLock { $0 = { replacing("state", with: "another-logout", in: $0) } }
            await #expect(throws: TokenGateClientError.stateMismatch) { try await app.client.logOut(.device, inBrowser: true) }
        }
    }

    @Test func aSignInClosedOrAnsweredForAnotherStateSignsNobodyIn() async throws {
        try await AuthFlowHarness.run(transport: .sockets) { h in
            let app = AppInstall(h)
            app.browser.cancelsNext.withLock { $0 = true }
            await #expect(throws: TokenGateClientError.cancelled) { try await app.client.signIn() }
            let afterCancel = try await app.client.accounts()
            #expect(afterCancel.isEmpty)
            // An answer with another login's state, or from another authorization server: not
            // redeemed (its code stays unused), nobody signed in.
            for (name, value) in [("state", "another-login"), ("iss", "https://evil.example")] {
                app.browser.altersNextReturn.withLock { $0 = { replacing(name, with: value, in: $0) } }
                await #expect(throws: TokenGateClientError.stateMismatch) { try await app.client.signIn() }
            }
            #expect(app.transport.count("authorization_code") == 0)
            let afterMismatch = try await app.client.accounts()
            #expect(afterMismatch.isEmpty)
            // A provider that refuses: its error, typed.
            h.fake.configure { $0.authorizationError = .init(code: "access_denied", description: "The user said no.", status: 302) }
            let refused = await #expect(throws: TokenGateClientError.self) { try await app.client.signIn() }
            guard case .authorizationFailed(let code, _) = refused else {
                Issue.record("not authorizationFailed: \(String(describing: refused))")
                return
            }
            #expect(code == "access_denied")
            let afterRefusal = try await app.client.accounts()
            #expect(afterRefusal.isEmpty)
        }
    }

    @Test func scopesTheProviderRefusedAreConsentRequiredAndTheAccountStays() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: ", path_prefixes: [\"/me\"]", transport: .sockets) { h in
            let app = AppInstall(h)
            let account = try await app.client.signIn()
            h.fake.misbehave(.raw(status: 400, contentType: "application/json", body: #"{"error":"consent_required"}"#), grantType: "refresh_token")
            await #expect(throws: TokenGateClientError.consentRequired(scopes: ["User.Read"])) {
                _ = try await app.client.data(for: app.request(h, "/api/graph/me"))
            }
            let accounts = try await app.client.accounts()
            #expect(accounts == [account])
            let (_, me) = try await app.client.data(for: app.request(h, "/auth/me"))
            #expect(me.status == 200)
        }
    }

    @Test func theGatewayUnableToReachTheProviderIsARetryableError() async throws {
        var settings = FakeIdentityProvider.Settings()
        settings.accessTokenLifetime = .seconds(120)
        try await AuthFlowHarness.run(settings: settings, withGraphAPI: true, transport: .sockets) { h in
            let app = AppInstall(h)
            try await app.client.signIn()
            h.fake.misbehave(.serviceUnavailable(retryAfter: 7), .untilReset, grantType: "refresh_token")
            h.clock.advance(by: 300)
            let error = await #expect(throws: TokenGateClientError.self) {
                _ = try await app.client.data(for: app.request(h, "/api/graph/me"))
            }
            guard case .unavailable(let retryAfter) = error else {
                Issue.record("not unavailable: \(String(describing: error))")
                return
            }
            #expect((retryAfter ?? 0) >= 1)
            #expect(try await app.client.accounts().count == 1, "nobody is signed out")
        }
    }
}

/// The claims of a DPoP proof.
func claims(of proof: String?) throws -> [String: Any] {
    let parts = try #require(proof).split(separator: ".")
    try #require(parts.count == 3)
    var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while payload.count % 4 != 0 { payload += "=" }
    return object(try #require(Data(base64Encoded: payload)))
}

/// `url` with its query parameter `name` set to `value` (added when missing).
@Sendable func replacing(_ name: String, with value: String, in url: URL) -> URL {
    var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
    var items = (components.queryItems ?? []).filter { $0.name != name }
    items.append(URLQueryItem(name: name, value: value))
    components.queryItems = items
    return components.url!
}

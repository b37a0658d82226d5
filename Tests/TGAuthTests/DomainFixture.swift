import Foundation
import Logging
import TGAuth
import TGBase
import TGCrypto
import TGHTTPClient
import TGOIDC
import TGPostgres
import TGStore
import TGTesting
import Testing

/// The auth flow as a domain, without HTTP on TokenGate's side: an `AuthService` over a fresh
/// migrated database and a fake identity provider (which TokenGate reaches over real HTTP), with
/// a clock the test moves.
struct DomainFixture {
    static let app = "com.example.app"
    static let appRedirect = "com.example.app:/oauth2redirect"
    /// A second registered app (what one app's credentials must not open).
    static let otherApp = "com.example.other"
    static let callback = "https://gw.example/auth/callback"

    let auth: AuthService
    let fake: FakeIdentityProvider
    let http: HTTPClient
    let clock: ManualClock
    var store: Store { auth.store }

    static func run(settings: AuthSettings = AuthSettings(), _ body: (DomainFixture) async throws -> Void) async throws {
        try await TestDatabase.withFreshDatabase(migrations: SchemaMigrations.all) { database, _ in
            let fake = try FakeIdentityProvider.start()
            fake.registerClient(id: "tokengate", secret: "s3cret", redirectURIs: [callback])
            var httpSettings = HTTPClient.Configuration()
            httpSettings.allowPlainHTTPToLoopbackForTesting = true
            let http = HTTPClient(configuration: httpSettings)
            let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
            let provider = OpenIDProvider(
                configuration: ProviderConfiguration(
                    name: "fake",
                    profile: .openIDConnect(issuer: fake.issuer),
                    clientID: "tokengate",
                    clientAuthentication: .clientSecretBasic(secret: "s3cret"),
                    redirectURI: callback
                ),
                httpClient: http
            )
            let keys = try KeyRing(currentKeyID: "k1", keys: ["k1": try SymmetricKey(bytes: Array(repeating: 7, count: 32))])
            let auth = AuthService(
                store: Store(database: database),
                vault: TokenVault(keyRing: keys),
                providers: [provider],
                clients: [
                    AppClient(clientID: app, redirectURIs: [appRedirect]),
                    AppClient(clientID: otherApp, redirectURIs: ["com.example.other:/oauth2redirect"]),
                ],
                settings: settings,
                issuer: "https://gw.example",
                clock: clock.wallClock,
                logger: .init(label: "tokengate.test")
            )
            let fixture = DomainFixture(auth: auth, fake: fake, http: http, clock: clock)
            do {
                try await body(fixture)
            } catch {
                await fake.stop()
                http.shutdown()
                throw error
            }
            await fake.stop()
            http.shutdown()
        }
    }

    /// A whole login as `user` up to the app's token answer: the app's request, the browser at
    /// the fake provider, the callback, the redemption of the handoff code.
    func logIn(as user: String = "alice", deviceSecret: String? = nil) async throws -> IssuedTokens {
        let verifier = PKCE.makeVerifier()
        return try await auth.redeemHandoff(
            HandoffRedemption(
                code: try await handoffCode(as: user, verifier: verifier),
                codeVerifier: verifier,
                redirectURI: Self.appRedirect,
                clientID: Self.app,
                deviceSecret: deviceSecret
            )
        )
    }

    /// A login as `user` up to the handoff code the app's redirect carries (not redeemed): the
    /// app's request with `verifier`'s challenge, the browser at the fake provider, the callback.
    func handoffCode(as user: String = "alice", verifier: String) async throws -> String {
        let appState = "app-state"
        let url = try await auth.beginLogin(
            try LoginRequest(parameters: [
                ("client_id", Self.app), ("redirect_uri", Self.appRedirect), ("response_type", "code"), ("state", appState),
                ("code_challenge", PKCE.challenge(for: verifier)), ("code_challenge_method", "S256"),
            ])
        )
        fake.configure { $0.fakeUser = user }
        let atProvider = try await fake.followAuthorization(url, using: http)
        let back = try await auth.completeLogin(
            CallbackParameters(parameters: atProvider.parameters.map { (name: $0.key, value: $0.value) })
        )
        let parameters = FakeIdentityProvider.queryParameters(of: back)
        #expect(parameters["state"] == appState)
        return try #require(parameters["code"], "no code: \(back)")
    }
}

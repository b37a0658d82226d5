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

/// The auth flow as a domain, without HTTP on TokenGate's side: the auth flow's pieces (`AuthServices`) over a fresh
/// migrated database and a fake identity provider (which TokenGate reaches over real HTTP), with
/// a clock the test moves.
struct DomainFixture {
    static let app = "com.example.app"
    static let appRedirect = "com.example.app:/oauth2redirect"
    /// A second registered app (what one app's credentials must not open).
    static let otherApp = "com.example.other"
    static let callback = "https://gw.example/auth/callback"

    static let issuer = "https://gw.example"

    let auth: AuthServices
    let fake: FakeIdentityProvider
    let http: HTTPClient
    let clock: ManualClock
    let store: Store
    let vault: TokenVault
    let providers: [OpenIDProvider]
    let clients: [AppClient]
    let settings: AuthSettings

    /// Another instance: its own memory (caches, DPoP replay record), the same database, keys,
    /// providers, apps and clock.
    func anotherInstance(label: String = "tokengate.test.second") -> AuthServices {
        AuthServices(
            store: Store(database: store.database),
            vault: vault,
            providers: providers,
            clients: clients,
            settings: settings,
            issuer: Self.issuer,
            clock: clock.wallClock,
            logger: .init(label: label)
        )
    }

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
            let store = Store(database: database)
            let vault = TokenVault(keyRing: keys)
            let clients = [
                AppClient(clientID: app, redirectURIs: [appRedirect]),
                AppClient(clientID: otherApp, redirectURIs: ["com.example.other:/oauth2redirect"]),
            ]
            let auth = AuthServices(
                store: store,
                vault: vault,
                providers: [provider],
                clients: clients,
                settings: settings,
                issuer: issuer,
                clock: clock.wallClock,
                logger: .init(label: "tokengate.test")
            )
            let fixture = DomainFixture(
                auth: auth,
                fake: fake,
                http: http,
                clock: clock,
                store: store,
                vault: vault,
                providers: [provider],
                clients: clients,
                settings: settings
            )
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
        return try await auth.grants.redeemHandoff(
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
        let url = try await auth.logins.beginLogin(
            try LoginRequest(parameters: [
                ("client_id", Self.app), ("redirect_uri", Self.appRedirect), ("response_type", "code"), ("state", appState),
                ("code_challenge", PKCE.challenge(for: verifier)), ("code_challenge_method", "S256"),
            ])
        )
        fake.configure { $0.fakeUser = user }
        let atProvider = try await fake.followAuthorization(url, using: http)
        let back = try await auth.logins.completeLogin(
            CallbackParameters(parameters: atProvider.parameters.map { (name: $0.key, value: $0.value) })
        )
        let parameters = FakeIdentityProvider.queryParameters(of: back)
        #expect(parameters["state"] == appState)
        return try #require(parameters["code"], "no code: \(back)")
    }
}

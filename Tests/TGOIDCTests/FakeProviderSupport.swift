import Foundation
import TGBase
import TGCrypto
import TGHTTPClient
import TGTesting
import Testing

@testable import TGOIDC

/// A client of a fake identity provider, with the fake's clock and a plain-http client.
struct FakeProviderFixture {
    static let clientID = "tokengate"
    static let secret = "s3cret"
    static let redirectURI = "https://gw.example/auth/callback"

    let fake: FakeIdentityProvider
    let provider: OpenIDProvider
    let http: HTTPClient

    /// Starts a fake and a client of it; `configure` adjusts the client's settings.
    static func start(
        pathPrefix: String = "",
        settings: FakeIdentityProvider.Settings = FakeIdentityProvider.Settings(),
        profile: ((FakeIdentityProvider) -> ProviderProfile)? = nil,
        authentication: ClientAuthentication = .clientSecretBasic(secret: secret),
        configure: (inout ProviderConfiguration) -> Void = { _ in }
    ) throws -> FakeProviderFixture {
        let fake = try FakeIdentityProvider.start(pathPrefix: pathPrefix, settings: settings)
        fake.registerClient(id: clientID, secret: secret, redirectURIs: [redirectURI])
        var httpConfiguration = HTTPClient.Configuration()
        httpConfiguration.allowPlainHTTPToLoopbackForTesting = true
        let http = HTTPClient(configuration: httpConfiguration)
        var configuration = ProviderConfiguration(
            name: "fake",
            profile: profile?(fake) ?? .openIDConnect(issuer: fake.issuer),
            clientID: clientID,
            clientAuthentication: authentication,
            redirectURI: redirectURI
        )
        configure(&configuration)
        let clock = WallClock { fake.now }
        return FakeProviderFixture(fake: fake, provider: OpenIDProvider(configuration: configuration, httpClient: http, clock: clock), http: http)
    }

    /// A whole login: authorization request, the browser step at the fake, code redemption.
    func logIn(_ options: AuthorizationOptions = AuthorizationOptions()) async throws -> OpenIDProvider.Login {
        let (pending, callback) = try await authorize(options)
        return try await provider.redeem(code: try #require(callback["code"]), for: pending, callbackIssuer: callback["iss"])
    }

    /// The authorization request and the callback parameters the fake sent the browser back with.
    func authorize(_ options: AuthorizationOptions = AuthorizationOptions()) async throws -> (PendingAuthorization, [String: String]) {
        let request = try await provider.authorizationRequest(options)
        let result = try await fake.followAuthorization(request.url, using: http)
        #expect(result.parameters["state"] == request.pending.state)
        return (request.pending, result.parameters)
    }

    func stop() async {
        await fake.stop()
        http.shutdown()
    }
}

/// One plain-http-to-loopback client for tests that need no fixture of their own.
let loopbackClient: HTTPClient = {
    var settings = HTTPClient.Configuration()
    settings.allowPlainHTTPToLoopbackForTesting = true
    return HTTPClient(configuration: settings)
}()

/// A client of a provider with `profile` (client `client 1`, secret `s`), over ``loopbackClient``.
func testProvider(_ profile: ProviderProfile, configure: (inout ProviderConfiguration) -> Void = { _ in }) -> OpenIDProvider {
    var configuration = ProviderConfiguration(
        name: "p",
        profile: profile,
        clientID: "client 1",
        clientAuthentication: .clientSecretBasic(secret: "s"),
        redirectURI: "https://gw.example/auth/callback"
    )
    configure(&configuration)
    return OpenIDProvider(configuration: configuration, httpClient: loopbackClient)
}

/// The error `body` threw, as an ``OIDCError`` (nil when it succeeded).
func oidcError(_ body: () async throws -> Void) async -> OIDCError? {
    do {
        try await body()
        return nil
    } catch let error as OIDCError {
        return error
    } catch {
        Issue.record("unexpected error type: \(error)")
        return nil
    }
}

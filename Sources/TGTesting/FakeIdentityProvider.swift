public import Foundation
import HTTPTypes
public import TGCrypto
import TGHTTPServer

/// An OpenID Connect provider for tests, over real HTTP on 127.0.0.1 (plain `http`, a free port).
///
/// It serves discovery, a JWKS (an RSA-2048 key for RS256 and a P-256 key for ES256), an
/// authorization endpoint that logs the ``Settings/fakeUser`` in at once (no HTML; it answers the
/// redirect, or a `form_post` page), a token endpoint (authorization code with mandatory S256
/// PKCE, refresh with rotation; `client_secret_basic`, `client_secret_post`, `private_key_jwt`),
/// revocation (RFC 7009), UserInfo and RP-initiated logout. Every deviation a client must survive
/// is a knob: ``settings``, ``misbehave(_:_:grantType:)``, ``rotateKeys(keepingOldKeys:)``, the
/// clock. Every request is recorded (``requests``).
///
/// ```swift
/// let idp = try FakeIdentityProvider.start(pathPrefix: "/tenant-a/v2.0")
/// idp.registerClient(id: "tokengate", secret: "s3cret")
/// idp.misbehave(.tooManyRequests(retryAfter: 2), grantType: "refresh_token")
/// // … run the client against idp.issuer …
/// await idp.stop()
/// ```
public final class FakeIdentityProvider: Sendable {
    /// `http://127.0.0.1:<port>` followed by the path prefix given at start.
    public let issuer: String
    /// The TCP port the provider listens on.
    public let port: UInt16
    private let server: HTTPServer
    let endpoints: FakeEndpoints

    private init(server: HTTPServer, endpoints: FakeEndpoints, issuer: String) {
        self.server = server
        self.endpoints = endpoints
        self.issuer = issuer
        self.port = server.port
    }

    /// Starts a provider on a free loopback port.
    ///
    /// - Parameters:
    ///   - pathPrefix: appended to `http://127.0.0.1:<port>` to form the issuer (`/tenant-a/v2.0`),
    ///     so several authorities can be told apart; every endpoint lives below it.
    ///   - settings: the initial ``Settings``.
    ///   - freshKeys: whether to generate key material no other provider in this process has. By
    ///     default the material is generated once per process and shared (with new `kid`s per
    ///     provider), since RSA generation costs about a third of a second of CPU. Rotation always
    ///     makes new material.
    ///   - now: the clock every time the fake writes or checks comes from (plus
    ///     ``advanceClock(by:)``).
    public static func start(
        pathPrefix: String = "",
        settings: Settings = Settings(),
        freshKeys: Bool = false,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> FakeIdentityProvider {
        var prefix = pathPrefix
        while prefix.hasSuffix("/") { prefix.removeLast() }
        if !prefix.isEmpty, !prefix.hasPrefix("/") { prefix = "/" + prefix }
        let purpose: SharedKeyMaterial.Purpose? = freshKeys ? nil : .published
        let keys = try [FakeSigningKey.make(.rs256, shared: purpose), FakeSigningKey.make(.es256, shared: purpose)]
        let endpoints = FakeEndpoints(state: Locked(FakeState(settings: settings, keys: keys)), clock: now, pathPrefix: prefix)
        var configuration = HTTPServer.Configuration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.threads = 2
        configuration.drainTimeout = .seconds(2)
        let server = HTTPServer(configuration: configuration) { endpoints.handle($0) }
        try server.start()
        let issuer = "http://127.0.0.1:\(server.port)\(prefix)"
        endpoints.state.withLock { $0.issuer = issuer }
        return FakeIdentityProvider(server: server, endpoints: endpoints, issuer: issuer)
    }

    /// Stops the server (in-flight requests get up to two seconds). Idempotent.
    public func stop() async {
        await server.shutdown()
    }

    // MARK: Endpoints

    /// `<issuer>/.well-known/openid-configuration`.
    public var discoveryURL: String { issuer + "/.well-known/openid-configuration" }
    /// `<issuer>/authorize`.
    public var authorizationEndpoint: String { issuer + "/authorize" }
    /// `<issuer>/token`.
    public var tokenEndpoint: String { issuer + "/token" }
    /// `<issuer>/jwks`.
    public var jwksURI: String { issuer + "/jwks" }
    /// `<issuer>/userinfo`.
    public var userInfoEndpoint: String { issuer + "/userinfo" }
    /// `<issuer>/revoke`.
    public var revocationEndpoint: String { issuer + "/revoke" }
    /// `<issuer>/logout`.
    public var endSessionEndpoint: String { issuer + "/logout" }

    // MARK: Settings and clock

    /// The current settings; assigning (or changing a member) applies from the next request.
    public var settings: Settings {
        get { endpoints.state.withLock { $0.settings } }
        set { endpoints.state.withLock { $0.settings = newValue } }
    }

    /// Changes the settings in one step.
    public func configure(_ change: (inout Settings) -> Void) {
        endpoints.state.withLock { change(&$0.settings) }
    }

    /// Removes a top-level member from the discovery document.
    public func removeDiscoveryMember(_ name: String) {
        endpoints.state.withLock { _ = $0.settings.discoveryOverrides.updateValue(nil, forKey: name) }
    }

    /// Replaces (or adds) a top-level member of the discovery document; `value` must be
    /// JSON-serializable.
    public func overrideDiscoveryMember(_ name: String, with value: any Sendable) {
        endpoints.state.withLock { _ = $0.settings.discoveryOverrides.updateValue(value, forKey: name) }
    }

    /// The fake's time now: the injected clock plus every ``advanceClock(by:)``.
    public var now: Date { endpoints.now() }

    /// Moves the fake's clock (negative moves it back: tokens issued then are already expired
    /// for a client on the real clock).
    public func advanceClock(by offset: Duration) {
        endpoints.state.withLock { $0.clockOffset += offset }
    }

    // MARK: Clients

    /// Registers a confidential client that authenticates with `secret` (Basic or in the form).
    /// `redirectURIs` nil accepts any; `authenticationMethods` nil accepts both secret methods.
    public func registerClient(
        id: String,
        secret: String,
        redirectURIs: [String]? = nil,
        authenticationMethods: Set<ClientAuthenticationMethod>? = nil
    ) {
        let client = FakeClient(id: id, secret: secret, redirectURIs: redirectURIs, methods: authenticationMethods)
        endpoints.state.withLock { $0.clients[id] = client }
    }

    /// Registers a client that authenticates with `private_key_jwt`, verified with `publicKey`.
    public func registerClient(id: String, publicKey: JWK, redirectURIs: [String]? = nil) {
        let client = FakeClient(id: id, publicKey: publicKey, redirectURIs: redirectURIs, methods: [.privateKeyJWT])
        endpoints.state.withLock { $0.clients[id] = client }
    }

    /// Registers a public client (`client_id` only; PKCE is still required).
    public func registerPublicClient(id: String, redirectURIs: [String]? = nil) {
        let client = FakeClient(id: id, redirectURIs: redirectURIs, methods: [.none])
        endpoints.state.withLock { $0.clients[id] = client }
    }

    // MARK: Keys

    /// The keys `/jwks` serves now.
    public var publishedKeys: JWKSet {
        endpoints.state.withLock { JWKSet(keys: $0.keys.map(\.jwk)) }
    }

    /// The `kid` of the key that signs ID tokens with `algorithm` (`.rs256` or `.es256`).
    public func signingKeyID(for algorithm: JWSAlgorithm = .rs256) -> String? {
        endpoints.state.withLock { $0.signingKey(for: algorithm)?.keyID }
    }

    /// Replaces the signing keys with new ones with new `kid`s. The old ones disappear from the
    /// JWKS unless `keepingOldKeys` (then they stay published after the new ones, but never sign).
    public func rotateKeys(keepingOldKeys: Bool = false) throws {
        let fresh = try [FakeSigningKey.make(.rs256), FakeSigningKey.make(.es256)]
        endpoints.state.withLock { $0.keys = fresh + (keepingOldKeys ? $0.keys : []) }
    }

    // MARK: Misbehaviour

    /// Makes `/token` misbehave for the next `repetition` answers (to `grantType` requests only,
    /// when given). Several misbehaviours combine; of those that replace the whole answer, the
    /// earliest registered applies first.
    public func misbehave(_ misbehaviour: TokenMisbehaviour, _ repetition: Repetition = .next(1), grantType: String? = nil) {
        let remaining: Int? =
            switch repetition {
            case .next(let count): count
            case .untilReset: nil
            }
        if let remaining, remaining <= 0 { return }
        endpoints.state.withLock {
            $0.misbehaviours.append(ActiveMisbehaviour(misbehaviour: misbehaviour, remaining: remaining, grantType: grantType))
        }
    }

    /// Ends every misbehaviour of `/token`.
    public func resetMisbehaviours() {
        endpoints.state.withLock { $0.misbehaviours.removeAll() }
    }

    // MARK: Administration

    /// Revokes every grant of `subject` (what an administrator does when a user must sign in
    /// again): its refresh and access tokens stop working.
    public func revokeAllTokens(for subject: String) {
        endpoints.state.withLock { state in
            for (id, grant) in state.grants where grant.subject == subject { state.grants[id]?.revoked = true }
        }
    }

    /// Whether `refreshToken` would be accepted now (issued, not rotated, revoked or expired).
    public func isRefreshTokenActive(_ refreshToken: String) -> Bool {
        let now = endpoints.now()
        return endpoints.state.withLock { state in
            guard let token = state.refreshTokens[refreshToken], token.status == .active,
                let grant = state.grants[token.grantID], !grant.revoked
            else { return false }
            return token.expires.map { $0 > now } ?? true
        }
    }

    /// Whether `accessToken` would be accepted by `/userinfo` now.
    public func isAccessTokenActive(_ accessToken: String) -> Bool {
        let now = endpoints.now()
        return endpoints.state.withLock { $0.liveGrant(accessToken: accessToken, at: now) != nil }
    }
}

import Foundation
import HTTPTypes
import Logging
import TGApp
import TGAppTesting
import TGAuth
import TGBase
import TGHTTPClient
import TGHTTPServer
import TGOIDC
import TGPostgres
import TGStore
import TGTesting
import Testing

/// TokenGate serving the auth flow, against a fake identity provider (a real HTTP server:
/// TokenGate calls it with libcurl) and a database of its own. The app's side is played
/// in-process (TGAppTesting's `TestClient`, through the code a served request takes) or, with
/// `transport: .sockets`, with the system curl over real sockets.
struct AuthFlowHarness {
    /// How the app's requests reach TokenGate.
    enum Transport {
        /// In-process, without sockets: for what a test proves about routing and the domain.
        case inProcess
        /// Over real sockets with the system curl: for what a test proves about the wire.
        case sockets
    }

    static let appClient = "com.example.app"
    static let appRedirect = "com.example.app:/oauth2redirect"
    static let otherClient = "org.example.other"
    static let otherRedirect = "https://other.example/callback"

    let fake: FakeIdentityProvider
    let server: HTTPServer
    let auth: AuthServices
    let database: PostgresClient
    let clock: ManualClock
    let logs: CapturingLogSink
    let http: HTTPClient
    let databaseURL: String
    /// The Graph-shaped API behind `/api/graph/…` (with `withGraphAPI`).
    let graph: FakeGraphAPI?
    let configuration: TokenGateConfiguration
    let providers: [OpenIDProvider]
    let transport: Transport
    /// The first instance's application, in-process.
    let client: TestClient
    /// The first instance's admin listener (`/metrics`, the readiness detail), on a port of its own.
    let adminURL: String
    var baseURL: String { server.baseURL }
    /// TokenGate's issuer identifier: the public base URL without a trailing slash.
    var issuer: String { TokenGateApp.issuer(configuration) }
    /// The configured keys (what secrets at rest are sealed with).
    func vault() throws -> TokenVault { try TokenGateApp.makeVault(configuration) }

    /// Runs `body` with a started harness; stops everything afterwards. With `withGraphAPI`, a
    /// fake API trusting the fake provider's tokens is configured as upstream `graph`
    /// (`upstreamOptions` adds to its settings).
    static func run(
        rateLimits: String = "login_rate_limit_per_minute: 0, callback_rate_limit_per_minute: 0, token_rate_limit_per_minute: 0",
        /// More `server` settings (`, public_base_url: …`).
        serverOptions: String = "",
        extraConfiguration: String = "",
        settings: FakeIdentityProvider.Settings = FakeIdentityProvider.Settings(),
        realProvider: OIDCProviderMock? = nil,
        providerOptions: String = "",
        fakePathPrefix: String = "",
        /// The whole provider entry instead of the fake's `oidc` one; `{fake_port}` becomes the fake's port.
        providerEntry: String? = nil,
        /// More providers' entries after the first (`{fake_port}` as in `providerEntry`).
        moreProviders: [String] = [],
        withGraphAPI: Bool = false,
        /// The path the Graph-shaped API lives under (`/v1.0`; none by default).
        graphBasePath: String = "",
        upstreamOptions: String = "",
        /// More APIs' entries after `graph`'s (with `withGraphAPI`).
        moreUpstreams: [String] = [],
        databaseURL fixedURL: String? = nil,
        /// The app client's `post_logout_redirect_uris`.
        postLogoutRedirectURIs: [String] = [],
        /// More settings of the app client's entry (`, dpop: required`).
        appClientOptions: String = "",
        transport: Transport = .inProcess,
        _ body: (AuthFlowHarness) async throws -> Void
    ) async throws {
        func work(_ database: PostgresClient, _ url: String) async throws {
            _ = try await Migrator(migrations: SchemaMigrations.all).migrate(database)
            let fake = try FakeIdentityProvider.start(pathPrefix: fakePathPrefix, settings: settings)
            let graph = try withGraphAPI ? FakeGraphAPI(basePath: graphBasePath) { [fake] token in fake.subject(ofAccessToken: token) } : nil
            let port = try freeLoopbackPort()
            fake.registerClient(id: "tokengate", secret: "s3cret", redirectURIs: ["http://127.0.0.1:\(port)/auth/callback"])
            let upstreams =
                graph.map { graph in
                    let entry = "{ name: graph, base_url: \"\(graph.apiURL)\", provider: fake, scopes: [User.Read]\(upstreamOptions) }"
                    return "upstreams: [\(([entry] + moreUpstreams).joined(separator: ", "))]"
                } ?? ""
            let otherProviders = moreProviders.map { entry in
                "\n  - " + entry.replacingOccurrences(of: "{fake_port}", with: String(fake.port))
            }.joined()
            let text = """
                server: { host: 127.0.0.1, port: \(port), \(rateLimits)\(serverOptions) }
                database: { url: "\(url)" }
                encryption: { current_key_id: k1, keys: [{ id: k1, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= }] }
                clients:
                  - { client_id: \(appClient), redirect_uris: ["\(appRedirect)"], post_logout_redirect_uris: \(postLogoutRedirectURIs)\(appClientOptions) }
                  - { client_id: \(otherClient), redirect_uris: ["\(otherRedirect)"] }
                providers:
                  - \(providerEntry?.replacingOccurrences(of: "{fake_port}", with: String(fake.port)) ?? "{ name: fake, kind: oidc, issuer: \"\(realProvider?.issuer ?? fake.issuer)\", client_id: tokengate, client_secret: s3cret\(providerOptions) }")\(otherProviders)
                \(upstreams)
                \(extraConfiguration)
                """
            var configuration = try loadConfiguration(text)
            // Tests read the access log as requests finish: each line written at once
            // (AccessLogTests and ServeAccessLogTests cover the buffered log).
            configuration.log.accessLogBufferBytes = 0
            var clientSettings = HTTPClient.Configuration()
            clientSettings.allowPlainHTTPToLoopbackForTesting = true
            clientSettings.maxConnectionsPerHost = 256
            let http = HTTPClient(configuration: clientSettings)
            let logs = CapturingLogSink()
            let clock = ManualClock()
            let providers = try TokenGateApp.makeProviders(configuration, httpClient: http)
            let main = try await Instance.start(configuration, database: database, databaseURL: url, providers: providers, clock: clock, logs: logs)
            let harness = AuthFlowHarness(
                fake: fake,
                server: main.server,
                auth: main.auth,
                database: database,
                clock: clock,
                logs: logs,
                http: http,
                databaseURL: url,
                graph: graph,
                configuration: configuration,
                providers: providers,
                transport: transport,
                client: main.client,
                adminURL: main.adminURL
            )
            do {
                try await body(harness)
            } catch {
                await main.stop()
                await graph?.stop()
                await fake.stop()
                http.shutdown()
                throw error
            }
            await main.stop()
            await graph?.stop()
            await fake.stop()
            http.shutdown()
        }
        if let fixedURL {
            let database = PostgresClient(configuration: .init(url: fixedURL))
            defer { database.shutdown() }
            try await work(database, fixedURL)
        } else {
            try await TestDatabase.withFreshDatabase(migrations: SchemaMigrations.all, work)
        }
    }

    /// One TokenGate instance: server, auth service, cache follower and API clients.
    /// Started and stopped as `serve` does it (``Gateway``: schema check, assembly, then the
    /// server, the sweeper and the invalidation follower as one service group), without signals.
    struct Instance {
        let gateway: Gateway
        let running: Task<Void, any Error>
        /// What `server` serves, driven in-process.
        let client: TestClient
        var server: HTTPServer { gateway.assembly.server }
        var auth: AuthServices { gateway.assembly.auth }
        var baseURL: String { server.baseURL }
        /// The admin listener's, on the port it bound.
        var adminURL: String { gateway.assembly.admin.baseURL }

        /// `adminPort`: 0 (default) binds a free one, read back through ``adminURL``.
        static func start(
            _ configuration: TokenGateConfiguration,
            database: PostgresClient,
            databaseURL: String,
            providers: [OpenIDProvider],
            clock: ManualClock,
            logs: CapturingLogSink,
            port: UInt16? = nil,
            adminPort: UInt16 = 0
        ) async throws -> Instance {
            var configuration = configuration
            if let port { configuration.server.port = Int(port) }
            configuration.admin.port = Int(adminPort)
            configuration.database.url = Secret(databaseURL)
            let gateway = try await Gateway.start(
                configuration,
                database: database,
                providers: providers,
                logger: capturingLogger(logs, level: .debug),
                clock: clock.wallClock,
                handlesSignals: false
            )
            let running = Task { try await gateway.run() }
            let client = TestClient(gateway.assembly.application, authority: "127.0.0.1:\(gateway.assembly.server.port)")
            return Instance(gateway: gateway, running: running, client: client)
        }

        /// A graceful shutdown, as SIGTERM makes one: the server drains, then the workers stop.
        func stop() async {
            await gateway.shutdown()
            _ = await running.result
        }
    }

    /// Another instance on the same database, clock and provider (callbacks go to the first).
    func startInstance() async throws -> Instance {
        try await Instance.start(
            configuration,
            database: database,
            databaseURL: databaseURL,
            providers: providers,
            clock: clock,
            logs: logs,
            port: try freeLoopbackPort()
        )
    }

    /// Another instance on the same database, clock and provider, with its configuration changed
    /// by `change` (its own provider clients: a wrong secret, as an operator's typo would be).
    func startInstance(changing change: (inout TokenGateConfiguration) -> Void) async throws -> Instance {
        var changed = configuration
        change(&changed)
        return try await Instance.start(
            changed,
            database: database,
            databaseURL: databaseURL,
            providers: try TokenGateApp.makeProviders(changed, httpClient: http),
            clock: clock,
            logs: logs,
            port: try freeLoopbackPort()
        )
    }

    static func loadConfiguration(_ text: String) throws -> TokenGateConfiguration {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-auth-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try ConfigurationLoader.load(path: path, environment: [:])
    }

    // MARK: - The app's side

    /// What an app keeps between its login request and the token request.
    struct AppLogin {
        var verifier = PKCE.makeVerifier()
        var state = "app-state-\(UUID().uuidString)"
        var clientID = appClient
        var redirectURI = appRedirect
        /// A B2C policy (user flow) to log in with.
        var policy: String?
        var challenge: String { PKCE.challenge(for: verifier) }

        var query: [(String, String)] {
            [
                ("client_id", clientID), ("redirect_uri", redirectURI), ("response_type", "code"), ("state", state),
                ("code_challenge", challenge), ("code_challenge_method", "S256"),
            ] + (policy.map { [("policy", $0)] } ?? [])
        }
    }

    /// `/auth/login` for `login`, answered as JSON: the provider's authorization URL.
    func authorizationURL(_ login: AppLogin, extra: [(String, String)] = []) async throws -> String {
        let result = try await get("/auth/login", query: login.query + extra, headers: ["Accept: application/json"])
        #expect(result.status == 200, "login: \(result.body)")
        return try #require(decodeJSON(result.body)["authorization_url"] as? String)
    }

    /// The browser's part: the provider's login as `user`, then TokenGate's callback; returns
    /// where TokenGate sent the browser (the app's redirect) with its query parameters.
    func browserLogin(_ url: String, as user: String = "alice") async throws -> (location: String, parameters: [String: String]) {
        fake.configure { $0.fakeUser = user }
        let atProvider = try await fake.followAuthorization(url, using: http)
        let callback = try #require(atProvider.destination)
        let result = try await call(callback)
        let location = try #require(result.header("Location"), "callback answered \(result.status): \(result.body)")
        return (location, FakeIdentityProvider.queryParameters(of: location))
    }

    /// The whole login up to the handoff code.
    func handoffCode(_ login: AppLogin, as user: String = "alice") async throws -> String {
        let (_, parameters) = try await browserLogin(try await authorizationURL(login), as: user)
        #expect(parameters["state"] == login.state)
        return try #require(parameters["code"], "no code: \(parameters)")
    }

    /// Logs in as `user` and redeems the code: the token answer.
    func logIn(as user: String = "alice", deviceSecret: String? = nil, login: AppLogin = AppLogin()) async throws -> [String: Any] {
        let code = try await handoffCode(login, as: user)
        var form = [
            ("grant_type", "authorization_code"), ("code", code), ("code_verifier", login.verifier),
            ("redirect_uri", login.redirectURI), ("client_id", login.clientID),
        ]
        if let deviceSecret { form.append(("device_secret", deviceSecret)) }
        let result = try await post("/auth/token", form: form)
        #expect(result.status == 200, "token: \(result.body)")
        return decodeJSON(result.body)
    }

    func refresh(_ refreshToken: String, clientID: String = appClient) async throws -> TestResponse {
        try await post("/auth/token", form: [("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", clientID)])
    }

    /// The first instance's `/metrics`, scraped from its admin listener over HTTP.
    func scrapeMetrics() async throws -> String {
        let scrape = try await curl(["-s", "-f", adminURL + "/metrics"])
        try #require(scrape.exitCode == 0, "the admin listener's /metrics: curl exit \(scrape.exitCode)")
        return scrape.stdout
    }

    /// A count from the database (`SELECT count(*) AS n FROM …`).
    func count(_ query: PostgresQuery) async throws -> Int {
        try await database.query(query).first?.decode(Int.self, "n") ?? -1
    }
}

/// Polls `condition` every `interval` for up to ten seconds (for what happens in the background:
/// another process, a refresh ahead of expiry). The conditions are cheap (a counter, a query), so
/// the poll is short: a test waits about as long as the work takes, not a poll's period more.
func eventually(
    _ what: String,
    every interval: Duration = .milliseconds(5),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: interval)
    }
    if try await condition() { return }
    Issue.record("timed out waiting until \(what)")
    throw CancellationError()
}

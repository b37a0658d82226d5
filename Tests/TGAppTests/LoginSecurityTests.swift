import Foundation
import HTTPTypes
import TGApp
import TGAppTesting
import TGPostgres
import TGTesting
import Testing

/// The login leg's security properties (docs/threat_model.md): each test fails if its rule breaks.
@Suite struct LoginSecurityTests {
    /// Redirect URIs that are not byte-for-byte the registered `com.example.app:/oauth2redirect`.
    static let trickyRedirects = [
        "com.example.app:/oauth2redirect/", "com.example.app:/oauth2redirect?x=1", "com.example.app:/oauth2redirect#x",
        "COM.EXAMPLE.APP:/oauth2redirect", "com.example.app:/OAUTH2REDIRECT", "com.example.app://oauth2redirect",
        "com.example.app:/oauth2redirect/../evil", "com.example.app:%2Foauth2redirect", "com.example.app:/oauth2redirect%00",
        " com.example.app:/oauth2redirect", "com.example.app:/oauth2redirect ", "com.example.app:/oauth2redirect\t",
        "com.example.app:/oauth2redirect@evil.example", "com.example.app.evil:/oauth2redirect", "com.example.ap:/oauth2redirect",
        "https://evil.example/oauth2redirect", "https://evil.example?com.example.app:/oauth2redirect",
        "//evil.example", "javascript:alert(1)", "data:text/html,hi", "", "com.example.app:/oauth2redirect\r\nLocation: x",
        "https://other.example/callback",  // another app's registered URI
    ]

    @Test func aRedirectURIThatIsNotExactlyRegisteredIsRefusedWithoutRedirecting() async throws {
        try await AuthFlowHarness.run { h in
            for redirect in Self.trickyRedirects {
                var login = AuthFlowHarness.AppLogin()
                login.redirectURI = redirect
                let result = try await h.get("/auth/login", query: login.query)
                #expect(result.status == 400, "\(redirect)")
                #expect(result.header("Location") == nil, "\(redirect)")
                #expect(result.json["code"] as? String == "redirect_uri_not_registered", "\(redirect)")
            }
            #expect(try await h.count("SELECT count(*) AS n FROM pending_logins") == 0)
        }
    }

    @Test func anUnknownClientIsRefusedWithoutRedirecting() async throws {
        try await AuthFlowHarness.run { h in
            var login = AuthFlowHarness.AppLogin()
            login.clientID = "com.evil.app"
            let result = try await h.get("/auth/login", query: login.query)
            #expect(result.status == 400)
            #expect(result.header("Location") == nil)
            #expect(result.json["code"] as? String == "unknown_client")
        }
    }

    @Test func loginRequiresAnS256ChallengeStateAndResponseTypeCode() async throws {
        try await AuthFlowHarness.run { h in
            let login = AuthFlowHarness.AppLogin()
            let cases: [[(String, String)]] = [
                login.query.filter { $0.0 != "code_challenge" },
                login.query.map { $0.0 == "code_challenge_method" ? ($0.0, "plain") : $0 },
                login.query.filter { $0.0 != "state" },
                login.query.map { $0.0 == "response_type" ? ($0.0, "token") : $0 },
                login.query + [("state", "second")],
                login.query + [("provider", "nope")],
            ]
            for query in cases {
                let result = try await h.get("/auth/login", query: query)
                #expect(result.status == 400, "\(query)")
                #expect(result.header("Location") == nil)
            }
        }
    }

    @Test func aCallbackStateWorksOnceOnly() async throws {
        try await AuthFlowHarness.run { h in
            let url = try await h.authorizationURL(AuthFlowHarness.AppLogin())
            let atProvider = try await h.fake.followAuthorization(url, using: h.http)
            let callback = try #require(atProvider.destination)
            #expect(try await h.call(callback).status == 302)
            let replay = try await h.call(callback)
            #expect(replay.status == 400)
            #expect(replay.header("Location") == nil)
            #expect(replay.json["code"] as? String == "login_expired")
            #expect(try await h.count("SELECT count(*) AS n FROM handoff_codes") == 1)
        }
    }

    @Test func anExpiredPendingLoginIsRefusedAndStoresNothing() async throws {
        try await AuthFlowHarness.run { h in
            let url = try await h.authorizationURL(AuthFlowHarness.AppLogin())
            let atProvider = try await h.fake.followAuthorization(url, using: h.http)
            h.clock.advance(by: 601)
            let result = try await h.call(try #require(atProvider.destination))
            #expect(result.status == 400)
            #expect(result.header("Location") == nil)
            #expect(result.json["code"] as? String == "login_expired")
            #expect(try await h.count("SELECT count(*) AS n FROM accounts") == 0)
            #expect(try await h.count("SELECT count(*) AS n FROM pending_logins") == 0)
        }
    }

    @Test func anUnknownStateIsRefusedWithoutRedirecting() async throws {
        try await AuthFlowHarness.run { h in
            for query in ["?state=forged-state-value-1234567890&code=x", "?code=x", "?error=access_denied"] {
                let result = try await h.call(h.baseURL + "/auth/callback" + query)
                #expect(result.status == 400)
                #expect(result.header("Location") == nil)
            }
        }
    }

    @Test func aProviderErrorRedirectsWithErrorAndStateAndStoresNothing() async throws {
        try await AuthFlowHarness.run { h in
            h.fake.configure { $0.authorizationError = .init(code: "access_denied", description: "user said no", status: 302) }
            let login = AuthFlowHarness.AppLogin()
            let (location, parameters) = try await h.browserLogin(try await h.authorizationURL(login))
            #expect(location.hasPrefix(AuthFlowHarness.appRedirect))
            #expect(parameters["error"] == "access_denied")
            #expect(parameters["state"] == login.state)
            #expect(parameters["code"] == nil)
            try await expectNothingStored(h)
        }
    }

    @Test func aFailedCodeExchangeRedirectsWithErrorAndStoresNothing() async throws {
        for (misbehaviour, error) in [
            (FakeIdentityProvider.TokenMisbehaviour.serverError, "temporarily_unavailable"),
            (.idTokenNonce("another-login"), "server_error"),
            (.expiredIDToken, "server_error"),
            (.error(code: "invalid_grant"), "server_error"),
        ] {
            try await AuthFlowHarness.run { h in
                h.fake.misbehave(misbehaviour)
                let login = AuthFlowHarness.AppLogin()
                let (_, parameters) = try await h.browserLogin(try await h.authorizationURL(login))
                #expect(parameters["error"] == error, "\(misbehaviour)")
                #expect(parameters["state"] == login.state)
                #expect(parameters["code"] == nil)
                try await expectNothingStored(h)
            }
        }
    }

    @Test func aLoginWithoutARefreshTokenStoresNothing() async throws {
        var settings = FakeIdentityProvider.Settings()
        settings.issuesRefreshTokens = false
        try await AuthFlowHarness.run(settings: settings) { h in
            let (_, parameters) = try await h.browserLogin(try await h.authorizationURL(AuthFlowHarness.AppLogin()))
            #expect(parameters["error"] == "server_error")
            try await expectNothingStored(h)
        }
    }

    @Test func loginIsRateLimitedPerClientAddress() async throws {
        try await AuthFlowHarness.run(rateLimits: "login_rate_limit_per_minute: 3, token_rate_limit_per_minute: 2") { h in
            for _ in 0..<3 { #expect(try await h.get("/auth/login", query: AuthFlowHarness.AppLogin().query).status == 302) }
            let limited = try await h.get("/auth/login", query: AuthFlowHarness.AppLogin().query)
            #expect(limited.status == 429)
            #expect(Int(limited.header("Retry-After") ?? "") ?? 0 >= 1)
            #expect(limited.json["code"] as? String == "rate_limited")
            for _ in 0..<2 { #expect(try await h.refresh("x").status == 400) }
            let token = try await h.refresh("x")
            #expect(token.status == 429)
            #expect(token.header("Retry-After") != nil)
            h.clock.advance(by: 60)
            #expect(try await h.refresh("x").status == 400)
        }
    }

    /// One subscriber gets a /64: each of its addresses must not be a bucket of its own. The
    /// addresses come through `X-Forwarded-For` from a trusted proxy (the harness's peer is
    /// 127.0.0.1), as they do behind nginx.
    @Test func twoAddressesOfOneIPv6SlashSixtyFourShareALoginRateLimitBucket() async throws {
        try await AuthFlowHarness.run(
            rateLimits: "login_rate_limit_per_minute: 1, callback_rate_limit_per_minute: 0, token_rate_limit_per_minute: 0",
            serverOptions: ", trusted_proxies: [127.0.0.1]"
        ) { h in
            // Two more addresses of the first /64 (one bracketed, with a port), another /64, an IPv4
            // client, and the same client as an IPv4-mapped IPv6 address.
            let addresses = [
                "2001:db8::1", "2001:db8::2", "[2001:db8::ffff:ffff:ffff:ffff]:443", "2001:db8:0:1::1", "198.51.100.7",
                "::ffff:198.51.100.7",
            ]
            var statuses: [Int] = []
            for address in addresses {
                let login = try await h.get("/auth/login", query: AuthFlowHarness.AppLogin().query, headers: ["X-Forwarded-For: \(address)"])
                statuses.append(login.status)
            }
            #expect(statuses == [302, 429, 429, 302, 302, 429])
            // The access log still names the client's own address, not its bucket.
            #expect(h.logs.lines.contains { $0.contains(#""remote":"2001:db8::2""#) })
        }
    }

    func expectNothingStored(_ h: AuthFlowHarness) async throws {
        for table in ["accounts", "upstream_grants", "handoff_codes", "sessions", "devices", "pending_logins"] {
            let n = try await h.count(PostgresQuery(unsafeSQL: "SELECT count(*) AS n FROM \(table)"))
            #expect(n == 0, "\(table)")
        }
    }
}

/// A HEAD on the callback (a link scanner, a prefetching browser) must not consume the login.
@Suite struct CallbackHeadTests {
    @Test func aHeadOnTheCallbackConsumesNothingAndTheLoginStillCompletes() async throws {
        try await AuthFlowHarness.run { h in
            let login = AuthFlowHarness.AppLogin()
            let atProvider = try await h.fake.followAuthorization(try await h.authorizationURL(login), using: h.http)
            let callback = try #require(atProvider.destination)
            let head = try await h.call(callback, method: .head)
            #expect(head.status == 405)
            #expect(try await h.count("SELECT count(*) AS n FROM pending_logins") == 1)
            let result = try await h.call(callback)
            #expect(result.status == 302)
            let location = try #require(result.header("Location"))
            #expect(FakeIdentityProvider.queryParameters(of: location)["code"] != nil, "\(location)")
        }
    }
}

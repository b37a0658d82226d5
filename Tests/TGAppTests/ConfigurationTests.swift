import Foundation
import Logging
import TGApp
import TGAuth
import TGPostgres
import Testing

/// Each test writes its files into a directory of its own, removed when the test ends.
@Suite final class ConfigurationTests {
    static let key1 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  // 32 bytes, base64
    static let key2 = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA"  // 32 bytes, base64url

    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tg-config-\(UUID().uuidString)")

    deinit { try? FileManager.default.removeItem(at: directory) }

    func write(_ text: String, extension ext: String) throws -> String {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("\(UUID().uuidString).\(ext)").path
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        return path
    }

    func problems(_ path: String?, _ environment: [String: String] = [:]) -> [ConfigurationError.Problem] {
        do {
            _ = try ConfigurationLoader.load(path: path, environment: environment)
            return []
        } catch {
            return error.problems
        }
    }

    let yaml = """
        server:
          port: 9000
          public_base_url: https://auth.example.com
          trusted_proxies: [10.0.0.0/8, "::1"]
        database:
          url: { env: TEST_DB_URL }
        encryption:
          current_key_id: k2
          keys:
            - { id: k1, secret: \(key1) }
            - { id: k2, secret: { env: TEST_KEY2 } }
        clients:
          - client_id: ios-app
            redirect_uris: ["com.example.app:/oauth2redirect", "https://app.example.com/cb"]
            providers: [entra]
        providers:
          - name: entra
            kind: entra
            tenant: common
            client_id: abc
            client_secret: { file: SECRET_FILE }
        upstreams:
          - { name: graph, base_url: "https://graph.microsoft.com/v1.0", provider: entra, scopes: [User.Read] }
        """

    @Test func loadsYAMLWithSecretsFromEnvironmentFileAndValueAndDefaults() throws {
        let secretFile = try write("provider-secret-VALUE\n", extension: "txt")
        let path = try write(yaml.replacingOccurrences(of: "SECRET_FILE", with: secretFile), extension: "yaml")
        let configuration = try ConfigurationLoader.load(
            path: path,
            environment: ["TEST_DB_URL": "postgresql://u:db-PASSWORD@127.0.0.1/x", "TEST_KEY2": Self.key2]
        )
        #expect(configuration.server.port == 9000)
        #expect(configuration.server.host == "127.0.0.1")
        #expect(configuration.server.trustedProxies == ["10.0.0.0/8", "::1"])
        #expect(configuration.database.url?.value == "postgresql://u:db-PASSWORD@127.0.0.1/x")
        #expect(configuration.database.poolSize == 10)
        #expect(configuration.encryption.keys.map(\.secret.value) == [Self.key1, Self.key2])
        #expect(configuration.providers.first?.clientSecret?.value == "provider-secret-VALUE")
        #expect(configuration.clients.first?.redirectURIs.count == 2)
        #expect(configuration.sessions.handoffCodeTTLSeconds == 60)
        #expect(configuration.upstreams.first?.scopes == ["User.Read"])
    }

    @Test func loadsJSONAndLetsTheEnvironmentOverrideTheFile() throws {
        let path = try write(
            #"{"server": {"port": 9000, "connection_limit": 10}, "database": {"url": "postgresql://127.0.0.1/a"}}"#,
            extension: "json"
        )
        let configuration = try ConfigurationLoader.load(
            path: path,
            environment: [
                "TOKENGATE_SERVER_PORT": "9191", "TOKENGATE_DATABASE_URL": "postgresql://127.0.0.1/b",
                "TOKENGATE_LOG_ACCESS_LOG": "false", "TOKENGATE_SERVER_TRUSTED_PROXIES": "10.1.0.0/16, 127.0.0.1",
                "TOKENGATE_UNRELATED": "ignored",
            ]
        )
        #expect(configuration.server.port == 9191)
        #expect(configuration.server.connectionLimit == 10)
        #expect(configuration.database.url?.value == "postgresql://127.0.0.1/b")
        #expect(configuration.log.accessLog == false)
        #expect(configuration.server.trustedProxies == ["10.1.0.0/16", "127.0.0.1"])
    }

    @Test func runsWithoutAFileFromDefaultsAndEnvironment() throws {
        let configuration = try ConfigurationLoader.load(path: nil, environment: ["TOKENGATE_DATABASE_URL": "postgresql://127.0.0.1/x"])
        #expect(configuration.server.publicBaseURL == "http://127.0.0.1:8080")
        #expect(configuration.providers.isEmpty)
    }

    @Test func requestHeadTimeoutDefaultsTo30SecondsTakesOverridesAndRefusesNegatives() throws {
        let database = ["TOKENGATE_DATABASE_URL": "postgresql://127.0.0.1/x"]
        #expect(try ConfigurationLoader.load(path: nil, environment: database).server.requestHeadTimeoutSeconds == 30)
        let overridden = database.merging(["TOKENGATE_SERVER_REQUEST_HEAD_TIMEOUT_SECONDS": "0"]) { $1 }
        #expect(try ConfigurationLoader.load(path: nil, environment: overridden).server.requestHeadTimeoutSeconds == 0)
        let negative = database.merging(["TOKENGATE_SERVER_REQUEST_HEAD_TIMEOUT_SECONDS": "-1"]) { $1 }
        #expect(problems(nil, negative).map(\.key).contains("server.request_head_timeout_seconds"))
    }

    @Test func perIPConnectionLimitAndMinimumBodyRateHaveSafeDefaultsTakeZeroForOffAndRefuseNegatives() throws {
        let database = ["TOKENGATE_DATABASE_URL": "postgresql://127.0.0.1/x"]
        let defaults = try ConfigurationLoader.load(path: nil, environment: database).server
        #expect(defaults.maxConnectionsPerIP == 256)
        #expect(defaults.minBodyBytesPerSecond == 1024)
        let off = database.merging(["TOKENGATE_SERVER_MAX_CONNECTIONS_PER_IP": "0", "TOKENGATE_SERVER_MIN_BODY_BYTES_PER_SECOND": "0"]) { $1 }
        let server = try ConfigurationLoader.load(path: nil, environment: off).server
        #expect(server.maxConnectionsPerIP == 0 && server.minBodyBytesPerSecond == 0)
        let negative = database.merging(["TOKENGATE_SERVER_MAX_CONNECTIONS_PER_IP": "-1", "TOKENGATE_SERVER_MIN_BODY_BYTES_PER_SECOND": "-5"]) { $1 }
        let keys = problems(nil, negative).map(\.key)
        #expect(keys.contains("server.max_connections_per_ip"))
        #expect(keys.contains("server.min_body_bytes_per_second"))
    }

    @Test func ipv6ClientsAreKeyedByASlash64UnlessConfiguredBetween32And128() throws {
        let database = ["TOKENGATE_DATABASE_URL": "postgresql://127.0.0.1/x"]
        let configuration = try ConfigurationLoader.load(path: nil, environment: database)
        #expect(configuration.server.ipv6PrefixLength == 64)
        let narrower = database.merging(["TOKENGATE_SERVER_IPV6_PREFIX_LENGTH": "56"]) { $1 }
        let narrowed = try ConfigurationLoader.load(path: nil, environment: narrower)
        #expect(narrowed.server.ipv6PrefixLength == 56)
        for wrong in ["31", "129", "0"] {
            let keys = problems(nil, database.merging(["TOKENGATE_SERVER_IPV6_PREFIX_LENGTH": wrong]) { $1 }).map(\.key)
            #expect(keys == ["server.ipv6_prefix_length"], "\(wrong)")
        }
    }

    @Test func neverPrintsASecretInTheRenderedConfigurationOrADump() throws {
        let secretFile = try write("provider-secret-VALUE", extension: "txt")
        let path = try write(yaml.replacingOccurrences(of: "SECRET_FILE", with: secretFile), extension: "yaml")
        let configuration = try ConfigurationLoader.load(
            path: path,
            environment: ["TEST_DB_URL": "postgresql://u:db-PASSWORD@127.0.0.1/x", "TEST_KEY2": Self.key2]
        )
        let rendered = ConfigurationLoader.renderRedacted(configuration)
        var dumped = ""
        dump(configuration, to: &dumped)
        for text in [rendered, dumped, String(describing: configuration), String(reflecting: configuration)] {
            for secret in ["provider-secret-VALUE", "db-PASSWORD", Self.key1, Self.key2] {
                #expect(!text.contains(secret))
            }
        }
        #expect(rendered.contains("\"public_base_url\" : \"https://auth.example.com\""))
        #expect(rendered.contains("<redacted>"))
    }

    @Test func listsEveryProblemAtOnceWithItsKey() throws {
        let path = try write(
            """
            server: { port: 70000, public_base_url: "http://auth.example.com", trusted_proxies: [not-an-ip], prot: 1 }
            encryption: { current_key_id: nope, keys: [{ id: k1, secret: c2hvcnQ= }] }
            clients:
              - { client_id: app, redirect_uris: ["http://evil.example.com/cb", "myapp:/cb", "https://ok.example.com/cb#frag"], providers: [ghost] }
            providers:
              - { name: Bad Name, issuer: "http://idp.example.com", client_id: "" }
            upstreams:
              - { name: graph, base_url: "ftp://x", provider: ghost }
            """,
            extension: "yaml"
        )
        let keys = Set(problems(path, ["TOKENGATE_SERVER_NOPE": "1"]).map(\.key))
        let expected: Set<String> = [
            "server.prot", "TOKENGATE_SERVER_NOPE", "server.port", "server.public_base_url", "server.trusted_proxies[0]",
            "database.url", "encryption.keys[0].secret", "encryption.current_key_id",
            "clients[0].redirect_uris[0]", "clients[0].redirect_uris[1]", "clients[0].redirect_uris[2]", "clients[0].providers[0]",
            "providers[0].name", "providers[0].issuer", "providers[0].client_id", "providers[0].client_secret",
            "upstreams[0].base_url", "upstreams[0].provider",
        ]
        #expect(keys == expected)
    }

    @Test func webSocketsAreOffByDefaultAndTheirOriginsAndMethodsAreChecked() throws {
        let base = """
            database: { url: "postgresql://127.0.0.1/x" }
            providers:
              - { name: entra, kind: entra, tenant: common, client_id: abc, client_secret: s }
            upstreams:

            """
        let plain = try ConfigurationLoader.load(
            path: try write(base + "  - { name: api, base_url: \"https://api.example.com\", provider: entra }", extension: "yaml"),
            environment: [:]
        )
        let upstream = try #require(plain.upstreams.first)
        #expect(!upstream.websocket && upstream.websocketOrigins.isEmpty && upstream.websocketIdleTimeoutSeconds == 300)
        let good = try write(
            base
                + "  - { name: api, base_url: \"https://api.example.com\", provider: entra, websocket: true, "
                + "websocket_origins: [\"https://app.example.com\", \"http://localhost:3000\"], websocket_idle_timeout_seconds: 0 }",
            extension: "yaml"
        )
        #expect(problems(good).isEmpty)
        let bad = try write(
            base
                + "  - { name: api, base_url: \"https://api.example.com\", provider: entra, websocket: true, methods: [POST], "
                + "websocket_origins: [\"https://app.example.com/path\", \"app.example.com\"], websocket_idle_timeout_seconds: -1 }",
            extension: "yaml"
        )
        #expect(
            Set(problems(bad).map(\.key)) == [
                "upstreams[0].websocket", "upstreams[0].websocket_origins[0]", "upstreams[0].websocket_origins[1]",
                "upstreams[0].websocket_idle_timeout_seconds",
            ]
        )
    }

    @Test func transferCodesLastThirtyDaysThreePerDeviceAndOutOfRangeSettingsAreRefused() throws {
        let database = "database: { url: \"postgresql://127.0.0.1/x\" }\n"
        let defaults = try ConfigurationLoader.load(path: try write(database, extension: "yaml"), environment: [:])
        #expect(defaults.sessions.transferCodeTTLSeconds == 30 * 86400 && defaults.sessions.transferCodesPerDevice == 3)
        let off = try write(database + "sessions: { transfer_codes_per_device: 0, transfer_code_ttl_seconds: 3600 }", extension: "yaml")
        #expect(problems(off).isEmpty)
        let wrong = try write(database + "sessions: { transfer_codes_per_device: 21, transfer_code_ttl_seconds: 59 }", extension: "yaml")
        #expect(Set(problems(wrong).map(\.key)) == ["sessions.transfer_codes_per_device", "sessions.transfer_code_ttl_seconds"])
    }

    @Test func rateLimitsAreSharedThroughTheDatabaseByDefaultAndNegativeOnesAreRefused() throws {
        let database = "database: { url: \"postgresql://127.0.0.1/x\" }\n"
        let defaults = try ConfigurationLoader.load(path: try write(database, extension: "yaml"), environment: [:])
        #expect(defaults.server.rateLimitStore == .database && defaults.server.callbackRateLimitPerMinute == 60)
        let local = try ConfigurationLoader.load(
            path: try write(database + "server: { rate_limit_store: memory }", extension: "yaml"),
            environment: ["TOKENGATE_SERVER_CALLBACK_RATE_LIMIT_PER_MINUTE": "30"]
        )
        #expect(local.server.rateLimitStore == .memory && local.server.callbackRateLimitPerMinute == 30)
        let wrong = try write(database + "server: { callback_rate_limit_per_minute: -1 }", extension: "yaml")
        #expect(problems(wrong).map(\.key) == ["server.callback_rate_limit_per_minute"])
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(path: try write(database + "server: { rate_limit_store: redis }", extension: "yaml"), environment: [:])
        }
    }

    @Test func theDPoPSectionTakesEnvironmentOverridesAndRefusesUnknownKeys() throws {
        let database = "database: { url: \"postgresql://127.0.0.1/x\" }\n"
        let overridden = try ConfigurationLoader.load(
            path: try write(database + "dpop: { proof_max_age_seconds: 30 }", extension: "yaml"),
            environment: ["TOKENGATE_DPOP_PROOF_MAX_AGE_SECONDS": "90", "TOKENGATE_DPOP_ALGORITHMS": "ES256,EdDSA"]
        )
        #expect(overridden.dpop.proofMaxAgeSeconds == 90 && overridden.dpop.algorithms == ["ES256", "EdDSA"])
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(path: try write(database + "dpop: { proof_max_age: 30 }", extension: "yaml"), environment: [:])
        }
    }

    @Test func theFaultsSectionHasSafeDefaultsTakesOverridesAndRefusesNonsense() throws {
        let database = "database: { url: \"postgresql://127.0.0.1/x\" }\n"
        let defaults = try ConfigurationLoader.load(path: try write(database, extension: "yaml"), environment: [:]).faults
        #expect(defaults.rejectionValveCount == 20 && defaults.rejectionValveWindowSeconds == 60)
        #expect(defaults.rejectedGrantGraceSeconds == 86400 && defaults.clientCheckSeconds == 60)
        let overridden = try ConfigurationLoader.load(
            path: try write(database + "faults: { rejection_valve_count: 50 }", extension: "yaml"),
            environment: ["TOKENGATE_FAULTS_REJECTED_GRANT_GRACE_SECONDS": "3600"]
        )
        #expect(overridden.faults.rejectionValveCount == 50 && overridden.faults.rejectedGrantGraceSeconds == 3600)
        let refused = problems(try write(database + "faults: { rejection_valve_window_seconds: 0, rejection_valve_count: -1 }", extension: "yaml"))
        #expect(Set(refused.map(\.key)) == ["faults.rejection_valve_window_seconds", "faults.rejection_valve_count"])
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(path: try write(database + "faults: { valve: 3 }", extension: "yaml"), environment: [:])
        }
    }

    /// `sessions.memory_cache_entries` is the capacity of the instance's `CredentialCache`.
    @Test func theMemoryCacheEntriesAreTheCredentialCachesCapacity() throws {
        let database = "database: { url: \"postgresql://127.0.0.1:1/unused\" }\n"
        for (text, capacity) in [(database, 100_000), (database + "sessions: { memory_cache_entries: 2 }", 2)] {
            let configuration = try ConfigurationLoader.load(path: try write(text, extension: "yaml"), environment: [:])
            let pool = TokenGateApp.makeDatabase(configuration)
            defer { pool.shutdown() }
            let auth = try TokenGateApp.makeAuthServices(configuration, database: pool, providers: [], logger: Logger(label: "test"))
            #expect(auth.cache.capacity == capacity)
        }
    }

    @Test func allowsPlainHTTPOnlyForLoopbackHosts() throws {
        let config = { (issuer: String) in
            """
            database: { url: "postgresql://127.0.0.1/x" }
            providers: [{ name: dev, issuer: "\(issuer)", client_id: a, client_secret: s }]
            """
        }
        #expect(problems(try write(config("http://127.0.0.1:9400"), extension: "yaml")).isEmpty)
        #expect(problems(try write(config("http://localhost:9400"), extension: "yaml")).isEmpty)
        #expect(problems(try write(config("http://10.0.0.1:9400"), extension: "yaml")).map(\.key) == ["providers[0].issuer"])
    }

    @Test func reportsAMissingFileMalformedYAMLAndWrongTypesClearly() throws {
        #expect(problems("/nonexistent/tokengate.yaml").first?.message == "file not found or not readable")
        let malformed = try write("server: [unclosed\n  port: {", extension: "yaml")
        #expect(problems(malformed).first?.message.hasPrefix("is not valid YAML") == true)
        let wrongType = try write("server: { port: eighty }\ndatabase: { url: x }", extension: "yaml")
        #expect(problems(wrongType).map(\.key) == ["server.port"])
        let secretMissing = try write("database: { url: { env: NOT_SET_ANYWHERE } }", extension: "yaml")
        #expect(problems(secretMissing).map(\.message) == ["environment variable NOT_SET_ANYWHERE is not set"])
    }
}

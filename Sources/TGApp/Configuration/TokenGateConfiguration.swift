/// TokenGate's configuration: one file (YAML or JSON, snake_case keys) plus `TOKENGATE_*`
/// environment overrides. Load it with ``ConfigurationLoader``.
public struct TokenGateConfiguration: Sendable, Codable {
    public var server: Server
    /// The admin listener: `/metrics` and the readiness detail, on an address of its own.
    public var admin: Admin
    public var database: Database
    public var log: Log
    public var encryption: Encryption
    public var clients: [Client]
    public var providers: [Provider]
    public var upstreams: [Upstream]
    public var sessions: Sessions
    public var sweeper: Sweeper
    public var dpop: DPoP
    /// Who pays for a provider's faults: the safety valve and the grace of a rejected grant.
    public var faults: Faults

    enum CodingKeys: String, CodingKey, CaseIterable {
        case server, admin, database, log, encryption, clients, providers, upstreams, sessions, sweeper, dpop, faults
    }

    /// Sections are always present: the loader inserts `{}` for a missing one, so its defaults apply.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        server = try c.decode(Server.self, forKey: .server)
        admin = try c.decode(Admin.self, forKey: .admin)
        database = try c.decode(Database.self, forKey: .database)
        log = try c.decode(Log.self, forKey: .log)
        encryption = try c.decode(Encryption.self, forKey: .encryption)
        clients = try c.value(.clients, default: [])
        providers = try c.value(.providers, default: [])
        upstreams = try c.value(.upstreams, default: [])
        sessions = try c.decode(Sessions.self, forKey: .sessions)
        sweeper = try c.decode(Sweeper.self, forKey: .sweeper)
        dpop = try c.decode(DPoP.self, forKey: .dpop)
        faults = try c.decode(Faults.self, forKey: .faults)
    }

    /// Listening, proxies in front, and the limits protecting the server.
    public struct Server: Sendable, Codable {
        public var host: String
        public var port: Int
        /// The URL clients and providers reach TokenGate at (callback URLs are built from it).
        public var publicBaseURL: String
        /// Peers whose `X-Forwarded-*` / `Forwarded` headers are honoured (IPs or CIDRs).
        public var trustedProxies: [String]
        public var threads: Int?
        public var connectionLimit: Int
        /// Open connections at most from one client address (0: no limit). Trusted proxies are
        /// exempt: their connections carry many clients.
        public var maxConnectionsPerIP: Int
        /// A request body must arrive at this many bytes per second at least, over each 10 s
        /// window (a trickled body); 0: no minimum.
        public var minBodyBytesPerSecond: Int
        public var connectionTimeoutSeconds: Int
        /// A request head must arrive in full within this many seconds (slowloris); 0: no limit.
        public var requestHeadTimeoutSeconds: Int
        public var maxBodyBytes: Int
        public var requestTimeoutSeconds: Int
        public var drainTimeoutSeconds: Int
        /// Requests per client address and minute to `/auth/login`, `/auth/callback`, and
        /// `/auth/token` with `/auth/transfer` (0: no limit).
        public var loginRateLimitPerMinute: Int
        public var callbackRateLimitPerMinute: Int
        public var tokenRateLimitPerMinute: Int
        /// Requests per client address and minute to `/auth/backchannel-logout/{provider}` (0: no
        /// limit). The provider is the client: one address sends every logout of a mass sign-out.
        public var backChannelLogoutRateLimitPerMinute: Int
        /// IPv6 clients are counted by their first this many bits, by the rate limits and by
        /// `max_connections_per_ip` (a subscriber is usually given a whole /64, so every address
        /// of its own is one client); 32 to 128. An IPv4-mapped address counts as its IPv4 address.
        public var ipv6PrefixLength: Int
        /// Where the rate limits' buckets live: `database`, shared by every instance
        /// (docs/scaling.md), or `memory`, this instance's own.
        public var rateLimitStore: RateLimitStoreKind

        public enum RateLimitStoreKind: String, Sendable, Codable {
            case database, memory
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case host, port, threads
            case publicBaseURL = "public_base_url"
            case trustedProxies = "trusted_proxies"
            case connectionLimit = "connection_limit"
            case maxConnectionsPerIP = "max_connections_per_ip"
            case minBodyBytesPerSecond = "min_body_bytes_per_second"
            case connectionTimeoutSeconds = "connection_timeout_seconds"
            case requestHeadTimeoutSeconds = "request_head_timeout_seconds"
            case maxBodyBytes = "max_body_bytes"
            case requestTimeoutSeconds = "request_timeout_seconds"
            case drainTimeoutSeconds = "drain_timeout_seconds"
            case loginRateLimitPerMinute = "login_rate_limit_per_minute"
            case callbackRateLimitPerMinute = "callback_rate_limit_per_minute"
            case tokenRateLimitPerMinute = "token_rate_limit_per_minute"
            case backChannelLogoutRateLimitPerMinute = "backchannel_logout_rate_limit_per_minute"
            case rateLimitStore = "rate_limit_store"
            case ipv6PrefixLength = "ipv6_prefix_length"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            host = try c.value(.host, default: "127.0.0.1")
            port = try c.value(.port, default: 8080, in: 1...65535)
            publicBaseURL = try c.value(.publicBaseURL, default: "http://\(host.contains(":") ? "[\(host)]" : host):\(port)")
            trustedProxies = try c.value(.trustedProxies, default: [])
            threads = try c.valueIfPresent(.threads, in: 1...1024, note: "a thread each; more loops than CPUs only add switches")
            connectionLimit = try c.value(.connectionLimit, default: 4096, in: 1...)
            maxConnectionsPerIP = try c.value(.maxConnectionsPerIP, default: 256, in: 0..., zero: "no limit")
            minBodyBytesPerSecond = try c.value(.minBodyBytesPerSecond, default: 1024, in: 0..., zero: "no minimum")
            connectionTimeoutSeconds = try c.value(.connectionTimeoutSeconds, default: 15, in: 1...)
            requestHeadTimeoutSeconds = try c.value(
                .requestHeadTimeoutSeconds,
                default: 30,
                in: 0...Int.max,
                message: "must be 0 (no limit) or a number of seconds"
            )
            maxBodyBytes = try c.value(.maxBodyBytes, default: 1 << 20, in: 1...)
            requestTimeoutSeconds = try c.value(.requestTimeoutSeconds, default: 30, in: 1...)
            drainTimeoutSeconds = try c.value(.drainTimeoutSeconds, default: 10, in: 1...)
            loginRateLimitPerMinute = try c.value(.loginRateLimitPerMinute, default: 60, in: 0..., zero: "no limit")
            callbackRateLimitPerMinute = try c.value(.callbackRateLimitPerMinute, default: 60, in: 0..., zero: "no limit")
            tokenRateLimitPerMinute = try c.value(.tokenRateLimitPerMinute, default: 120, in: 0..., zero: "no limit")
            backChannelLogoutRateLimitPerMinute = try c.value(
                .backChannelLogoutRateLimitPerMinute,
                default: 600,
                in: 0...,
                zero: "no limit"
            )
            rateLimitStore = try c.value(.rateLimitStore, default: .database)
            ipv6PrefixLength = try c.value(
                .ipv6PrefixLength,
                default: 64,
                in: 32...128,
                note: "the bits of an IPv6 address that make one client"
            )
        }
    }

    public struct Database: Sendable, Codable {
        /// libpq connection URI; may carry a password, hence a secret.
        public var url: Secret?
        public var poolSize: Int
        public var acquireTimeoutSeconds: Int
        public var statementTimeoutSeconds: Int

        enum CodingKeys: String, CodingKey, CaseIterable {
            case url
            case poolSize = "pool_size"
            case acquireTimeoutSeconds = "acquire_timeout_seconds"
            case statementTimeoutSeconds = "statement_timeout_seconds"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            url = try c.decodeIfPresent(Secret.self, forKey: .url)
            poolSize = try c.value(.poolSize, default: 10, in: 1...)
            acquireTimeoutSeconds = try c.value(.acquireTimeoutSeconds, default: 5, in: 1...)
            statementTimeoutSeconds = try c.value(.statementTimeoutSeconds, default: 30, in: 1...)
        }
    }

    public struct Log: Sendable, Codable {
        /// trace, debug, info, notice, warning, error, critical
        public var level: String
        /// One line per request.
        public var accessLog: Bool
        /// Access-log lines are buffered per event loop and written once a buffer holds this many
        /// bytes (0: each line written at once), or ``accessLogFlushSeconds`` after its oldest line.
        public var accessLogBufferBytes: Int
        public var accessLogFlushSeconds: Int

        enum CodingKeys: String, CodingKey, CaseIterable {
            case level
            case accessLog = "access_log"
            case accessLogBufferBytes = "access_log_buffer_bytes"
            case accessLogFlushSeconds = "access_log_flush_seconds"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            level = try c.value(.level, default: "info")
            accessLog = try c.value(.accessLog, default: true)
            accessLogBufferBytes = try c.value(
                .accessLogBufferBytes,
                default: 32 * 1024,
                in: 0...(1 << 20),
                message: "must be 0 (unbuffered) to 1048576"
            )
            accessLogFlushSeconds = try c.value(.accessLogFlushSeconds, default: 1, in: 1...60, message: "must be 1 to 60")
        }
    }

    /// Keys for data at rest (AES-256-GCM). The current key encrypts; every listed key decrypts.
    public struct Encryption: Sendable, Codable {
        public var keys: [Key]
        public var currentKeyID: String?

        public struct Key: Sendable, Codable {
            public var id: String
            /// 32 bytes, base64 or base64url.
            public var secret: Secret

            enum CodingKeys: String, CodingKey, CaseIterable {
                case id, secret
            }
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case keys
            case currentKeyID = "current_key_id"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            keys = try c.value(.keys, default: [])
            currentKeyID = try c.decodeIfPresent(String.self, forKey: .currentKeyID)
        }
    }

    /// A registered app.
    public struct Client: Sendable, Codable {
        public var clientID: String
        /// Exact redirect URIs (custom schemes, https universal links; http only for loopback).
        public var redirectURIs: [String]
        /// Providers this app may log in with (empty: all).
        public var providers: [String]
        /// Where the app may ask to be sent back after the provider's logout page; exact URIs,
        /// checked like `redirect_uris`.
        public var postLogoutRedirectURIs: [String]
        /// `off`, `allowed` or `required`: whether its tokens are bound to a key it holds (RFC 9449).
        public var dpop: String

        enum CodingKeys: String, CodingKey, CaseIterable {
            case providers, dpop
            case clientID = "client_id"
            case redirectURIs = "redirect_uris"
            case postLogoutRedirectURIs = "post_logout_redirect_uris"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            clientID = try c.decode(String.self, forKey: .clientID)
            redirectURIs = try c.value(.redirectURIs, default: [])
            providers = try c.value(.providers, default: [])
            postLogoutRedirectURIs = try c.value(.postLogoutRedirectURIs, default: [])
            dpop = try c.value(.dpop, default: "off")
        }
    }

    /// An identity provider TokenGate is the confidential client of.
    /// An identity provider (see `docs/providers.md` for every kind with an example).
    public struct Provider: Sendable, Codable {
        public enum Kind: String, Sendable, Codable, CaseIterable {
            case oidc, oauth2, entra, b2c, cognito, google, yahoojp
        }

        public enum AuthMethod: String, Sendable, Codable, CaseIterable {
            case clientSecretBasic = "client_secret_basic"
            case clientSecretPost = "client_secret_post"
            case privateKeyJWT = "private_key_jwt"
        }

        public enum ResponseMode: String, Sendable, Codable, CaseIterable {
            case query
            case formPost = "form_post"
        }

        /// Written-out endpoints of a plain OAuth 2.0 provider (`kind: oauth2`).
        public struct Endpoints: Sendable, Codable {
            public var authorization: String
            public var token: String
            public var revocation: String?
            public var userinfo: String?
            public var endSession: String?

            enum CodingKeys: String, CodingKey {
                case authorization, token, revocation, userinfo
                case endSession = "end_session"
            }
        }

        public var name: String
        public var kind: Kind
        /// Issuer URL (`oidc`, `cognito`; `google` and `yahoojp` default to the real one).
        public var issuer: String
        public var clientID: String
        public var clientSecret: Secret?
        /// PEM private key for `private_key_jwt`.
        public var privateKey: Secret?
        /// The `kid` the provider knows TokenGate's key by (`private_key_jwt`).
        public var privateKeyID: String?
        /// The PEM certificate of `private_key` (`private_key_jwt` with Entra ID's certificate
        /// credentials): assertions then carry its thumbprints, `x5t#S256` and `x5t`.
        public var privateKeyCertificate: Secret?
        public var authMethod: AuthMethod
        public var scopes: [String]
        /// Entra: `common`, `organizations`, `consumers`, a tenant id or domain. B2C: the tenant
        /// domain (`contoso.onmicrosoft.com`).
        public var tenant: String?
        /// Entra: the only tenant ids accepted (multi-tenant apps); empty: any.
        public var allowedTenants: [String]
        /// B2C: the policies (user flows); the first is the default.
        public var policies: [String]
        /// The login host: Entra's cloud (default `https://login.microsoftonline.com`), B2C's
        /// (`https://contoso.b2clogin.com`), Cognito's hosted UI domain.
        public var authority: String?
        public var responseMode: ResponseMode
        /// Extra authorization-request parameters (never replacing the protocol's own).
        public var authorizeParameters: [String: String]
        public var endpoints: Endpoints?
        public var clockSkewSeconds: Int
        /// A JWKS older than this is fetched again on its next use (default a day).
        public var jwksMaxAgeSeconds: Int
        /// When a login asks UserInfo for display claims: `auto` (default; `never` for Entra,
        /// whose UserInfo is on Graph), `always`, `never`.
        public var userInfo: UserInfoUse?
        /// Whether the provider may end sessions with back-channel logout tokens at
        /// `<public_base_url>/auth/backchannel-logout/<name>` (default: yes, for every kind that
        /// issues ID tokens; `oauth2` cannot).
        public var backChannelLogout: Bool?
        /// How old (`iat`) a logout token may be, besides `clock_skew_seconds` (default 300).
        public var backChannelLogoutMaxAgeSeconds: Int
        /// Accept only logout tokens typed `typ: logout+jwt` (default false: `JWT` and no `typ`
        /// too, as many providers send).
        public var backChannelLogoutTypedOnly: Bool

        public enum UserInfoUse: String, Sendable, Codable, CaseIterable {
            case auto, always, never
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case name, kind, issuer, scopes, tenant, policies, authority, endpoints
            case clientID = "client_id"
            case clientSecret = "client_secret"
            case privateKey = "private_key"
            case privateKeyID = "private_key_id"
            case privateKeyCertificate = "private_key_certificate"
            case authMethod = "auth_method"
            case allowedTenants = "allowed_tenants"
            case responseMode = "response_mode"
            case authorizeParameters = "authorize_parameters"
            case clockSkewSeconds = "clock_skew_seconds"
            case jwksMaxAgeSeconds = "jwks_max_age_seconds"
            case userInfo = "userinfo"
            case backChannelLogout = "backchannel_logout"
            case backChannelLogoutMaxAgeSeconds = "backchannel_logout_max_age_seconds"
            case backChannelLogoutTypedOnly = "backchannel_logout_typed_only"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            name = try c.decode(String.self, forKey: .name)
            kind = try c.value(.kind, default: .oidc)
            let defaultIssuer =
                switch kind {
                case .google: "https://accounts.google.com"
                case .yahoojp: "https://auth.login.yahoo.co.jp/yconnect/v2"
                default: ""
                }
            issuer = try c.value(.issuer, default: defaultIssuer)
            clientID = try c.value(.clientID, default: "")
            clientSecret = try c.decodeIfPresent(Secret.self, forKey: .clientSecret)
            privateKey = try c.decodeIfPresent(Secret.self, forKey: .privateKey)
            privateKeyID = try c.decodeIfPresent(String.self, forKey: .privateKeyID)
            privateKeyCertificate = try c.decodeIfPresent(Secret.self, forKey: .privateKeyCertificate)
            authMethod = try c.value(.authMethod, default: .clientSecretBasic)
            scopes = try c.value(.scopes, default: ["openid", "profile", "email", "offline_access"])
            tenant = try c.decodeIfPresent(String.self, forKey: .tenant)
            allowedTenants = try c.value(.allowedTenants, default: [])
            policies = try c.value(.policies, default: [])
            authority = try c.decodeIfPresent(String.self, forKey: .authority)
            responseMode = try c.value(.responseMode, default: .query)
            authorizeParameters = try c.value(.authorizeParameters, default: [:])
            endpoints = try c.decodeIfPresent(Endpoints.self, forKey: .endpoints)
            clockSkewSeconds = try c.value(.clockSkewSeconds, default: 60, in: 0...600)
            jwksMaxAgeSeconds = try c.value(.jwksMaxAgeSeconds, default: 86400, in: 60...604_800, note: "a week")
            userInfo = try c.decodeIfPresent(UserInfoUse.self, forKey: .userInfo)
            backChannelLogout = try c.decodeIfPresent(Bool.self, forKey: .backChannelLogout)
            backChannelLogoutMaxAgeSeconds = try c.value(.backChannelLogoutMaxAgeSeconds, default: 300, in: 10...3600)
            backChannelLogoutTypedOnly = try c.value(.backChannelLogoutTypedOnly, default: false)
        }

        /// Whether logout tokens are taken: as configured, by default for every kind with ID tokens.
        public var acceptsBackChannelLogout: Bool { backChannelLogout ?? (kind != .oauth2) }
    }

    /// Lifetimes of TokenGate's own credentials.
    public struct Sessions: Sendable, Codable {
        public var accessTokenTTLSeconds: Int
        public var refreshTokenIdleTTLSeconds: Int
        public var refreshTokenAbsoluteTTLSeconds: Int
        public var handoffCodeTTLSeconds: Int
        public var pendingLoginTTLSeconds: Int
        /// How long a rotated-away refresh token still gets the same answer (a lost response).
        public var refreshReplayGraceSeconds: Int
        /// A device secret not used this long (no login with it, no refresh of its sessions) is
        /// refused, even before the sweeper removes the device.
        public var deviceIdleTTLSeconds: Int
        /// How long a transfer code (re-link after a lost Keychain) can be redeemed.
        public var transferCodeTTLSeconds: Int
        /// Live transfer codes per device (a new one retires the oldest); 0 turns them off.
        public var transferCodesPerDevice: Int
        /// Sessions, and as many upstream tokens, this instance keeps in memory
        /// (`CredentialCache`'s capacity): what bounds the cache's memory; past it, a new entry
        /// evicts an arbitrary one, which its next request reads from the database.
        public var memoryCacheEntries: Int

        enum CodingKeys: String, CodingKey, CaseIterable {
            case accessTokenTTLSeconds = "access_token_ttl_seconds"
            case refreshTokenIdleTTLSeconds = "refresh_token_idle_ttl_seconds"
            case refreshTokenAbsoluteTTLSeconds = "refresh_token_absolute_ttl_seconds"
            case handoffCodeTTLSeconds = "handoff_code_ttl_seconds"
            case pendingLoginTTLSeconds = "pending_login_ttl_seconds"
            case refreshReplayGraceSeconds = "refresh_replay_grace_seconds"
            case deviceIdleTTLSeconds = "device_idle_ttl_seconds"
            case transferCodeTTLSeconds = "transfer_code_ttl_seconds"
            case transferCodesPerDevice = "transfer_codes_per_device"
            case memoryCacheEntries = "memory_cache_entries"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            accessTokenTTLSeconds = try c.value(.accessTokenTTLSeconds, default: 900, in: 1...)
            refreshTokenIdleTTLSeconds = try c.value(.refreshTokenIdleTTLSeconds, default: 30 * 86400, in: 1...)
            refreshTokenAbsoluteTTLSeconds = try c.value(.refreshTokenAbsoluteTTLSeconds, default: 90 * 86400, in: 1...)
            handoffCodeTTLSeconds = try c.value(.handoffCodeTTLSeconds, default: 60, in: 1...)
            pendingLoginTTLSeconds = try c.value(.pendingLoginTTLSeconds, default: 600, in: 1...)
            refreshReplayGraceSeconds = try c.value(.refreshReplayGraceSeconds, default: 30, in: 0...300)
            deviceIdleTTLSeconds = try c.value(.deviceIdleTTLSeconds, default: 30 * 86400, in: 1...)
            transferCodeTTLSeconds = try c.value(.transferCodeTTLSeconds, default: 30 * 86400, in: 60...(365 * 86400), note: "a year")
            transferCodesPerDevice = try c.value(.transferCodesPerDevice, default: 3, in: 0...20, zero: "transfer codes off")
            memoryCacheEntries = try c.value(.memoryCacheEntries, default: 100_000, in: 1...10_000_000)
        }
    }

    public struct Sweeper: Sendable, Codable {
        public var intervalSeconds: Int

        enum CodingKeys: String, CodingKey, CaseIterable {
            case intervalSeconds = "interval_seconds"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.settings(keyedBy: CodingKeys.self)
            intervalSeconds = try c.value(.intervalSeconds, default: 60, in: 1...)
        }
    }
}

extension KeyedDecodingContainer {
    /// The value at `key`, or `fallback` when the key is absent or null.
    func value<T: Decodable>(_ key: Key, default fallback: @autoclosure () throws -> T) throws -> T {
        try decodeIfPresent(T.self, forKey: key) ?? fallback()
    }
}

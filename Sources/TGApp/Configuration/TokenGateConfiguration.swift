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

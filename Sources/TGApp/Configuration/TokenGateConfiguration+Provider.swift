extension TokenGateConfiguration {
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
        /// Whether the provider may push security event tokens (OpenID Shared Signals Framework
        /// 1.0, RFC 8935) to `<public_base_url>/auth/ssf/<name>` (default false).
        public var sharedSignals: Bool
        /// The `aud` those tokens must carry (default: `client_id`).
        public var sharedSignalsAudience: String?
        /// How old (`iat`) a security event token may be, besides `clock_skew_seconds` (default 600).
        public var sharedSignalsMaxAgeSeconds: Int
        /// The whole `Authorization` header value each push must carry (the stream's
        /// `authorization_header`); none required when absent.
        public var sharedSignalsAuthorization: Secret?
        /// The transmitter's `iss` when it is not the provider's issuer (its SSF metadata's `issuer`).
        public var sharedSignalsIssuer: String?
        /// The transmitter's `jwks_uri` when its keys are not the provider's.
        public var sharedSignalsJWKSURI: String?

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
            case sharedSignals = "shared_signals"
            case sharedSignalsAudience = "shared_signals_audience"
            case sharedSignalsMaxAgeSeconds = "shared_signals_max_age_seconds"
            case sharedSignalsAuthorization = "shared_signals_authorization"
            case sharedSignalsIssuer = "shared_signals_issuer"
            case sharedSignalsJWKSURI = "shared_signals_jwks_uri"
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
            sharedSignals = try c.value(.sharedSignals, default: false)
            sharedSignalsAudience = try c.decodeIfPresent(String.self, forKey: .sharedSignalsAudience)
            sharedSignalsMaxAgeSeconds = try c.value(.sharedSignalsMaxAgeSeconds, default: 600, in: 30...86400, note: "a day")
            sharedSignalsAuthorization = try c.decodeIfPresent(Secret.self, forKey: .sharedSignalsAuthorization)
            sharedSignalsIssuer = try c.decodeIfPresent(String.self, forKey: .sharedSignalsIssuer)
            sharedSignalsJWKSURI = try c.decodeIfPresent(String.self, forKey: .sharedSignalsJWKSURI)
        }

        /// Whether logout tokens are taken: as configured, by default for every kind with ID tokens.
        public var acceptsBackChannelLogout: Bool { backChannelLogout ?? (kind != .oauth2) }
    }
}

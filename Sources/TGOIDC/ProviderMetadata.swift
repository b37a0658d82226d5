import TGBase

/// What TokenGate needs to know about a provider's endpoints: from its discovery document
/// (OpenID Connect Discovery 1.0 §3) or written out for a plain OAuth 2.0 provider.
public struct ProviderMetadata: Sendable, Hashable {
    /// The issuer as published; for Entra's multi-tenant authorities a template containing
    /// `{tenantid}`.
    public var issuer: String
    public var authorizationEndpoint: String
    public var tokenEndpoint: String
    public var jwksURI: String?
    public var userinfoEndpoint: String?
    public var revocationEndpoint: String?
    public var endSessionEndpoint: String?
    public var idTokenSigningAlgorithms: [String]
    public var codeChallengeMethods: [String]
    /// RFC 9207: the provider adds `iss` to authorization responses.
    public var sendsIssuerInAuthorizationResponse: Bool

    public init(
        issuer: String,
        authorizationEndpoint: String,
        tokenEndpoint: String,
        jwksURI: String? = nil,
        userinfoEndpoint: String? = nil,
        revocationEndpoint: String? = nil,
        endSessionEndpoint: String? = nil,
        idTokenSigningAlgorithms: [String] = ["RS256"],
        codeChallengeMethods: [String] = ["S256"],
        sendsIssuerInAuthorizationResponse: Bool = false
    ) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.jwksURI = jwksURI
        self.userinfoEndpoint = userinfoEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.endSessionEndpoint = endSessionEndpoint
        self.idTokenSigningAlgorithms = idTokenSigningAlgorithms
        self.codeChallengeMethods = codeChallengeMethods
        self.sendsIssuerInAuthorizationResponse = sendsIssuerInAuthorizationResponse
    }

    /// Parses a discovery document. Refuses one whose `issuer` is not accepted (Discovery
    /// §4.3: otherwise a compromised document could make TokenGate accept another issuer's tokens)
    /// or that lacks a required endpoint; every endpoint must be an absolute http(s) URL.
    public init(discoveryDocument bytes: [UInt8], acceptingIssuer accepts: (String) -> Bool) throws(OIDCError) {
        guard let document = JSONValue(parsing: bytes)?.objectValue else {
            throw OIDCError(.invalidResponse("discovery document is not a JSON object"))
        }
        func url(_ member: String, required: Bool) throws(OIDCError) -> String? {
            guard let value = document[member] else {
                if required { throw OIDCError(.invalidResponse("discovery document lacks \(member)")) }
                return nil
            }
            guard let text = value.stringValue, Self.isWebURL(text) else {
                throw OIDCError(.invalidResponse("discovery document's \(member) is not an http(s) URL"))
            }
            return text
        }
        guard let issuer = document["issuer"]?.stringValue else {
            throw OIDCError(.invalidResponse("discovery document lacks issuer"))
        }
        guard accepts(issuer) else {
            throw OIDCError(.misconfigured("discovery document names another issuer than configured"))
        }
        self.issuer = issuer
        authorizationEndpoint = try url("authorization_endpoint", required: true) ?? ""
        tokenEndpoint = try url("token_endpoint", required: true) ?? ""
        jwksURI = try url("jwks_uri", required: true)
        userinfoEndpoint = try url("userinfo_endpoint", required: false)
        revocationEndpoint = try url("revocation_endpoint", required: false)
        endSessionEndpoint = try url("end_session_endpoint", required: false)
        idTokenSigningAlgorithms = document["id_token_signing_alg_values_supported"]?.stringList ?? ["RS256"]
        codeChallengeMethods = document["code_challenge_methods_supported"]?.stringList ?? []
        sendsIssuerInAuthorizationResponse = document["authorization_response_iss_parameter_supported"]?.boolValue ?? false
    }

    /// Issuers compare exactly (OIDC Core §3.1.3.7), except that one trailing slash is not a
    /// difference worth failing a login over when the configuration and document disagree on it.
    static func sameIssuer(_ a: String, _ b: String) -> Bool {
        a == b || a.trimmingTrailingSlash == b.trimmingTrailingSlash
    }

    static func isWebURL(_ text: String) -> Bool {
        let lower = text.lowercased()
        guard lower.hasPrefix("https://") || lower.hasPrefix("http://") else { return false }
        return !text.utf8.contains { $0 <= 0x20 || $0 == 0x7F }
    }
}

extension String {
    var trimmingTrailingSlash: Substring {
        hasSuffix("/") ? dropLast() : self[...]
    }
}

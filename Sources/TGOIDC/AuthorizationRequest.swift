import TGBase
import TGCrypto

/// What a login needs remembered between the redirect to the provider and the callback. Store
/// it server-side (it holds the PKCE verifier); look it up by ``state`` exactly once.
public struct PendingAuthorization: Sendable, Hashable, Codable {
    public var provider: String
    /// The B2C policy the login went to, nil elsewhere.
    public var policy: String?
    /// Opaque, 256 bits of randomness; the key of the pending login.
    public var state: String
    public var nonce: String
    /// RFC 7636 verifier: 43 characters of base64url (256 bits).
    public var codeVerifier: String
    /// The issuer of the authority the user was sent to (for RFC 9207's `iss` check).
    public var issuer: String

    public init(provider: String, policy: String?, state: String, nonce: String, codeVerifier: String, issuer: String) {
        self.provider = provider
        self.policy = policy
        self.state = state
        self.nonce = nonce
        self.codeVerifier = codeVerifier
        self.issuer = issuer
    }
}

/// An authorization request: the URL to send the browser to, and what to remember.
public struct AuthorizationRequest: Sendable {
    public var url: String
    public var pending: PendingAuthorization
}

/// Per-login choices from the app (all optional).
public struct AuthorizationOptions: Sendable, Hashable {
    public var policy: String?
    /// Scopes in addition to the provider's configured ones.
    public var extraScopes: [String] = []
    public var prompt: String?
    public var loginHint: String?
    public var domainHint: String?
    /// What the sign-in must prove (RFC 9470 §4: `acr_values`, `max_age`), sent on as asked.
    public var requirement = AuthenticationRequirement()
    /// An OpenID Connect `claims` request (OIDC Core §5.5), a JSON object: how Entra's
    /// Conditional Access asks for a stronger sign-in (its claims challenge).
    public var claims: String?

    public init(policy: String? = nil, extraScopes: [String] = [], prompt: String? = nil, loginHint: String? = nil, domainHint: String? = nil) {
        self.policy = policy
        self.extraScopes = extraScopes
        self.prompt = prompt
        self.loginHint = loginHint
        self.domainHint = domainHint
    }
}

/// PKCE (RFC 7636) with S256, the only method TokenGate uses.
public enum PKCE {
    public static func makeVerifier() -> String { SecureRandom.token(byteCount: 32) }

    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(Digest.sha256(Array(verifier.utf8)))
    }
}

extension AuthorizationOptions {
    /// Prompt values OIDC Core §3.1.2.1 defines (space-separated; Entra adds `select_account`,
    /// which is in the list too).
    static let promptValues: Set<String> = ["none", "login", "consent", "select_account", "create"]
    /// The longest `claims` request taken (Entra's challenges are a few hundred bytes).
    public static let claimsLimit = 2048

    /// Throws for option values that would make a malformed or dangerous request.
    func validate() throws(OIDCError) {
        if let prompt {
            let values = prompt.split(separator: " ").map(String.init)
            guard !values.isEmpty, values.allSatisfy(Self.promptValues.contains) else {
                throw OIDCError(.invalidRequest("prompt must be none, login, consent, select_account or create"))
            }
            guard !values.contains("none") || values.count == 1 else {
                throw OIDCError(.invalidRequest("prompt=none cannot be combined with other values (OIDC Core 3.1.2.1)"))
            }
        }
        if let claims {
            guard claims.utf8.count <= Self.claimsLimit, JSONValue(parsing: Array(claims.utf8))?.objectValue != nil else {
                throw OIDCError(.invalidRequest("claims must be a JSON object of at most \(Self.claimsLimit) bytes (OIDC Core 5.5)"))
            }
        }
        for scope in extraScopes where scope.isEmpty || scope.utf8.contains(where: { $0 <= 0x20 || $0 == 0x22 || $0 == 0x5C || $0 >= 0x7F }) {
            throw OIDCError(.invalidRequest("a scope contains a character scopes may not contain"))
        }
    }
}

extension OpenIDProvider {
    /// The prompt of an authorization request: the values the provider needs for a long-lived
    /// refresh token (the profile's, and a configured `authorize_parameters.prompt`) first, then
    /// those the app adds. They stay whatever the app sends; an app's `none` cannot be combined
    /// with them and is refused with the reason. Nil when nobody asks for one.
    func mergedPrompt(app: String?) throws(OIDCError) -> String? {
        var required = configuration.profile.requiredPrompts
        for (name, value) in configuration.extraAuthorizationParameters where name == "prompt" {
            for item in value.split(separator: " ").map(String.init) where !required.contains(item) { required.append(item) }
        }
        let asked = app.map { $0.split(separator: " ").map(String.init) } ?? []
        if asked.contains("none"), !required.isEmpty {
            throw OIDCError(
                .invalidRequest(
                    "prompt=none cannot be sent to this provider: it needs prompt=\(required.joined(separator: " ")) "
                        + "for a long-lived refresh token; leave prompt out or use login or select_account"
                )
            )
        }
        let merged = required + asked.filter { !required.contains($0) }
        return merged.isEmpty ? nil : merged.joined(separator: " ")
    }
}

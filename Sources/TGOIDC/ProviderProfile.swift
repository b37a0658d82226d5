/// The kind of provider, with its quirks built in. Base URLs are parameters (with the real
/// defaults) so sovereign clouds, custom domains and loopback test servers work the same way.
public enum ProviderProfile: Sendable, Hashable {
    /// Any OpenID provider, from `<issuer>/.well-known/openid-configuration`.
    case openIDConnect(issuer: String)
    /// A plain OAuth 2.0 provider with written-out endpoints: no ID token, no discovery.
    case oauth2(ProviderMetadata)
    /// Microsoft Entra ID v2. `tenant` is `common`, `organizations`, `consumers`, a tenant id or
    /// a tenant domain; `authority` the cloud's login host (`https://login.microsoftonline.us`,
    /// …); `allowedTenants`, when not empty, the only `tid` values accepted.
    case entra(tenant: String, authority: String = "https://login.microsoftonline.com", allowedTenants: Set<String> = [])
    /// Azure AD B2C: each policy (user flow) is its own authority,
    /// `<host>/<tenantDomain>/<policy>/v2.0`. The first policy is the default.
    case azureADB2C(host: String, tenantDomain: String, policies: [String])
    /// Amazon Cognito: `issuer` is `https://cognito-idp.<region>.amazonaws.com/<pool id>`,
    /// `domain` the hosted UI (`https://<prefix>.auth.<region>.amazoncognito.com`), which serves
    /// `/oauth2/revoke` and `/logout` although discovery names neither.
    case cognito(issuer: String, domain: String)
    /// Google: a refresh token only with `access_type=offline` and `prompt=consent`.
    case google(issuer: String = "https://accounts.google.com")
    /// Yahoo! JAPAN YConnect v2: `nonce` is required.
    case yahooJapan(issuer: String = "https://auth.login.yahoo.co.jp/yconnect/v2")

    /// Where the metadata of `policy`'s authority comes from, or nil for written-out metadata.
    func discoveryURL(policy: String?) throws(OIDCError) -> String? {
        switch self {
        case .openIDConnect(let issuer), .cognito(let issuer, _), .google(let issuer), .yahooJapan(let issuer):
            return "\(issuer.trimmingTrailingSlash)/.well-known/openid-configuration"
        case .oauth2:
            return nil
        case .entra(let tenant, let authority, _):
            return "\(authority.trimmingTrailingSlash)/\(tenant)/v2.0/.well-known/openid-configuration"
        case .azureADB2C(let host, let tenantDomain, _):
            let policy = try resolvedPolicy(policy) ?? ""
            return "\(host.trimmingTrailingSlash)/\(tenantDomain)/\(policy)/v2.0/.well-known/openid-configuration"
        }
    }

    /// The policy a request is for: B2C's named one (default: the first), nil elsewhere.
    /// Throws for an unknown policy, or for a policy given to a provider without policies.
    func resolvedPolicy(_ policy: String?) throws(OIDCError) -> String? {
        guard case .azureADB2C(_, _, let policies) = self else {
            if policy != nil { throw OIDCError(.misconfigured("this provider has no policies")) }
            return nil
        }
        guard let policy else {
            guard let first = policies.first else { throw OIDCError(.misconfigured("no B2C policy configured")) }
            return first
        }
        // B2C policy names are case-insensitive.
        guard let match = policies.first(where: { $0.lowercased() == policy.lowercased() }) else {
            throw OIDCError(.misconfigured("unknown policy"))
        }
        return match
    }

    /// Whether a discovery document's issuer is acceptable for this profile. Entra and B2C publish
    /// issuers with tenant GUIDs (or the `{tenantid}` template) that the configuration does not
    /// know; for them the issuer must live under the configured authority.
    func acceptsDiscoveredIssuer(_ issuer: String) -> Bool {
        switch self {
        case .openIDConnect(let expected), .cognito(let expected, _), .google(let expected), .yahooJapan(let expected):
            return ProviderMetadata.sameIssuer(issuer, expected)
        case .oauth2(let metadata):
            return ProviderMetadata.sameIssuer(issuer, metadata.issuer)
        case .entra(_, let authority, _):
            return issuer.hasPrefix("\(authority.trimmingTrailingSlash)/") && issuer.trimmingTrailingSlash.hasSuffix("/v2.0")
        case .azureADB2C(let host, _, _):
            return issuer.hasPrefix("\(host.trimmingTrailingSlash)/")
        }
    }

    /// Fills in what a provider serves but does not advertise.
    func completing(_ metadata: ProviderMetadata) -> ProviderMetadata {
        var metadata = metadata
        if case .cognito(_, let domain) = self {
            let base = domain.trimmingTrailingSlash
            metadata.revocationEndpoint = metadata.revocationEndpoint ?? "\(base)/oauth2/revoke"
            metadata.endSessionEndpoint = metadata.endSessionEndpoint ?? "\(base)/logout"
        }
        return metadata
    }

    /// Scopes as this provider wants them: Google refuses `offline_access` (it uses
    /// `access_type=offline` instead).
    func adjustedScopes(_ scopes: [String]) -> [String] {
        if case .google = self { return scopes.filter { $0 != "offline_access" } }
        return scopes
    }

    /// Parameters the profile adds to every authorization request (the prompt apart: see
    /// ``requiredPrompts``).
    var authorizationParameters: [(name: String, value: String)] {
        if case .google = self { return [("access_type", "offline")] }
        return []
    }

    /// Prompt values without which the provider issues no long-lived refresh token (Google:
    /// `consent`); an app's prompt adds to them.
    var requiredPrompts: [String] {
        if case .google = self { return ["consent"] }
        return []
    }

    /// Whether ID tokens are expected (not for plain OAuth 2.0).
    var issuesIDTokens: Bool {
        if case .oauth2 = self { return false }
        return true
    }

    var allowedTenants: Set<String> {
        if case .entra(_, _, let allowed) = self { return allowed }
        return []
    }

    var isCognito: Bool {
        if case .cognito = self { return true }
        return false
    }
}

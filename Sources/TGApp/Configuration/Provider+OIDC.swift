import TGCrypto
import TGOIDC

/// From a configured provider to the OIDC client's configuration.
extension TokenGateConfiguration.Provider {
    /// The problems of this provider's kind-specific settings, as (key, message) pairs.
    func kindProblems() -> [(key: String, message: String)] {
        var problems: [(key: String, message: String)] = []
        func require(_ value: String?, _ key: String, _ why: String) {
            if (value ?? "").isEmpty { problems.append((key, "is required for kind \(kind.rawValue) (\(why))")) }
        }
        switch kind {
        case .oidc:
            require(issuer, "issuer", "discovery is <issuer>/.well-known/openid-configuration")
        case .oauth2:
            if endpoints == nil { problems.append(("endpoints", "is required for kind oauth2 (authorization and token URLs)")) }
        case .entra:
            require(tenant, "tenant", "common, organizations, consumers or a tenant id")
        case .b2c:
            require(tenant, "tenant", "the tenant domain, e.g. contoso.onmicrosoft.com")
            require(authority, "authority", "the B2C login host, e.g. https://contoso.b2clogin.com")
            if policies.isEmpty { problems.append(("policies", "must name at least one user flow for kind b2c")) }
        case .cognito:
            require(issuer, "issuer", "https://cognito-idp.<region>.amazonaws.com/<user pool id>")
            require(authority, "authority", "the hosted UI domain, e.g. https://example.auth.eu-west-1.amazoncognito.com")
        case .google, .yahoojp:
            break
        }
        if kind != .entra, !allowedTenants.isEmpty { problems.append(("allowed_tenants", "applies to kind entra only")) }
        if kind != .b2c, !policies.isEmpty { problems.append(("policies", "applies to kind b2c only")) }
        if kind != .oauth2, endpoints != nil { problems.append(("endpoints", "applies to kind oauth2 only (others use discovery)")) }
        if authMethod == .privateKeyJWT {
            // A certificate names the key by its thumbprints instead (Entra ID).
            if privateKeyCertificate == nil { require(privateKeyID, "private_key_id", "the kid the provider knows the key by") }
            let key = privateKey.flatMap { $0.value.isEmpty ? nil : $0 }.map { try? PrivateKey(pemRepresentation: $0.value) }
            if case .some(.none) = key { problems.append(("private_key", "is not a PEM private key")) }
            if let pem = privateKeyCertificate?.value {
                if let certificate = try? Certificate(pemRepresentation: pem) {
                    if case .some(.some(let key)) = key, !certificate.certifies(key) {
                        problems.append(("private_key_certificate", "is not the certificate of private_key (their public keys differ)"))
                    }
                } else {
                    problems.append(("private_key_certificate", "is not a PEM certificate (-----BEGIN CERTIFICATE-----)"))
                }
            }
        } else if privateKeyCertificate != nil {
            problems.append(("private_key_certificate", "applies to auth_method private_key_jwt only"))
        }
        if kind == .oauth2, backChannelLogout == true {
            problems.append(("backchannel_logout", "needs a provider that issues ID tokens (kind oauth2 has no keys to sign logout tokens with)"))
        }
        problems += sharedSignalsProblems()
        return problems
    }

    /// The URLs this provider's settings name, to be checked as web URLs.
    var configuredURLs: [(key: String, url: String)] {
        var urls: [(key: String, url: String)] = []
        if !issuer.isEmpty { urls.append(("issuer", issuer)) }
        if let authority { urls.append(("authority", authority)) }
        if let sharedSignalsJWKSURI { urls.append(("shared_signals_jwks_uri", sharedSignalsJWKSURI)) }
        if let endpoints {
            urls.append(("endpoints.authorization", endpoints.authorization))
            urls.append(("endpoints.token", endpoints.token))
            for (key, value) in [("revocation", endpoints.revocation), ("userinfo", endpoints.userinfo), ("end_session", endpoints.endSession)] {
                if let value { urls.append(("endpoints.\(key)", value)) }
            }
        }
        return urls
    }

    /// The OIDC client's view of this provider. Call on a validated configuration.
    func oidcConfiguration(callbackURL: String) throws -> ProviderConfiguration {
        let profile: ProviderProfile =
            switch kind {
            case .oidc: .openIDConnect(issuer: issuer)
            case .oauth2:
                .oauth2(
                    ProviderMetadata(
                        issuer: issuer,
                        authorizationEndpoint: endpoints?.authorization ?? "",
                        tokenEndpoint: endpoints?.token ?? "",
                        userinfoEndpoint: endpoints?.userinfo,
                        revocationEndpoint: endpoints?.revocation,
                        endSessionEndpoint: endpoints?.endSession
                    )
                )
            case .entra:
                .entra(
                    tenant: tenant ?? "common",
                    authority: authority ?? "https://login.microsoftonline.com",
                    allowedTenants: Set(allowedTenants.map { $0.lowercased() })
                )
            case .b2c: .azureADB2C(host: authority ?? "", tenantDomain: tenant ?? "", policies: policies)
            case .cognito: .cognito(issuer: issuer, domain: authority ?? "")
            case .google: .google(issuer: issuer)
            case .yahoojp: .yahooJapan(issuer: issuer)
            }
        let authentication: ClientAuthentication
        switch authMethod {
        case .clientSecretBasic: authentication = .clientSecretBasic(secret: clientSecret?.value ?? "")
        case .clientSecretPost: authentication = .clientSecretPost(secret: clientSecret?.value ?? "")
        case .privateKeyJWT:
            let key = try PrivateKey(pemRepresentation: privateKey?.value ?? "")
            let algorithm: JWSAlgorithm =
                switch key.keyType {
                case .ec(.p256): .es256
                case .ec(.p384): .es384
                default: .rs256
                }
            let certificate = try privateKeyCertificate.map { try Certificate(pemRepresentation: $0.value) }
            authentication = .privateKeyJWT(key: key, keyID: privateKeyID ?? "", algorithm: algorithm, certificate: certificate)
        }
        var configuration = ProviderConfiguration(
            name: name,
            profile: profile,
            clientID: clientID,
            clientAuthentication: authentication,
            redirectURI: callbackURL,
            scopes: scopes
        )
        configuration.responseMode = responseMode == .formPost ? .formPost : .query
        // Entra's UserInfo lives on Graph and wants a Graph token: not asked unless configured.
        configuration.userInfo = ProviderConfiguration.UserInfoUse(rawValue: (userInfo ?? (kind == .entra ? .never : .auto)).rawValue) ?? .auto
        configuration.clockSkew = .seconds(clockSkewSeconds)
        configuration.jwksMaxAge = .seconds(jwksMaxAgeSeconds)
        configuration.acceptsBackChannelLogout = acceptsBackChannelLogout
        configuration.logoutTokenMaxAge = .seconds(backChannelLogoutMaxAgeSeconds)
        configuration.logoutTokenRequiresExplicitType = backChannelLogoutTypedOnly
        configuration.securityEvents = securityEventSettings
        configuration.extraAuthorizationParameters = authorizeParameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        return configuration
    }
}

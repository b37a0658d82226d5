/// Everything that can go wrong talking to an identity provider, classified the way the rest of
/// TokenGate acts on it. Descriptions never carry a token, a code, a secret or the provider's
/// raw body: they are safe to log and to map to an answer.
public struct OIDCError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The provider refused the grant for good: a new interactive login is the only way on
        /// (`invalid_grant`, `interaction_required`, `login_required`, `account_selection_required`,
        /// or another OAuth error code of a 4xx answer but 429). The stored grant is dead.
        case grantRejected(code: String)
        /// The provider refused TokenGate's client (`invalid_client`, `unauthorized_client`), or
        /// refused the request without an OAuth error at all (401, 403, 404, 405… with an empty
        /// or HTML body: a firewall, a moved tenant, a wrong endpoint). Nothing is concluded about
        /// any grant: the provider or TokenGate's configuration is at fault, and an operator must
        /// check the client's credentials, registration and endpoints. `code` is the OAuth error
        /// code, or `HTTP <status>` when the answer had none.
        case clientRejected(code: String)
        /// A 400 without an OAuth error body. glewlwyd answers both a revoked refresh token and a
        /// wrong client secret that way, so the answer alone cannot tell whether the grant or the
        /// client is refused: ask the provider something that only checks the client
        /// (``OpenIDProvider/checkClient()``) before concluding.
        case unclearRejection(code: String)
        /// The provider refused the scopes asked for (`invalid_scope`, `consent_required`, or
        /// Entra's `suberror: consent_required`), not the grant: that one request fails.
        case scopeRefused(code: String)
        /// The provider could not be reached or answered 5xx / 429 / `temporarily_unavailable`.
        /// Keep everything and try again later (after `retryAfter` when the provider said).
        case providerUnavailable(retryAfter: Duration?)
        /// The provider answered something unusable (malformed JSON, a required member missing,
        /// the wrong token type). Nothing is concluded about the grant.
        case invalidResponse(String)
        /// The ID token failed validation.
        case invalidIDToken(IDTokenProblem)
        /// A back-channel logout token failed validation (OpenID Connect Back-Channel Logout 1.0 §2.6).
        case invalidLogoutToken(LogoutTokenProblem)
        /// A security event token failed validation (RFC 8417, OpenID Shared Signals Framework 1.0).
        case invalidSecurityEvent(SecurityEventProblem)
        /// TokenGate's own settings are wrong for this provider (`invalid_client`,
        /// `unauthorized_client`, an unknown policy, a missing endpoint). Nothing is concluded
        /// about the grant; an operator must act.
        case misconfigured(String)
        /// A login option from the app is not acceptable (an unknown prompt value, a bad scope).
        case invalidRequest(String)
        /// The provider sent the user back with an error (`access_denied`, …).
        case authorizationFailed(code: String)
        /// The callback's `iss` names another issuer (RFC 9207): a mix-up attack or a bug.
        case issuerMismatch
    }

    /// What the caller must do with a stored grant.
    public enum Classification: Sendable, Hashable {
        /// The grant is dead: mark the account stale, end its sessions, answer `interaction_required`.
        case fatal
        /// The provider refuses TokenGate itself: keep every grant, back off the provider as a
        /// whole, answer 503, and tell the operator which setting to check.
        case clientRefused
        /// Either of the two: check the client before concluding (``OIDCError/Kind/unclearRejection(code:)``).
        case unclear
        /// The scopes asked for were refused: fail this request only, keep the grant.
        case scopeRefused
        /// Keep the grant and answer 503 with `Retry-After`.
        case transient
        /// Neither: keep the grant; the login or the response at hand failed.
        case failed
    }

    public let kind: Kind

    public init(_ kind: Kind) {
        self.kind = kind
    }

    public var classification: Classification {
        switch kind {
        case .grantRejected: .fatal
        case .clientRejected: .clientRefused
        case .unclearRejection: .unclear
        case .scopeRefused: .scopeRefused
        case .providerUnavailable: .transient
        case .invalidResponse, .invalidIDToken, .invalidLogoutToken, .invalidSecurityEvent, .misconfigured, .invalidRequest, .authorizationFailed,
            .issuerMismatch:
            .failed
        }
    }

    /// Codes that say the provider refuses TokenGate's client itself.
    static let clientCodes: Set<String> = ["invalid_client", "unauthorized_client"]

    /// Codes that refuse the scopes asked for rather than the grant.
    static let scopeCodes: Set<String> = ["invalid_scope", "consent_required"]

    /// Codes that mean "try again later" although they come in a 4xx body.
    static let transientCodes: Set<String> = ["temporarily_unavailable", "server_error", "slow_down"]

    /// UserInfo answered about another subject than the ID token's (OIDC Core §5.3.2).
    public static let userInfoSubjectMismatch = OIDCError(.invalidResponse("userinfo is about another subject"))

    public var description: String {
        switch kind {
        case .grantRejected(let code): "identity provider rejected the grant (\(code))"
        case .clientRejected(let code):
            "identity provider rejected TokenGate's client (\(code)): check the provider's client_id, secret or key, "
                + "registration and endpoints"
        case .unclearRejection(let code): "identity provider refused the refresh without saying why (\(code))"
        case .scopeRefused(let code): "identity provider refused the requested scopes (\(code))"
        case .providerUnavailable(let retryAfter):
            "identity provider unavailable" + (retryAfter.map { " (retry after \($0.components.seconds) s)" } ?? "")
        case .invalidResponse(let what): "identity provider sent an invalid response: \(what)"
        case .invalidIDToken(let problem): "ID token rejected: \(problem)"
        case .invalidLogoutToken(let problem): "logout token rejected: \(problem)"
        case .invalidSecurityEvent(let problem): "security event token rejected: \(problem)"
        case .misconfigured(let what): "provider configuration problem: \(what)"
        case .invalidRequest(let what): "invalid login request: \(what)"
        case .authorizationFailed(let code): "authorization failed at the identity provider (\(code))"
        case .issuerMismatch: "the callback's issuer is not this provider's (possible mix-up attack)"
        }
    }
}

/// Why an ID token was rejected (and, for the checks they share, a logout token:
/// ``LogoutTokenProblem/token(_:)``).
public enum IDTokenProblem: String, Error, Sendable, Hashable, CustomStringConvertible {
    case malformed = "not a well-formed JWS"
    case algorithmNotAllowed = "signature algorithm not allowed"
    case unknownKey = "signed by a key the provider does not publish"
    case badSignature = "signature does not verify"
    case issuer = "wrong issuer"
    case tenantNotAllowed = "tenant not allowed"
    case audience = "not issued for this client"
    case authorizedParty = "azp is not this client"
    case expired = "expired"
    case issuedInFuture = "issued in the future"
    case notYetValid = "not yet valid"
    case nonce = "nonce does not match the login"
    case subject = "subject differs from the account's"

    public var description: String { rawValue }
}

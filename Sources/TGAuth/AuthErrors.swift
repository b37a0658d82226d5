public import TGBase

/// An error of the token endpoint, answered as RFC 6749 §5.2 JSON.
public struct OAuthError: Error, Sendable, Equatable {
    public enum Code: String, Sendable {
        case invalidRequest = "invalid_request"
        case invalidClient = "invalid_client"
        case invalidGrant = "invalid_grant"
        case unauthorizedClient = "unauthorized_client"
        case unsupportedGrantType = "unsupported_grant_type"
        case invalidScope = "invalid_scope"
        case temporarilyUnavailable = "temporarily_unavailable"
        /// RFC 8693 §2.2.2: the `resource` or `audience` names nothing TokenGate serves.
        case invalidTarget = "invalid_target"
        /// The provider no longer honours the account's grant: only a new login can help.
        case interactionRequired = "interaction_required"
        /// RFC 9449 §5: the DPoP proof is missing, invalid, or of another key than the token's.
        case invalidDPoPProof = "invalid_dpop_proof"
        /// RFC 9449 §8: the proof needs the nonce of ``OAuthError/dpopNonce``.
        case useDPoPNonce = "use_dpop_nonce"
    }

    public var code: Code
    /// Says what to do; never carries a token, a provider body or a database message.
    public var description: String
    public var retryAfter: Int?
    /// More members of the error object (RFC 6749 §5.2 allows them); never a secret.
    public var members: [String: JSONValue] = [:]
    /// The nonce a DPoP proof must carry (sent as `DPoP-Nonce`).
    public var dpopNonce: String?

    public init(_ code: Code, _ description: String, retryAfter: Int? = nil) {
        self.code = code
        self.description = description
        self.retryAfter = retryAfter
    }

    /// A refused proof at the token endpoint.
    public init(_ error: DPoPError) {
        self.init(error.code == .useNonce ? .useDPoPNonce : .invalidDPoPProof, error.description)
        dpopNonce = error.nonce
    }
}

/// An error of the other auth endpoints, answered as problem+json with a stable `code`.
public struct AuthProblem: Error, Sendable, Equatable {
    public enum Code: String, Sendable, CaseIterable {
        /// A parameter is missing or malformed (400).
        case invalidRequest = "invalid_request"
        /// `client_id` names no registered app (400, never a redirect).
        case unknownClient = "unknown_client"
        /// `redirect_uri` is not one of the app's registered URIs (400, never a redirect).
        case redirectURINotRegistered = "redirect_uri_not_registered"
        /// `provider` names no provider this app may use (400).
        case unknownProvider = "unknown_provider"
        /// The callback's `state` is unknown, used or expired (400): start the login again.
        case loginExpired = "login_expired"
        /// No valid TokenGate access token (401): refresh it or log in.
        case invalidToken = "invalid_token"
        /// The account is not one of this device's (404).
        case accountNotFound = "account_not_found"
        /// The identity provider cannot be reached or failed (503, Retry-After).
        case idpUnavailable = "idp_unavailable"
        /// The provider no longer honours the account's grant (401): the account's sessions have
        /// ended; start a login (`login_endpoint`, `provider`, `login_hint` say how).
        case interactionRequired = "interaction_required"
        /// The account logged in with another provider than the one this API needs (403).
        case wrongProvider = "wrong_provider"
        /// The provider refused the scopes an API needs for this account (403, `scope` names
        /// them); the account stays signed in.
        case consentRequired = "consent_required"
        /// The configuration turned transfer codes off (403).
        case transferDisabled = "transfer_disabled"
    }

    public var code: Code
    public var detail: String
    public var retryAfter: Int?
    /// More members for the answer (e.g. what a new login needs); never a secret.
    public var details: [String: String]

    public init(_ code: Code, _ detail: String, retryAfter: Int? = nil, details: [String: String] = [:]) {
        self.code = code
        self.detail = detail
        self.retryAfter = retryAfter
        self.details = details
    }
}

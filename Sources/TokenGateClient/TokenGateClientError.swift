public import Foundation

/// Why a call of ``TokenGateClient`` failed. The cases an app acts on are typed; nothing the
/// gateway said is swallowed (``server(status:code:detail:)`` carries the rest).
public enum TokenGateClientError: Error, Sendable, Equatable {
    /// The account's grant is gone (logged out elsewhere, revoked at the provider, expired): it
    /// was removed from this device; sign in again with the hint's provider and login hint.
    case signInRequired(account: String?, provider: String?, loginHint: String?)
    /// The provider refused scopes an API needs (the account stays signed in): sign in again
    /// with consent, or do without that API.
    case consentRequired(scopes: [String])
    /// An API wants a stronger or more recent sign-in than the account's (RFC 9470): do not
    /// retry as it is; ``TokenGateClient/stepUp(_:account:)`` with the challenge, then retry.
    case stepUpRequired(StepUpChallenge)
    /// The gateway or the provider behind it cannot answer now; try again after `retryAfter`
    /// seconds (when the gateway said).
    case unavailable(retryAfter: Int?)
    /// The user closed the browser before signing in.
    case cancelled
    /// The redirect back did not carry this sign-in's `state` (or came from another issuer):
    /// not this login's answer, ignored.
    case stateMismatch
    /// The sign-in ended with an error at the provider or the gateway (`access_denied`, …).
    case authorizationFailed(error: String, description: String?)
    /// A request for another origin than the gateway's: tokens go to the gateway only.
    case foreignOrigin(URL)
    /// No account with that id on this device.
    case unknownAccount(String)
    /// No transfer code is kept (``TokenGateClient/prepareTransferCode(account:)`` makes one).
    case noTransferCode
    /// The gateway answered something this library does not expect (a status, a body).
    case server(status: Int, code: String?, detail: String?)
    /// The answer could not be read (not JSON, a member missing).
    case invalidResponse(String)
}

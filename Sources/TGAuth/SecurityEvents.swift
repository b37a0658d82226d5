import Foundation

/// The event types a Shared Signals receiver acts on (OpenID CAEP 1.0, OpenID RISC 1.0, SSF 1.0):
/// their URIs, what TokenGate does, and the bounded label metrics and logs name them by.
public enum SecurityEventType: String, Sendable, CaseIterable {
    /// CAEP: the subject's session at the provider was revoked: their sessions end.
    case sessionRevoked = "https://schemas.openid.net/secevent/caep/event-type/session-revoked"
    /// CAEP: a credential changed (password, passkey, …): sessions end and the grant is revoked.
    case credentialChange = "https://schemas.openid.net/secevent/caep/event-type/credential-change"
    /// CAEP: claims of the subject's tokens changed: cached upstream access tokens are dropped.
    case tokenClaimsChange = "https://schemas.openid.net/secevent/caep/event-type/token-claims-change"
    /// RISC: the account was disabled: sessions end and the grant is revoked.
    case accountDisabled = "https://schemas.openid.net/secevent/risc/event-type/account-disabled"
    /// RISC: the account was deleted: sessions end and the grant is revoked.
    case accountPurged = "https://schemas.openid.net/secevent/risc/event-type/account-purged"
    /// RISC: all the subject's sessions were revoked: sessions end and the grant is revoked.
    case sessionsRevoked = "https://schemas.openid.net/secevent/risc/event-type/sessions-revoked"
    /// SSF: the transmitter checks the stream works: acknowledged.
    case verification = "https://schemas.openid.net/secevent/ssf/event-type/verification"

    /// What TokenGate does on an event.
    public enum Action: Sendable {
        /// End the subject's sessions, as a back-channel logout naming only `sub` does.
        case endSessions
        /// End the subject's sessions and remove the account, its grant revoked at the provider.
        case endSessionsAndRevokeGrant
        /// Delete the subject's stored and cached upstream access tokens (on every instance).
        case dropAccessTokens
        /// Nothing but the acknowledgement.
        case acknowledge
    }

    public var action: Action {
        switch self {
        case .sessionRevoked: .endSessions
        case .credentialChange, .accountDisabled, .accountPurged, .sessionsRevoked: .endSessionsAndRevokeGrant
        case .tokenClaimsChange: .dropAccessTokens
        case .verification: .acknowledge
        }
    }

    /// The metric and log label: the URI's last segment in snake_case (`session_revoked`), or
    /// `unknown` for an event type of no case here.
    public var label: String { String(rawValue.split(separator: "/").last ?? "").replacingOccurrences(of: "-", with: "_") }

    public static let unknownLabel = "unknown"
}

/// What one security event token did.
public struct SecurityEventResult: Sendable, Equatable {
    /// Each event's label (``SecurityEventType/label`` or `unknown`) with its outcome: `ended`,
    /// `tokens_dropped`, `no_match` (no account of that subject here), `unmapped_subject` (a
    /// subject format naming no account), `acknowledged` (verification and unknown events).
    public var events: [Outcome] = []
    public var sessionsEnded = 0
    public var accountsRemoved = 0
    public var accessTokensDropped = 0
    /// The token's `jti` was acted on before (a transmitter's retry): nothing was done.
    public var duplicate = false
    /// What became of each removed account's upstream refresh token.
    public var revocations: [UpstreamRevocation] = []

    public struct Outcome: Sendable, Equatable {
        public var event: String
        public var outcome: String
    }
}

/// A security event token refused, with its RFC 8935 §2.4 error code: the route answers 400
/// with `{"err": code, "description": description}`.
public struct SecurityEventRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// The Security Event Token Error Codes registry (RFC 8935 §7.1).
    public enum Code: String, Sendable, CaseIterable {
        /// The request cannot be parsed as a SET, or an event in it is not as its type defines.
        case invalidRequest = "invalid_request"
        /// A key used to sign the SET is unacceptable (unknown, wrong algorithm, bad signature).
        case invalidKey = "invalid_key"
        /// The SET's issuer is not the provider's.
        case invalidIssuer = "invalid_issuer"
        /// The SET's audience is not TokenGate's.
        case invalidAudience = "invalid_audience"
        /// The transmitter's request could not be authenticated (the `Authorization` header).
        case authenticationFailed = "authentication_failed"
        /// The transmitter may not send SETs here.
        case accessDenied = "access_denied"
    }

    public var code: Code
    public var description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}

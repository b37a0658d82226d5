public import Foundation
import TGPostgres

/// Whom a provider's back-channel logout token names (OpenID Connect Back-Channel Logout 1.0
/// §2.7): the sessions of one provider session (`sid`), narrowed to one subject when the token
/// has both, or every session of one subject. Accounts are matched on provider, issuer and
/// subject, sessions and handoff codes on the provider session id their login's ID token carried.
public struct ProviderLogoutTarget: Sendable, Equatable {
    public var provider: String
    /// The token's `iss` (the account's issuer: for Entra, the tenant's).
    public var issuer: String
    public var subject: String?
    public var sessionID: String?

    /// At least one of `subject` and `sessionID` (a validated logout token has one).
    public init(provider: String, issuer: String, subject: String?, sessionID: String?) {
        precondition(subject != nil || sessionID != nil, "a logout target names a subject or a session")
        self.provider = provider
        self.issuer = issuer
        self.subject = subject
        self.sessionID = sessionID
    }

    /// The accounts (alias `a`) this names: the provider's, with this issuer (and subject).
    var accountCondition: PostgresQuery {
        guard let subject else { return "a.provider = \(provider) AND a.issuer = \(issuer)" }
        return "a.provider = \(provider) AND a.issuer = \(issuer) AND a.subject = \(subject)"
    }
}

/// The `jti`s of the logout tokens accepted (`logout_token_ids`), shared by every instance: a
/// token is acted on once, whichever instance it reaches and however often it is sent.
public struct LogoutTokenStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// Records `provider`'s token `tokenID` until `until`; false when it was recorded before (a
    /// replay). One insert decides: of two transactions racing with one token, the second waits
    /// for the first and finds its row (or inserts when the first rolled back).
    public func record(provider: String, tokenID: String, until: Date) async throws -> Bool {
        try await executor.query(
            """
            INSERT INTO logout_token_ids (provider, jti, expires_at) VALUES (\(provider), \(tokenID), \(until))
            ON CONFLICT (provider, jti) DO NOTHING
            """
        ).affectedRows == 1
    }

    /// Forgets up to `limit` ids past their window (their tokens are refused as too old).
    public func deleteExpired(now: Date, limit: Int) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM logout_token_ids WHERE (provider, jti) IN
              (SELECT provider, jti FROM logout_token_ids WHERE expires_at <= \(now) LIMIT \(limit))
            """
        ).affectedRows
    }
}

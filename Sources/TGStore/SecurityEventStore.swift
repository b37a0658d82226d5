public import Foundation
import TGPostgres

/// What a provider's security event tokens (OpenID Shared Signals Framework 1.0) need stored:
/// the `jti`s accepted (`security_event_token_ids`), shared by every instance so that a token is
/// acted on once whichever instance it reaches; and the upstream access tokens a
/// `token-claims-change` event makes stale.
public struct SecurityEventStore: Sendable {
    let executor: Executor

    init(_ executor: Executor) { self.executor = executor }

    /// Records `provider`'s token `tokenID` until `until`; false when it was recorded before (a
    /// replay). One insert decides, as ``LogoutTokenStore/record(provider:tokenID:until:)``.
    public func record(provider: String, tokenID: String, until: Date) async throws -> Bool {
        try await executor.query(
            """
            INSERT INTO security_event_token_ids (provider, jti, expires_at) VALUES (\(provider), \(tokenID), \(until))
            ON CONFLICT (provider, jti) DO NOTHING
            """
        ).affectedRows == 1
    }

    /// Forgets up to `limit` ids past their window (their tokens are refused as too old).
    public func deleteExpired(now: Date, limit: Int) async throws -> Int {
        try await executor.query(
            """
            DELETE FROM security_event_token_ids WHERE (provider, jti) IN
              (SELECT provider, jti FROM security_event_token_ids WHERE expires_at <= \(now) LIMIT \(limit))
            """
        ).affectedRows
    }

    /// Deletes the stored upstream access tokens of the account `provider`, `issuer`, `subject`
    /// names, so that its next API call refreshes them; returns the account, nil when there is
    /// none. The deletion's trigger (migration 0003) tells every instance to drop what it cached.
    public func dropAccessTokens(provider: String, issuer: String, subject: String) async throws -> (account: UUID, dropped: Int)? {
        let rows = try await executor.query(
            "SELECT id FROM accounts WHERE provider = \(provider) AND issuer = \(issuer) AND subject = \(subject)"
        )
        guard let account = try rows.first?.value(UUID.self, "id") else { return nil }
        let dropped = try await executor.query("DELETE FROM upstream_access_tokens WHERE account_id = \(account)").affectedRows
        return (account, dropped)
    }
}

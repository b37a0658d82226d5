public import Foundation
import Logging
import TGBase
import TGOIDC
import TGPostgres

/// A request's TokenGate session, found from its bearer access token.
public struct SessionContext: Sendable, Equatable {
    public var sessionID: UUID
    public var deviceID: UUID
    public var clientID: String
    public var account: AccountSummary
    /// When the session ends unless refreshed (idle expiry).
    public var expiresAt: Date
    /// When the bearer access token the session was found by expires.
    public var accessTokenExpiresAt: Date
}

/// An account of the caller's device, as `/auth/accounts` lists it.
public struct DeviceAccount: Sendable, Equatable {
    public var account: AccountSummary
    /// The account the request's token belongs to.
    public var isCurrent: Bool
}

extension AuthService {
    /// The session of a bearer access token that is unexpired and whose account is active.
    public func authenticate(accessToken: String) async throws -> SessionContext {
        guard let context = try await session(accessToken: accessToken, requireValid: true) else { throw Self.invalidAccessToken }
        return context
    }

    static let invalidAccessToken = AuthProblem(.invalidToken, "The access token is invalid or expired. Refresh it, or log in again.")

    func session(accessToken: String, requireValid: Bool) async throws -> SessionContext? {
        guard let hash = OpaqueToken.hashIfWellFormed(accessToken) else { return nil }
        return try await session(hash: hash, requireValid: requireValid)
    }

    func session(hash: PostgresBytes, requireValid: Bool) async throws -> SessionContext? {
        let now = clock.now()
        let rows = try await database.query(
            """
            SELECT s.id AS session_id, s.device_id, s.client_id, s.access_expires_at, s.expires_at, a.state,
              a.id, a.provider, a.issuer, a.subject, a.tenant, a.claims::text AS claims
            FROM sessions s JOIN accounts a ON a.id = s.account_id
            WHERE s.access_token_hash = \(hash)
            """
        )
        guard let row = rows.first else { return nil }
        if requireValid {
            guard try row.decode(Date.self, "access_expires_at") > now, try row.decode(Date.self, "expires_at") > now,
                try row.decode(String.self, "state") == "active"
            else { return nil }
        }
        return SessionContext(
            sessionID: try row.decode(UUID.self, "session_id"),
            deviceID: try row.decode(UUID.self, "device_id"),
            clientID: try row.decode(String.self, "client_id"),
            account: try AccountSummary(row: row),
            expiresAt: try row.decode(Date.self, "expires_at"),
            accessTokenExpiresAt: try row.decode(Date.self, "access_expires_at")
        )
    }

    /// The accounts signed in on the caller's device, the current one marked.
    public func deviceAccounts(_ context: SessionContext) async throws -> [DeviceAccount] {
        let now = clock.now()
        let rows = try await database.query(
            """
            SELECT a.id, a.provider, a.issuer, a.subject, a.tenant, a.claims::text AS claims
            FROM sessions s JOIN accounts a ON a.id = s.account_id
            WHERE s.device_id = \(context.deviceID) AND s.expires_at > \(now) AND a.state = 'active'
            ORDER BY s.created_at, a.id
            """
        )
        return try rows.rows.map { row in
            let account = try AccountSummary(row: row)
            return DeviceAccount(account: account, isCurrent: account.id == context.account.id)
        }
    }

    /// Removes each of `accounts` that no session holds and no unredeemed handoff code waits for,
    /// with its grant, then revokes the grants at their providers (best effort). Returns how many
    /// accounts went.
    @discardableResult
    func removeAccountsWithoutSessions(_ accounts: [UUID]) async -> (removed: Int, revocations: [UpstreamRevocation]) {
        // Their sessions ended (or the grant went): nothing of theirs may be served from memory,
        // even before the database's notification comes back.
        cache.invalidate(accounts: accounts)
        guard !accounts.isEmpty else { return (0, []) }
        do {
            let now = clock.now()
            let ids = Array(Set(accounts))
            let (removed, queued) = try await removeAccounts(
                where: """
                    SELECT a.id FROM accounts a WHERE a.id = ANY(\(ids))
                      AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.account_id = a.id)
                      AND NOT EXISTS (SELECT 1 FROM handoff_codes h WHERE h.account_id = a.id AND h.redeemed_at IS NULL
                                        AND h.expires_at > \(now))
                    """,
                now: now
            )
            return (removed, await revoke(queued))
        } catch {
            logger.warning("removing an account failed; the sweeper will retry", metadata: ["error_type": "\(type(of: error))"])
            return (0, [])
        }
    }
}

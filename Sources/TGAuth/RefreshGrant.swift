import Foundation
import Logging
import TGBase
import TGPostgres
import TGStore

extension AuthService {
    /// Rotates a TokenGate refresh token (RFC 6749 §6, OAuth 2.0 Security BCP §4.14.2): a new
    /// pair every time; the previous token gets the same answer again for a short grace window (a
    /// retry after a lost response, or two requests racing); any older token of the family, or
    /// the previous one after the window, is reuse and ends the whole family.
    public func refresh(refreshToken: String, clientID: String) async throws -> IssuedTokens {
        guard clients[clientID] != nil else { throw OAuthError(.invalidClient, "client_id names no registered app.") }
        guard let hash = OpaqueToken.hashIfWellFormed(refreshToken) else { throw Self.deadRefreshToken }
        let now = clock.now()
        let outcome = try await database.withTransaction { connection in
            try await rotate(hash, clientID: clientID, now: now, on: connection)
        }
        return try await finish(outcome)
    }

    static let deadRefreshToken = OAuthError(.invalidGrant, "The refresh token is not valid any more. Log in again.")

    private func rotate(
        _ hash: TokenHash,
        clientID: String,
        now: Date,
        on connection: PostgresConnection
    ) async throws
        -> RedemptionOutcome
    {
        let current = try await connection.query(
            """
            SELECT s.id AS session_id, s.client_id, s.family_id, s.expires_at, s.absolute_expires_at, a.state,
              a.id, a.provider, a.issuer, a.subject, a.tenant, a.claims::text AS claims
            FROM sessions s JOIN accounts a ON a.id = s.account_id
            WHERE s.refresh_token_hash = \(hash) FOR UPDATE OF s
            """
        )
        if let row = current.first {
            let session = try row.decode(UUID.self, "session_id")
            let account = try AccountSummary(row: row)
            guard try row.decode(String.self, "client_id") == clientID else { return .refused(Self.deadRefreshToken) }
            let absolute = try row.decode(Date.self, "absolute_expires_at")
            guard try row.decode(Date.self, "expires_at") > now, absolute > now, try row.decode(String.self, "state") == "active"
            else {
                try await connection.query("DELETE FROM sessions WHERE id = \(session)")
                return .refused(Self.deadRefreshToken, orphans: [account.id])
            }
            let access = OpaqueToken.mint()
            let refresh = OpaqueToken.mint()
            let tokens = IssuedTokens(
                accessToken: access.value,
                expiresIn: Int(settings.accessTokenTTL),
                refreshToken: refresh.value,
                account: account
            )
            let replay = try vault.seal(
                String(decoding: try JSONEncoder().encode(tokens), as: UTF8.self),
                context: TokenVault.Context.replay(session)
            )
            try await connection.query(
                """
                UPDATE sessions SET access_token_hash = \(access.hash),
                  access_expires_at = \(now.addingTimeInterval(settings.accessTokenTTL)),
                  refresh_token_hash = \(refresh.hash), previous_refresh_token_hash = \(hash), rotated_at = \(now),
                  replay_response = \(replay), last_used_at = \(now),
                  expires_at = LEAST(\(now.addingTimeInterval(settings.sessionIdleTTL)), absolute_expires_at)
                WHERE id = \(session)
                """
            )
            try await connection.query(
                """
                INSERT INTO revoked_refresh_tokens (token_hash, family_id, expires_at)
                VALUES (\(hash), \(try row.decode(UUID.self, "family_id")), \(absolute)) ON CONFLICT DO NOTHING
                """
            )
            try await connection.query("UPDATE accounts SET last_used_at = \(now) WHERE id = \(account.id)")
            // A device in use keeps its secret alive (sessions.device_idle_ttl_seconds).
            try await connection.query(
                "UPDATE devices SET last_seen_at = \(now) WHERE id = (SELECT device_id FROM sessions WHERE id = \(session))"
            )
            return .issued(tokens, orphans: [])
        }
        let previous = try await connection.query(
            """
            SELECT id, client_id, family_id, rotated_at, replay_response FROM sessions
            WHERE previous_refresh_token_hash = \(hash) FOR UPDATE
            """
        )
        if let row = previous.first {
            let session = try row.decode(UUID.self, "id")
            if try row.decode(String.self, "client_id") == clientID,
                let rotatedAt = try row.decode(Date?.self, "rotated_at"),
                now.timeIntervalSince(rotatedAt) <= settings.refreshReplayGrace,
                let sealed = try row.decode(PostgresBytes?.self, "replay_response")
            {
                let json = try vault.open(sealed, context: TokenVault.Context.replay(session))
                return .issued(try JSONDecoder().decode(IssuedTokens.self, from: Data(json.utf8)), orphans: [])
            }
            return try await revokeFamily(try row.decode(UUID.self, "family_id"), on: connection)
        }
        let revoked = try await connection.query("SELECT family_id FROM revoked_refresh_tokens WHERE token_hash = \(hash)")
        if let row = revoked.first {
            return try await revokeFamily(try row.decode(UUID.self, "family_id"), on: connection)
        }
        return .refused(Self.deadRefreshToken)
    }

    /// A rotated-away refresh token came back: someone holds a copy. Every session of the family
    /// ends. When none is left (logged out, expired), it is only a dead token, not an alarm.
    private func revokeFamily(_ family: UUID, on connection: PostgresConnection) async throws -> RedemptionOutcome {
        let ended = try await connection.query("DELETE FROM sessions WHERE family_id = \(family) RETURNING account_id")
        if ended.isEmpty {
            logger.info("a refresh token of a session that has ended was presented")
            return .refused(Self.deadRefreshToken)
        }
        logger.warning("refresh token reuse: the token family was revoked", metadata: ["sessions_ended": .stringConvertible(ended.count)])
        return .refused(Self.deadRefreshToken, orphans: try ended.rows.map { try $0.decode(UUID.self, "account_id") })
    }
}

public import Foundation
public import TGBase
import TGOIDC
public import TGStore

/// A request's TokenGate session, found from its bearer access token.
public final class SessionContext: Sendable {
    // A class, never changed once made: the memory cache hands the same one to every call that
    // presents the token, each holding it with one count (copying its strings took several).
    public let sessionID: UUID
    public let deviceID: UUID
    public let clientID: String
    public let account: AccountSummary
    /// When the session ends unless refreshed (idle expiry).
    public let expiresAt: Date
    /// When the bearer access token the session was found by expires.
    public let accessTokenExpiresAt: Date
    /// The RFC 7638 thumbprint of the key the session's tokens are bound to (RFC 9449 `cnf.jkt`):
    /// every use must come with a proof of that key. nil: a bearer session.
    public let dpopJKT: String?

    public init(
        sessionID: UUID,
        deviceID: UUID,
        clientID: String,
        account: AccountSummary,
        expiresAt: Date,
        accessTokenExpiresAt: Date,
        dpopJKT: String? = nil
    ) {
        self.sessionID = sessionID
        self.deviceID = deviceID
        self.clientID = clientID
        self.account = account
        self.expiresAt = expiresAt
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.dpopJKT = dpopJKT
    }
}

/// An account of the caller's device, as `/auth/accounts` lists it.
public struct DeviceAccount: Sendable, Equatable {
    public var account: AccountSummary
    /// The account the request's token belongs to.
    public var isCurrent: Bool
}

/// Sessions by their access token, and the accounts of a device: what a request's bearer token
/// stands for.
public struct Sessions: Sendable {
    let store: Store
    let clock: WallClock

    public init(store: Store, clock: WallClock = .system) {
        self.store = store
        self.clock = clock
    }

    /// The session of a bearer access token that is unexpired and whose account is active.
    public func authenticate(accessToken: String) async throws -> SessionContext {
        guard let context = try await session(accessToken: accessToken, requireValid: true) else { throw Self.invalidAccessToken }
        return context
    }

    /// The session of an access token, expired or not (logout works with either); nil when unknown.
    public func session(ofAccessToken accessToken: String) async throws -> SessionContext? {
        try await session(accessToken: accessToken, requireValid: false)
    }

    static let invalidAccessToken = AuthProblem(.invalidToken, "The access token is invalid or expired. Refresh it, or log in again.")

    func session(accessToken: String, requireValid: Bool) async throws -> SessionContext? {
        guard let hash = OpaqueToken.hashIfWellFormed(accessToken) else { return nil }
        return try await session(hash: hash, requireValid: requireValid)
    }

    func session(hash: TokenHash, requireValid: Bool) async throws -> SessionContext? {
        let now = clock.now()
        guard let stored = try await store.sessions.find(accessTokenHash: hash) else { return nil }
        if requireValid {
            guard stored.accessExpiresAt > now, stored.expiresAt > now, stored.account.state == "active" else { return nil }
        }
        return SessionContext(
            sessionID: stored.id,
            deviceID: stored.deviceID,
            clientID: stored.clientID,
            account: AccountSummary(stored: stored.account),
            expiresAt: stored.expiresAt,
            accessTokenExpiresAt: stored.accessExpiresAt,
            dpopJKT: stored.dpopJKT
        )
    }

    /// Of `ids`, the sessions that live now (unexpired, their account active), each with when
    /// it ends unless refreshed first: what keeps a stream a session opened going
    /// (docs/proxy.md, "Streams end with the session").
    public func liveUntil(_ ids: [UUID]) async throws -> [UUID: Date] {
        try await store.sessions.liveUntil(ids, now: clock.now())
    }

    /// The accounts signed in on the caller's device, the current one marked.
    public func deviceAccounts(_ context: SessionContext) async throws -> [DeviceAccount] {
        try await store.sessions.accounts(onDevice: context.deviceID, now: clock.now()).map { stored in
            let account = AccountSummary(stored: stored)
            return DeviceAccount(account: account, isCurrent: account.id == context.account.id)
        }
    }
}

public import Foundation
public import Logging
public import TGBase
public import TGOIDC
public import TGStore

/// Which sessions a logout ends.
public enum LogoutScope: Sendable, Equatable {
    /// Every account on the caller's device (the default: clears all cached accounts).
    case device
    /// One account of the caller's device.
    case account(UUID)
}

/// What a logout did.
public struct LogoutResult: Sendable, Equatable {
    public var sessionsEnded: Int
    public var accountsRemoved: Int
    /// The provider's RP-initiated logout URL for the caller's account, when it has one.
    public var endSessionURL: String?
    /// What became of each removed account's upstream refresh token.
    public var revocations: [UpstreamRevocation] = []

    /// Whether the logout removed accounts and every one of their refresh tokens is revoked at
    /// its provider now (false when a grant lives on: still used elsewhere, queued, or at a
    /// provider that cannot revoke).
    public var revoked: Bool { !revocations.isEmpty && revocations.allSatisfy { $0 == .revoked } }
}

/// The ends of sessions: an app's logout (RP-initiated at the provider too, when asked), the
/// provider's landing route after its logout page, and the provider's back-channel logout.
public final class Logouts: Sendable {
    let store: Store
    let vault: TokenVault
    let providers: [String: OpenIDProvider]
    let clients: [String: AppClient]
    let settings: AuthSettings
    /// TokenGate's public base URL (the landing route's URL starts with it).
    let issuer: String
    let sessions: Sessions
    let revocations: RevocationQueue
    let clock: WallClock
    let metrics: AuthMetrics
    let logger: Logger

    public init(
        store: Store,
        vault: TokenVault,
        providers: [String: OpenIDProvider],
        clients: [String: AppClient],
        settings: AuthSettings,
        issuer: String,
        sessions: Sessions,
        revocations: RevocationQueue,
        clock: WallClock = .system,
        metrics: AuthMetrics = AuthMetrics(),
        logger: Logger
    ) {
        self.store = store
        self.vault = vault
        self.providers = providers
        self.clients = clients
        self.settings = settings
        self.issuer = issuer
        self.sessions = sessions
        self.revocations = revocations
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    /// Ends sessions: the device's, or one account's on it; with `everywhere`, the signed-in
    /// account's sessions on every device (and nobody else's). Accounts no session holds any more
    /// are removed; their grants go to the revocation queue in the same statement and are revoked
    /// at the provider at once, or later by the queue's worker when the provider is down.
    /// Works with an expired access token (an app logging out after a long sleep) and answers an
    /// unknown one with nothing done: repeating it is harmless.
    ///
    /// `returnTo` asks for the provider's logout page to send the browser back to the app: it must
    /// be one of the app's `post_logout_redirect_uris` (else nothing is done); the provider sends
    /// the browser to TokenGate's landing route, which hands over to the app
    /// (``logoutReturn(state:)``).
    public func logout(
        accessToken: String,
        scope: LogoutScope = .device,
        everywhere: Bool = false,
        returnTo: LogoutReturn? = nil
    ) async throws -> LogoutResult {
        guard let context = try await sessions.session(ofAccessToken: accessToken) else {
            return LogoutResult(sessionsEnded: 0, accountsRemoved: 0, endSessionURL: nil)
        }
        if let returnTo, clients[context.clientID]?.allows(postLogoutRedirectURI: returnTo.uri) != true {
            throw AuthProblem(
                .invalidRequest,
                "post_logout_redirect_uri is not one of this app's post_logout_redirect_uris (exact match); nothing was logged out."
            )
        }
        let endSession: String?
        if scope == .device || scope == .account(context.account.id) {
            endSession = await endSessionURL(for: context.account, returnTo: returnTo, clientID: context.clientID)
        } else {
            endSession = nil
        }
        let selection: SessionSelection
        switch (scope, everywhere) {
        case (.device, false):
            selection = .device(context.deviceID)
        case (.account(let account), false):
            selection = .account(account, device: context.deviceID)
        case (.device, true), (.account, true):
            // Only the signed-in account's own sessions, on every device: on a phone two people
            // share, one of them logging out everywhere leaves the other signed in.
            guard scope == .device || scope == .account(context.account.id) else {
                throw AuthProblem(
                    .invalidRequest,
                    "everywhere=true ends only the signed-in account's sessions; send it with that account's access token."
                )
            }
            selection = .everywhere(account: context.account.id)
        }
        let accounts = try await store.sessions.end(selection)
        let (removed, revocations) = await revocations.removeAccountsWithoutSessions(accounts)
        return LogoutResult(sessionsEnded: accounts.count, accountsRemoved: removed, endSessionURL: endSession, revocations: revocations)
    }

    /// Removes one account from the caller's device (`DELETE /auth/accounts/{id}`); an account
    /// that is not on this device is not found, whoever's it is.
    public func removeAccount(_ account: UUID, context: SessionContext) async throws {
        guard try await !store.sessions.end(.account(account, device: context.deviceID)).isEmpty else {
            throw AuthProblem(.accountNotFound, "No account with this id is signed in on this device.")
        }
        await revocations.removeAccountsWithoutSessions([account])
    }

    private func endSessionURL(for account: AccountSummary, returnTo: LogoutReturn?, clientID: String) async -> String? {
        guard let provider = providers[account.provider] else { return nil }
        var hint: String?
        var policy: String?
        if let stored = try? await store.accounts.logoutHint(account.id) {
            if let sealed = stored.idTokenHint {
                hint = try? vault.open(sealed, context: TokenVault.Context.idToken(account.id))
            }
            policy = provider.knownPolicy(stored.policy)
        }
        guard let returnTo else { return try? await provider.endSessionURL(idTokenHint: hint, postLogoutRedirectURI: nil, policy: policy) }
        let state = try? sealLogoutReturn(returnTo, clientID: clientID)
        return try? await provider.endSessionURL(
            idTokenHint: hint,
            postLogoutRedirectURI: issuer + Self.logoutReturnPath,
            state: state,
            policy: policy
        )
    }
}

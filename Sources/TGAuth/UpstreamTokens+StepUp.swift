public import Foundation
import TGBase
import TGStore

/// A step-up sign-in's token for an API that keeps it apart (``UpstreamResource/keepsStepUpApart``):
/// stored beside the account's everyday tokens under a key no scope set can have, used for the
/// API's calls until it expires, never refreshed.
extension UpstreamTokens {
    /// What this instance knows, from memory alone, of an account's step-up token for an API.
    public enum StepUpSlot: Sendable {
        /// Nothing in memory: the database must be asked (``stepUpToken(account:resource:rejected:)``).
        case unknown
        /// None, or one that has expired: the everyday token serves.
        case none
        case token(UpstreamAccessToken)
    }

    /// The cache key of an API's step-up token: scope tokens cannot hold a backslash (RFC 6749
    /// §3.3), so no scope key is ever this.
    static func stepUpKey(_ resource: String) -> String { "\\step-up " + resource }

    /// From memory, without waiting.
    public func cachedStepUpToken(account: UUID, resource: String) -> StepUpSlot {
        guard let token = cache.token(account: account, scopeKey: Self.stepUpKey(resource)) else { return .unknown }
        return token.value.isEmpty || token.expiresAt <= clock.now() ? .none : .token(token)
    }

    /// From memory, else from the database; what the database said (a token, or none) is kept in
    /// memory until the account changes. `rejected`: a token the API just refused, not handed
    /// out again.
    public func stepUpToken(account: UUID, resource: String, rejected: String?) async throws -> UpstreamAccessToken? {
        let key = Self.stepUpKey(resource)
        if case .token(let token) = cachedStepUpToken(account: account, resource: resource), token.value != rejected { return token }
        let ticket = cache.ticket()
        let stored = try await storedUpstreamToken(account, scopeKey: key)
        let now = clock.now()
        guard let stored, stored.expiresAt > now, stored.value != rejected else {
            // Known to be absent (or over): an empty entry, so that calls need not ask again.
            cache.store(
                token: UpstreamAccessToken(value: "", expiresAt: .distantPast, scopes: [], issuedAt: now),
                account: account,
                scopeKey: key,
                ticket: ticket
            )
            return nil
        }
        cache.store(token: stored, account: account, scopeKey: key, ticket: ticket)
        return stored
    }

    /// Stores a step-up sign-in's token for an API, in the login's transaction.
    func storeStepUpToken(_ token: UpstreamAccessToken, account: UUID, resource: String, in transaction: StoreTransaction) async throws {
        try await storeAccessToken(token, account: account, scopeKey: Self.stepUpKey(resource), in: transaction)
    }
}

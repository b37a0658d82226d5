public import Foundation
import Synchronization
import TGBase
import TGStore

/// An upstream access token and when it expires.
public struct UpstreamAccessToken: Sendable, Equatable {
    public var value: String
    public var expiresAt: Date
    /// The scopes it was asked for.
    public var scopes: [String]
    public var issuedAt: Date
    /// What a caller makes of this token once for all its uses (the proxy's prebuilt header
    /// line), shared by every copy of it; a new token starts empty.
    public let memo = TokenMemo()

    public init(value: String, expiresAt: Date, scopes: [String], issuedAt: Date) {
        self.value = value
        self.expiresAt = expiresAt
        self.scopes = scopes
        self.issuedAt = issuedAt
    }

    /// The same token: the memo is what was made of it, not part of it.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.value == rhs.value && lhs.expiresAt == rhs.expiresAt && lhs.scopes == rhs.scopes && lhs.issuedAt == rhs.issuedAt
    }
}

/// One value made from a token on first use and kept as long as the token (see
/// ``UpstreamAccessToken/memo``). Any thread: the first caller makes it, under a lock.
public final class TokenMemo: Sendable {
    private let made = Mutex<(any AnyObject & Sendable)?>(nil)

    public init() {}

    /// The value made before, or `make`'s, kept.
    public func value<Value: AnyObject & Sendable>(_ make: () -> Value) -> Value {
        made.withLock { made in
            if let value = made as? Value { return value }
            let value = make()
            made = value
            return value
        }
    }
}

/// What one instance keeps in memory so that a proxied call needs no database round trip: the
/// sessions of bearer tokens seen lately and upstream access tokens. Entries end with what they
/// describe, and every entry of an account goes at once when the account changes anywhere
/// (``invalidate(accounts:)``, fed by this instance's own changes and by the database's
/// `tokengate_invalidate` notifications from every instance).
///
/// A lookup that read the database before an invalidation of its account must not put what it
/// read back: callers take a ``ticket`` before reading and present it when storing.
public final class CredentialCache: Sendable {
    struct TokenKey: Hashable {
        var account: UUID
        var scopeKey: String

        // By the account alone (its 16 bytes): an account holds tokens for a few scope sets at
        // most, which equality tells apart, and hashing the key's string too cost ~200
        // instructions per proxied call.
        func hash(into hasher: inout Hasher) {
            withUnsafeBytes(of: account.uuid) { hasher.combine(bytes: $0) }
        }

        /// What the table asks for: the account's first eight bytes (random, of a version 4
        /// UUID this process or another instance made) spread by ``WordKey``'s multiplication.
        func _rawHashValue(seed: Int) -> Int {
            withUnsafeBytes(of: account.uuid) { WordKey.hash($0.loadUnaligned(as: UInt64.self), seed: seed) }
        }
    }

    struct Entries {
        var sessions: [TokenHash: (context: SessionContext, validUntil: Date)] = [:]
        var tokens: [TokenKey: UpstreamAccessToken] = [:]
        var keysByAccount: [UUID: (sessions: Set<TokenHash>, scopeKeys: Set<String>)] = [:]
        /// Bumped by every invalidation.
        var epoch: UInt64 = 0
        /// The epoch at which an account was last invalidated, and when (pruned after a minute).
        var invalidated: [UUID: (epoch: UInt64, at: Date)] = [:]
        /// Everything was dropped at this epoch (the notification connection was lost).
        var clearedAt: UInt64 = 0

        // An entry that goes alone (expired, evicted) leaves the account's index too: the index
        // would otherwise keep every account ever seen, a bound `capacity` does not cover.

        mutating func dropSession(_ hash: TokenHash) {
            guard let entry = sessions.removeValue(forKey: hash) else { return }
            let account = entry.context.account.id
            keysByAccount[account]?.sessions.remove(hash)
            dropIndexIfEmpty(account)
        }

        mutating func dropToken(_ key: TokenKey) {
            guard tokens.removeValue(forKey: key) != nil else { return }
            keysByAccount[key.account]?.scopeKeys.remove(key.scopeKey)
            dropIndexIfEmpty(key.account)
        }

        private mutating func dropIndexIfEmpty(_ account: UUID) {
            if let keys = keysByAccount[account], keys.sessions.isEmpty, keys.scopeKeys.isEmpty {
                keysByAccount[account] = nil
            }
        }
    }

    /// Taken before a database read; stale once an invalidation of the account happened since.
    public struct Ticket: Sendable {
        let epoch: UInt64
    }

    private let state = Mutex(Entries())
    /// Sessions it holds at most, and as many upstream tokens (`sessions.memory_cache_entries`).
    public let capacity: Int

    /// `capacity` bounds sessions and tokens each; when full, a new entry evicts an arbitrary one.
    public init(capacity: Int = 100_000) {
        self.capacity = max(1, capacity)
    }

    public func ticket() -> Ticket { Ticket(epoch: state.withLock { $0.epoch }) }

    /// The cached session of a bearer token's hash, if still valid at `now`.
    func session(_ hash: TokenHash, now: Date) -> SessionContext? {
        state.withLock { entries in
            guard let entry = entries.sessions[hash] else { return nil }
            guard entry.validUntil > now else {
                entries.dropSession(hash)
                return nil
            }
            return entry.context
        }
    }

    /// The cached session of a bearer token's hash (as ``session(_:now:)``) and its account's
    /// cached token for a scope key, if any: a proxied call's two lookups under one lock.
    func sessionAndToken(_ hash: TokenHash, scopeKey: String, now: Date) -> (context: SessionContext, token: UpstreamAccessToken?)? {
        state.withLock { entries in
            guard let entry = entries.sessions[hash] else { return nil }
            guard entry.validUntil > now else {
                entries.dropSession(hash)
                return nil
            }
            return (entry.context, entries.tokens[TokenKey(account: entry.context.account.id, scopeKey: scopeKey)])
        }
    }

    func store(session context: SessionContext, hash: TokenHash, validUntil: Date, ticket: Ticket) {
        state.withLock { entries in
            guard Self.isFresh(ticket, account: context.account.id, in: entries) else { return }
            if entries.sessions.count >= capacity, entries.sessions[hash] == nil, let victim = entries.sessions.keys.first {
                entries.dropSession(victim)
            }
            entries.sessions[hash] = (context, validUntil)
            entries.keysByAccount[context.account.id, default: ([], [])].sessions.insert(hash)
        }
    }

    /// The cached upstream token of an account for a scope key (whatever its expiry).
    func token(account: UUID, scopeKey: String) -> UpstreamAccessToken? {
        state.withLock { $0.tokens[TokenKey(account: account, scopeKey: scopeKey)] }
    }

    func store(token: UpstreamAccessToken, account: UUID, scopeKey: String, ticket: Ticket) {
        state.withLock { entries in
            guard Self.isFresh(ticket, account: account, in: entries) else { return }
            let key = TokenKey(account: account, scopeKey: scopeKey)
            if entries.tokens.count >= capacity, entries.tokens[key] == nil, let victim = entries.tokens.keys.first {
                entries.dropToken(victim)
            }
            entries.tokens[key] = token
            entries.keysByAccount[account, default: ([], [])].scopeKeys.insert(scopeKey)
        }
    }

    /// Drops everything held for `accounts` and refuses what lookups started earlier would store.
    public func invalidate(accounts: some Sequence<UUID>, now: Date = Date()) {
        state.withLock { entries in
            entries.epoch &+= 1
            for account in accounts {
                entries.invalidated[account] = (entries.epoch, now)
                guard let keys = entries.keysByAccount.removeValue(forKey: account) else { continue }
                for hash in keys.sessions { entries.sessions[hash] = nil }
                for scopeKey in keys.scopeKeys { entries.tokens[TokenKey(account: account, scopeKey: scopeKey)] = nil }
            }
            if entries.invalidated.count > 4096 {
                let horizon = now.addingTimeInterval(-60)
                entries.invalidated = entries.invalidated.filter { $0.value.at > horizon }
            }
        }
    }

    /// Drops everything (notifications may have been missed).
    public func invalidateAll() {
        state.withLock { entries in
            entries.epoch &+= 1
            entries.clearedAt = entries.epoch
            entries.sessions = [:]
            entries.tokens = [:]
            entries.keysByAccount = [:]
            entries.invalidated = [:]
        }
    }

    /// Entries held now (sessions, tokens), for tests and metrics.
    public var counts: (sessions: Int, tokens: Int) {
        state.withLock { ($0.sessions.count, $0.tokens.count) }
    }

    /// Accounts with an entry in the index that invalidation goes by (for tests: it holds
    /// exactly the accounts that have a session or a token here).
    var indexedAccounts: Int { state.withLock { $0.keysByAccount.count } }

    private static func isFresh(_ ticket: Ticket, account: UUID, in entries: Entries) -> Bool {
        guard ticket.epoch >= entries.clearedAt else { return false }
        guard let invalidated = entries.invalidated[account] else { return true }
        return invalidated.epoch <= ticket.epoch
    }
}

import CoreMetrics
import Foundation
import HTTPTypes
import Synchronization
import TGBase
import TGHTTPServer
import TGStore

/// Requests per client and minute for one limit (`scope`: login, callback, token, …), as a token
/// bucket per client: a burst of the whole minute's allowance, refilled continuously. A client is
/// its address's ``ClientKey`` (``key(for:)``): an IPv4 address, or an IPv6 address's first
/// ``ipv6PrefixLength`` bits, since one subscriber usually holds a whole /64.
///
/// With a ``RateLimitStore`` the buckets live in PostgreSQL and every instance spends the same
/// allowance (docs/scaling.md, "Rate limits"). Requests do not each take a token there: an instance
/// takes a lease of up to ``maxLease`` tokens in one statement and spends it from memory for
/// ``leaseLifetime``; a refusal is remembered until the bucket has refilled a token, so a client
/// past its limit costs no statement either. One take per address is in flight at a time; the
/// requests that arrive meanwhile wait for it. Leases only ever under-admit: tokens are debited in
/// PostgreSQL when leased, and an instance that dies or lets a lease lapse loses them. When
/// PostgreSQL cannot be reached the instance's own in-memory buckets decide (``LocalBuckets``),
/// as they do without a store.
final class RateLimiter: Sendable {
    /// What this instance knows per address: its lease or refusal, and the take in flight.
    private struct Memory {
        var leases: [String: Lease] = [:]
        var takes: [String: Task<Void, Never>] = [:]
        var lastPrune = Date.distantPast
    }

    private let memory = Mutex(Memory())

    let scope: String
    let perMinute: Int
    /// IPv6 clients share a bucket per prefix of this many bits.
    let ipv6PrefixLength: Int
    let now: @Sendable () -> Date
    let store: RateLimitStore?
    /// The statements that take from `store`, for many addresses at once.
    private let batcher: RateLimitBatcher?
    /// The most tokens one take asks for: a twentieth of the allowance (at least one).
    let maxLease: Int
    /// How long leased tokens may be spent; what is left then is lost.
    let leaseLifetime: TimeInterval = 1
    /// This instance's own buckets: the whole limiter without a store, the fallback with one.
    let local: LocalBuckets
    private let takesGranted: Counter?
    private let takesEmpty: Counter?
    private let takesUnavailable: Counter?

    /// `store` nil: in memory, per instance.
    init(
        scope: String,
        perMinute: Int,
        store: RateLimitStore? = nil,
        metrics: TokenGateMetrics? = nil,
        ipv6PrefixLength: Int = ClientKey.defaultIPv6PrefixLength,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.scope = scope
        self.perMinute = perMinute
        self.ipv6PrefixLength = ipv6PrefixLength
        self.store = store
        self.now = now
        maxLease = max(1, perMinute / 20)
        let statements = metrics.map { Counter(label: "tokengate_rate_limit_statements_total", dimensions: [("scope", scope)], factory: $0.factory) }
        batcher = store.map { store in
            RateLimitBatcher { wants in
                statements?.increment()
                let capacity = Double(perMinute)
                return try? await store.take(scope: scope, wants: wants, capacity: capacity, perSecond: capacity / 60, now: now())
            }
        }
        local = LocalBuckets(perMinute: perMinute, now: now)
        func counter(_ outcome: String) -> Counter? {
            metrics.map {
                Counter(label: "tokengate_rate_limit_takes_total", dimensions: [("scope", scope), ("outcome", outcome)], factory: $0.factory)
            }
        }
        takesGranted = counter("granted")
        takesEmpty = counter("empty")
        takesUnavailable = counter("unavailable")
    }

    /// The bucket of a client at `address` (as logged: the peer, or what a trusted proxy says);
    /// `-` when the address is unknown. The decisions below take this key, not the address.
    func key(for address: String?) -> String {
        guard let address else { return "-" }
        return ClientKey(address: address, ipv6PrefixLength: ipv6PrefixLength).description
    }

    /// What a request gets without waiting.
    enum Decision: Equatable {
        case admitted
        /// Refused: the seconds until the bucket has a token again.
        case refused(retryAfter: Int)
        /// Only a take from the shared bucket can tell: ``admit(_:)``.
        case ask
    }

    /// The decision from memory: a leased token, a remembered refusal, or `.ask`.
    func decide(_ client: String) -> Decision {
        guard perMinute > 0 else { return .admitted }
        guard store != nil else { return local.admit(client).map { .refused(retryAfter: $0) } ?? .admitted }
        let now = now()
        return memory.withLock { spend(client, now: now, in: &$0) }
    }

    /// Nil when the request may go ahead, else the seconds to wait: from memory when it can tell,
    /// else after a take from the shared bucket (this request's, or one already in flight).
    func admit(_ client: String) async -> Int? {
        // A few rounds: each either decides or waits for a take that changes what memory knows.
        for _ in 0..<8 {
            let now = now()
            let step: Step = memory.withLock { memory in
                switch spend(client, now: now, in: &memory) {
                case .admitted: return .decided(nil)
                case .refused(let wait): return .decided(wait)
                case .ask: break
                }
                if let running = memory.takes[client] { return .wait(running) }
                let want = min(maxLease, memory.leases[client]?.nextSize ?? 1)
                let take = Task { await self.take(client, want: want) }
                memory.takes[client] = take
                return .wait(take)
            }
            switch step {
            case .decided(let wait): return wait
            case .wait(let take): await take.value
            }
        }
        // Others keep spending what the takes bring: this request takes a token for itself.
        guard let result = await fetch(client, want: 1) else { return local.admit(client) }
        return result.granted == 1 ? nil : wait(after: result)
    }

    /// The seconds until a bucket left with `result.remaining` has a whole token.
    private func wait(after result: RateLimitStore.Take) -> Int {
        max(1, Int((max(0, 1 - result.remaining) / (Double(perMinute) / 60)).rounded(.up)))
    }

    /// Addresses this instance holds a lease or a refusal for (tests).
    var remembered: Int { memory.withLock { $0.leases.count } }

    private enum Step {
        case decided(Int?)
        case wait(Task<Void, Never>)
    }

    /// Spends a leased token, or tells of a remembered refusal; `.ask` otherwise.
    private func spend(_ client: String, now: Date, in memory: inout Memory) -> Decision {
        pruneIfDue(now, in: &memory)
        guard var lease = memory.leases[client] else { return .ask }
        if lease.refusedUntil > now { return .refused(retryAfter: max(1, Int(lease.refusedUntil.timeIntervalSince(now).rounded(.up)))) }
        guard lease.tokens > 0, lease.expires > now else { return .ask }
        lease.tokens -= 1
        memory.leases[client] = lease
        return .admitted
    }

    /// Up to `want` tokens from the shared bucket, in the batcher's next statement; nil when
    /// PostgreSQL failed.
    private func fetch(_ client: String, want: Int) async -> RateLimitStore.Take? {
        let result = await batcher?.take(client, want: want)
        if let result {
            (result.granted > 0 ? takesGranted : takesEmpty)?.increment()
        } else {
            takesUnavailable?.increment()
        }
        return result
    }

    /// Up to `want` tokens from the shared bucket, into this instance's lease.
    private func take(_ client: String, want: Int) async {
        let started = now()
        let result = await fetch(client, want: want)
        memory.withLock { memory in
            defer { memory.takes[client] = nil }
            guard let result else {
                // Decided by the local buckets until the next take: a lease of them, one by one.
                let wait = local.admit(client)
                memory.leases[client] = Lease(
                    tokens: wait == nil ? 1 : 0,
                    expires: started.addingTimeInterval(leaseLifetime),
                    refusedUntil: wait.map { started.addingTimeInterval(Double($0)) } ?? .distantPast,
                    nextSize: 1
                )
                return
            }
            let previous = memory.leases[client]
            // A client back within the lease's lifetime gets a bigger lease next time.
            let busy = previous.map { started.timeIntervalSince($0.expires) < leaseLifetime } ?? false
            memory.leases[client] = Lease(
                tokens: result.granted,
                expires: started.addingTimeInterval(leaseLifetime),
                refusedUntil: result.granted > 0 ? .distantPast : started.addingTimeInterval(Double(wait(after: result))),
                nextSize: busy ? min(maxLease, (previous?.nextSize ?? 1) * 2) : 1
            )
        }
    }

    /// Forgets lapsed leases and refusals every few lease lifetimes, so memory holds the addresses
    /// of the last few seconds only, however many come and go.
    private func pruneIfDue(_ now: Date, in memory: inout Memory) {
        guard now.timeIntervalSince(memory.lastPrune) > leaseLifetime * 5 else { return }
        memory.leases = memory.leases.filter { $0.value.expires > now || $0.value.refusedUntil > now }
        memory.lastPrune = now
    }

    /// Tokens this instance leased for one client, and what it knows of the shared bucket.
    private struct Lease {
        var tokens: Int
        var expires: Date
        /// The shared bucket was empty: refused without a statement until then.
        var refusedUntil: Date
        /// How many tokens the next take asks for.
        var nextSize: Int
    }

    /// The 429 for a refused request.
    static func tooManyRequests(retryAfter: Int) -> Problem {
        Problem(
            status: .tooManyRequests,
            code: "rate_limited",
            detail: "Too many requests from this address; try again in \(retryAfter) s.",
            headerFields: [.retryAfter: String(retryAfter)]
        )
    }
}

/// Token buckets per client address in this instance's memory.
final class LocalBuckets: Sendable {
    /// Tokens per address, and when full buckets were last forgotten.
    private let state = Mutex<(buckets: [String: (tokens: Double, updated: Date)], lastPrune: Date)>(([:], .distantPast))
    let perMinute: Int
    let now: @Sendable () -> Date

    init(perMinute: Int, now: @escaping @Sendable () -> Date) {
        self.perMinute = perMinute
        self.now = now
    }

    /// Nil when the request may go ahead, else the seconds to wait.
    func admit(_ key: String) -> Int? {
        guard perMinute > 0 else { return nil }
        let now = now()
        let capacity = Double(perMinute)
        let rate = capacity / 60
        return state.withLock { state in
            if now.timeIntervalSince(state.lastPrune) > 60 {
                // Full buckets carry no information: forget them so memory stays bounded.
                state.buckets = state.buckets.filter {
                    min(capacity, $0.value.tokens + now.timeIntervalSince($0.value.updated) * rate) < capacity
                }
                state.lastPrune = now
            }
            var bucket = state.buckets[key] ?? (capacity, now)
            bucket.tokens = min(capacity, bucket.tokens + max(0, now.timeIntervalSince(bucket.updated)) * rate)
            bucket.updated = now
            guard bucket.tokens >= 1 else {
                state.buckets[key] = bucket
                return max(1, Int(((1 - bucket.tokens) / rate).rounded(.up)))
            }
            bucket.tokens -= 1
            state.buckets[key] = bucket
            return nil
        }
    }
}

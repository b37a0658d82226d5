import Foundation
import HTTPTypes
import TGHTTPServer

/// Requests per client address and minute, as a token bucket per address (a burst of the whole
/// minute's allowance, refilled continuously). In memory, per instance: a limit against one
/// client hammering an endpoint, not a quota.
final class RateLimiter: @unchecked Sendable {
    // Invariant: `buckets` and `lastPrune` are only accessed with `lock` held.
    private let lock = NSLock()
    private var buckets: [String: (tokens: Double, updated: Date)] = [:]
    private var lastPrune = Date.distantPast
    let perMinute: Int
    let now: @Sendable () -> Date

    init(perMinute: Int, now: @escaping @Sendable () -> Date = { Date() }) {
        self.perMinute = perMinute
        self.now = now
    }

    /// Nil when the request may go ahead, else the seconds to wait.
    func admit(_ key: String) -> Int? {
        guard perMinute > 0 else { return nil }
        let now = now()
        let capacity = Double(perMinute)
        let rate = capacity / 60
        return lock.withLock {
            if now.timeIntervalSince(lastPrune) > 60 {
                // Full buckets carry no information: forget them so memory stays bounded.
                buckets = buckets.filter { min(capacity, $0.value.tokens + now.timeIntervalSince($0.value.updated) * rate) < capacity }
                lastPrune = now
            }
            var bucket = buckets[key] ?? (capacity, now)
            bucket.tokens = min(capacity, bucket.tokens + max(0, now.timeIntervalSince(bucket.updated)) * rate)
            bucket.updated = now
            guard bucket.tokens >= 1 else {
                buckets[key] = bucket
                return max(1, Int(((1 - bucket.tokens) / rate).rounded(.up)))
            }
            bucket.tokens -= 1
            buckets[key] = bucket
            return nil
        }
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

import Foundation
import TGStore

/// Takes from the shared rate-limit buckets for many client addresses in one statement (group
/// commit): while one statement runs, the takes that arrive wait and go together in the next. No
/// timer: a take that finds nothing running goes at once, so an idle instance adds no latency and
/// a busy one sends a statement per round trip rather than per address.
final class RateLimitBatcher: @unchecked Sendable {
    // Invariant: `pending` and `running` are only accessed with `lock` held.
    private let lock = NSLock()
    private var pending: [Waiter] = []
    private var running = false
    /// The most addresses one statement takes for.
    let maxBatch: Int
    /// One statement: the tokens each client asked for (one entry per client); nil when it failed.
    let statement: @Sendable ([String: Int]) async -> [String: RateLimitStore.Take]?

    private struct Waiter {
        var client: String
        var want: Int
        var continuation: CheckedContinuation<RateLimitStore.Take?, Never>
    }

    init(maxBatch: Int = 256, statement: @escaping @Sendable ([String: Int]) async -> [String: RateLimitStore.Take]?) {
        self.maxBatch = maxBatch
        self.statement = statement
    }

    /// Takes waiting for the next statement (tests).
    var waiting: Int { lock.withLock { pending.count } }

    /// Up to `want` tokens for `client`, in the next statement; nil when that statement failed.
    func take(_ client: String, want: Int) async -> RateLimitStore.Take? {
        await withCheckedContinuation { continuation in
            let starts: Bool = lock.withLock {
                pending.append(Waiter(client: client, want: want, continuation: continuation))
                guard !running else { return false }
                running = true
                return true
            }
            if starts { Task { await self.drain() } }
        }
    }

    /// Sends what is pending, statement after statement, until nothing is.
    private func drain() async {
        while true {
            let batch: [Waiter] = lock.withLock {
                // A client at most once a statement: a second take for it waits for the next.
                var batch: [Waiter] = []
                var clients = Set<String>()
                var rest: [Waiter] = []
                for waiter in pending {
                    if batch.count < maxBatch, clients.insert(waiter.client).inserted { batch.append(waiter) } else { rest.append(waiter) }
                }
                pending = rest
                if batch.isEmpty { running = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            let takes = await statement(Dictionary(uniqueKeysWithValues: batch.map { ($0.client, $0.want) }))
            for waiter in batch { waiter.continuation.resume(returning: takes?[waiter.client]) }
        }
    }
}

import Foundation
import Synchronization

/// The upstream rotations this instance wrote in the last half minute, kept so that a failover
/// to an asynchronous replica cannot silently lose one (docs/scaling.md, "PostgreSQL failover").
/// A provider that rotates refresh tokens has already spent the old token: a new primary that
/// never received the write would hand the spent token to the next refresh, which such a
/// provider answers by revoking the grant. When the invalidation listener reconnects (a
/// failover, a restart), each kept rotation is written again on the grant's version it started
/// from: a write the new primary has already is refused by that version check and changes nothing.
final class RecentRotations: Sendable {
    /// How long a written rotation is kept. Replication lag on a healthy pair is well under a
    /// second, and Patroni does not promote a replica lagging more than
    /// `maximum_lag_on_failover` (1 MiB by default).
    static let window: Duration = .seconds(30)

    private struct Kept {
        /// The latest rotation of each account, with when it was written.
        var latest: [UUID: (rotation: UpstreamRotation, at: ContinuousClock.Instant)] = [:]
        /// Every remembered write in order, `head` the oldest not yet pruned: pruning looks only
        /// at the front, so a refresh pays for the entries that expired, not for all it keeps.
        var order: [(account: UUID, at: ContinuousClock.Instant)] = []
        var head = 0

        mutating func prune(now: ContinuousClock.Instant) {
            while head < order.count, now - order[head].at >= RecentRotations.window {
                let (account, at) = order[head]
                if latest[account]?.at == at { latest[account] = nil }
                head += 1
            }
            if head > 1024, head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
        }
    }

    private let kept = Mutex(Kept())

    func remember(_ rotation: UpstreamRotation) {
        guard rotation.refreshToken != nil else { return }  // nothing the provider spent
        let now = ContinuousClock.now
        kept.withLock { kept in
            kept.prune(now: now)
            // Bounded: a burst of refreshes keeps the most recent ones only.
            if kept.latest.count >= 100_000 { kept = Kept() }
            kept.latest[rotation.account] = (rotation, now)
            kept.order.append((rotation.account, now))
        }
    }

    /// The rotations written within the window, oldest first.
    func recent() -> [UpstreamRotation] {
        let now = ContinuousClock.now
        return kept.withLock { kept in
            kept.prune(now: now)
            return kept.latest.values.sorted { $0.at < $1.at }.map(\.rotation)
        }
    }
}

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
    private let kept = Mutex<[UUID: (rotation: UpstreamRotation, at: ContinuousClock.Instant)]>([:])

    func remember(_ rotation: UpstreamRotation) {
        guard rotation.refreshToken != nil else { return }  // nothing the provider spent
        let now = ContinuousClock.now
        kept.withLock { kept in
            kept = kept.filter { now - $0.value.at < Self.window }
            // Bounded: a burst of refreshes keeps the most recent ones only.
            if kept.count >= 100_000 { kept.removeAll() }
            kept[rotation.account] = (rotation, now)
        }
    }

    /// The rotations written within the window, oldest first.
    func recent() -> [UpstreamRotation] {
        let now = ContinuousClock.now
        return kept.withLock { kept in
            kept = kept.filter { now - $0.value.at < Self.window }
            return kept.values.sorted { $0.at < $1.at }.map(\.rotation)
        }
    }
}

import Foundation
import Synchronization

/// The grants this instance saw fail a refresh transiently, with the end of their backoff
/// window: calls within it are answered without asking the provider or the database. The
/// window itself lives in `upstream_grants.refresh_retry_at`, shared by all instances; this is
/// only its copy in memory.
final class RefreshBackoff: Sendable {
    private let windows = Mutex<[UUID: Date]>([:])

    func until(_ account: UUID) -> Date? { windows.withLock { $0[account] } }

    func hold(_ account: UUID, until date: Date) {
        windows.withLock { windows in
            // Bounded: a flood of distinct failing grants cannot grow it without end.
            if windows.count >= 10_000 { windows.removeAll() }
            windows[account] = date
        }
    }

    func clear(_ account: UUID) { _ = windows.withLock { $0.removeValue(forKey: account) } }
}

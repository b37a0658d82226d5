import Foundation
import Synchronization

/// What this instance saw fail with the end of its backoff window: grants (by account) whose
/// refresh failed transiently, providers failing as a whole. Calls within a window are answered
/// without asking the provider or the database. The windows themselves live in PostgreSQL
/// (`upstream_grants.refresh_retry_at`, `provider_faults.retry_at`), shared by all instances;
/// this is only their copy in memory.
final class BackoffWindows<Key: Hashable & Sendable>: Sendable {
    private let windows = Mutex<[Key: Date]>([:])

    func until(_ key: Key) -> Date? { windows.withLock { $0[key] } }

    func hold(_ key: Key, until date: Date) {
        windows.withLock { windows in
            // Bounded: a flood of distinct failing grants cannot grow it without end.
            if windows.count >= 10_000 { windows.removeAll() }
            windows[key] = date
        }
    }

    func clear(_ key: Key) { _ = windows.withLock { $0.removeValue(forKey: key) } }
}

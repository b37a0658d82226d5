#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex: the lock of state that C libraries' threads and Swift tasks share (the
/// server's, the client's easy handles).
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer on Linux reports false positives
/// on `Mutex` hand-offs between the libmicrohttpd threads and Swift tasks (see docs/c-libraries.md);
/// instead of Foundation's `NSLock` because that goes through two more calls on every lock and unlock.
public final class Lock: @unchecked Sendable {
    // Invariant: `mutex` is allocated once, initialised in init and destroyed in deinit; all other
    // access goes through pthread_mutex_lock/unlock, which are thread-safe by definition.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init() {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }

    public func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always)
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// Answers deferred requests whose handler missed its deadline.
///
/// A suspended libmicrohttpd connection never times out, and a client that went away is not
/// noticed while suspended, so every deferred request is registered here until it completes.
/// One thread checks the registry every `interval`; a request past its deadline is completed with
/// the timeout response (which resumes the connection) and its task is cancelled.
final class DeadlineWatcher: @unchecked Sendable {
    // Invariant: `pending` and `running` are accessed only with `lock` held; the thread is started
    // once in init and ends after `stop()` sets `running` to false.
    private let lock = Lock()
    private var pending: [ObjectIdentifier: RequestContext] = [:]
    private var running = true
    private let interval: Duration
    private let expire: @Sendable (RequestContext) -> Void
    private let tick: (@Sendable (ContinuousClock.Instant) -> Void)?
    private var thread: pthread_t?

    /// `tick`, if given, runs on the watcher's thread every fifth interval.
    init(
        interval: Duration = .milliseconds(50),
        tick: (@Sendable (ContinuousClock.Instant) -> Void)? = nil,
        expire: @escaping @Sendable (RequestContext) -> Void
    ) {
        self.interval = interval
        self.tick = tick
        self.expire = expire
    }

    func start() {
        let unmanaged = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { argument in
                let watcher = Unmanaged<DeadlineWatcher>.fromOpaque(argument!).takeRetainedValue()
                watcher.loop()
                return nil
            },
            unmanaged.toOpaque()
        )
        precondition(result == 0, "cannot start the request deadline thread")
        self.thread = thread
    }

    func register(_ context: RequestContext) {
        lock.withLock { pending[ObjectIdentifier(context)] = context }
    }

    func remove(_ context: RequestContext) {
        lock.withLock { _ = pending.removeValue(forKey: ObjectIdentifier(context)) }
    }

    /// Expires every registered request now (used when a drain runs out of time).
    func expireAll() {
        let all = lock.withLock {
            let all = Array(pending.values)
            pending.removeAll()
            return all
        }
        for context in all { expire(context) }
    }

    var count: Int { lock.withLock { pending.count } }

    func stop() {
        lock.withLock { running = false }
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    private func loop() {
        let clock = ContinuousClock()
        let nanos = interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000
        var turn = 0
        while true {
            var request = timespec(tv_sec: Int(nanos / 1_000_000_000), tv_nsec: Int(nanos % 1_000_000_000))
            nanosleep(&request, nil)
            let now = clock.now
            let expired: [RequestContext]? = lock.withLock {
                guard running else { return nil }
                let due = pending.values.filter { ($0.deadline ?? now) <= now }
                for context in due { pending.removeValue(forKey: ObjectIdentifier(context)) }
                return due
            }
            guard let expired else { return }
            for context in expired { expire(context) }
            turn += 1
            if turn % 5 == 0 { tick?(now) }
        }
    }
}

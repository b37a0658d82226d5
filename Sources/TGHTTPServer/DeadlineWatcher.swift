import TGEventLoop

#if canImport(Glibc)
import Glibc
#endif

/// Answers deferred requests whose handler missed its deadline.
///
/// A suspended libmicrohttpd connection never times out, and a client that went away is not
/// noticed while suspended, so every deferred request is registered here until it completes.
/// One thread checks the registry every `interval`; a request past its deadline is completed with
/// the timeout response (which resumes the connection) and its task is cancelled.
///
/// The registry is split by event loop: every deferred request registers and leaves, so one lock
/// for all loops would bounce between their cores on every call.
final class DeadlineWatcher: @unchecked Sendable {
    // Invariant: a shard's `pending` is accessed only with its `lock` held; `running` only with
    // `runningLock` held; the thread is started once and ends after `stop()` clears `running`.
    private final class Shard: @unchecked Sendable {
        // Invariant: `pending` only with `lock` held.
        let lock = Lock()
        var pending: [ObjectIdentifier: RequestContext] = [:]
    }
    private let shards = (0..<16).map { _ in Shard() }
    private let runningLock = Lock()
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

    private func shard(_ context: RequestContext) -> Shard {
        shards[context.daemon.loop.index & (shards.count - 1)]
    }

    func register(_ context: RequestContext) {
        let shard = shard(context)
        shard.lock.withLock { shard.pending[ObjectIdentifier(context)] = context }
    }

    func remove(_ context: RequestContext) {
        let shard = shard(context)
        shard.lock.withLock { _ = shard.pending.removeValue(forKey: ObjectIdentifier(context)) }
    }

    /// Expires every registered request now (used when a drain runs out of time).
    func expireAll() {
        for shard in shards {
            let all = shard.lock.withLock {
                let all = Array(shard.pending.values)
                shard.pending.removeAll()
                return all
            }
            for context in all { expire(context) }
        }
    }

    var count: Int { shards.reduce(0) { total, shard in total + shard.lock.withLock { shard.pending.count } } }

    func stop() {
        runningLock.withLock { running = false }
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
            guard runningLock.withLock({ running }) else { return }
            for shard in shards {
                let expired: [RequestContext] = shard.lock.withLock {
                    let due = shard.pending.values.filter { $0.isDue(at: now) }
                    for context in due { shard.pending.removeValue(forKey: ObjectIdentifier(context)) }
                    return due
                }
                for context in expired { expire(context) }
            }
            turn += 1
            if turn % 5 == 0 { tick?(now) }
        }
    }
}

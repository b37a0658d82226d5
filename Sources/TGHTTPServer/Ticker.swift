import TGBase
import TGEventLoop

#if canImport(Glibc)
import Glibc
#endif

/// A thread that runs `tick` every `interval` until stopped: the server's checks of connections
/// whose request head (or body) arrives too slowly (``HeadDeadlines``), which concern
/// connections, not requests, and are shared by all loops. Request deadlines are each loop's own
/// (``RequestDeadlines``).
final class Ticker: @unchecked Sendable {
    // Invariant: `running` only with `runningLock` held; the thread is started once and ends
    // after `stop()` clears `running`; `thread` is touched only by start and stop, which the
    // server calls under its lifecycle lock or in its deinit.
    private let runningLock = Lock()
    private var running = true
    private let interval: Duration
    private let tick: @Sendable () -> Void
    private var thread: pthread_t?

    init(interval: Duration = .milliseconds(250), tick: @escaping @Sendable () -> Void) {
        self.interval = interval
        self.tick = tick
    }

    func start() {
        let unmanaged = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { argument in
                let ticker = Unmanaged<Ticker>.fromOpaque(argument!).takeRetainedValue()
                ticker.loop()
                return nil
            },
            unmanaged.toOpaque()
        )
        precondition(result == 0, "cannot start the head deadline thread")
        self.thread = thread
    }

    func stop() {
        runningLock.withLock { running = false }
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// Sleeps in steps of at most 50 ms, so `stop()` returns soon whatever the interval.
    private func loop() {
        let nanos = EventLoop.nanoseconds(interval)
        let step = min(nanos, 50_000_000)
        var slept: Int64 = 0
        while true {
            var request = timespec(tv_sec: Int(step / 1_000_000_000), tv_nsec: Int(step % 1_000_000_000))
            nanosleep(&request, nil)
            guard runningLock.withLock({ running }) else { return }
            slept += step
            if slept >= nanos {
                slept = 0
                tick()
            }
        }
    }
}

import TGEventLoop

/// The deferred and async requests of one loop whose connection waits, suspended, for their
/// answer: a suspended libmicrohttpd connection never times out by itself (and a client that went
/// away is not noticed), so each waits here under its deadline until it is answered. The loop's
/// own timer checks them every `interval` while any wait; a request past its deadline is given
/// to `expire` (which answers it 503 and cancels its task).
///
/// Loop thread only. Each request knows its place (``RequestContext/deadlineSlot``), so joining
/// and leaving take no lock and no hashing: every proxied call joins and leaves once.
final class RequestDeadlines {
    private var waiting: [RequestContext] = []
    private var timer: EventLoopTimer?
    private let loop: EventLoop
    private let interval: Int64
    private let expire: (RequestContext) -> Void

    init(loop: EventLoop, interval: Duration = .milliseconds(50), expire: @escaping (RequestContext) -> Void) {
        self.loop = loop
        self.interval = EventLoop.nanoseconds(interval)
        self.expire = expire
    }

    /// Requests waiting now.
    var count: Int { waiting.count }

    /// `context` waits under its deadline (once, however often asked).
    func add(_ context: RequestContext) {
        guard context.deadlineSlot < 0 else { return }
        context.deadlineSlot = waiting.count
        waiting.append(context)
        if waiting.count == 1 { arm() }
    }

    /// `context` was answered (a no-op when it is not waiting).
    func remove(_ context: RequestContext) {
        let slot = context.deadlineSlot
        guard slot >= 0 else { return }
        let last = waiting.removeLast()
        if slot < waiting.count {
            waiting[slot] = last
            last.deadlineSlot = slot
        }
        context.deadlineSlot = -1
    }

    /// Every waiting request expires now (a drain that ran out of time).
    func expireAll() {
        let all = waiting
        for context in all { remove(context) }
        for context in all { expire(context) }
    }

    /// The check runs within `interval`: a timer already waiting is left as it is (when the
    /// last request leaves, it still fires once and finds none), so a loop whose requests come
    /// and go one at a time does not move it in the heap for each.
    private func arm() {
        // Weak: the loop's heap holds the timer, and the loop may outlive its daemon.
        if timer == nil { timer = loop.makeTimer { [weak self] in self?.check() } }
        guard let timer, !timer.isScheduled else { return }
        timer.schedule(at: EventLoop.now() + interval)
    }

    private func check() {
        let now = EventLoop.now()
        let due = waiting.filter { $0.isDue(at: now) }
        for context in due { remove(context) }
        for context in due { expire(context) }
        if !waiting.isEmpty { arm() }
    }

    /// The loop is going away: the timer lets go of this registry.
    func stop() {
        timer?.cancel()
        timer = nil
    }
}

import CEpoll
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What a loop calls when a watched descriptor is ready.
public protocol EventLoopWatcher: AnyObject {
    /// Called on the loop's thread with the ready `EPOLL*` bits.
    func ready(_ events: UInt32)
}

/// One event-loop thread: an epoll set, an inbox other threads post work to (woken through an
/// eventfd), timers, and hooks that run before every wait (libmicrohttpd's and libcurl's own
/// timeouts, and work they must finish before the loop sleeps).
///
/// Everything registered on a loop (watchers, timers, hooks) is touched only on its thread, so
/// the libraries it drives need no lock: the one way in from elsewhere is ``execute(_:)``.
public final class EventLoop: @unchecked Sendable {
    // Invariants:
    // - `watchers`, `freeSlots`, `timers`, `hooks`, `running` and `events` are touched only on
    //   the loop thread (after `start`), or before `start` by the creating thread.
    // - `inbox` is only accessed with `inboxLock` held.
    // - `wakeFD` and `epollFD` are closed in deinit, after the thread ended (`stop` joins it).

    /// A hook run before every wait; it returns how long the loop may sleep, in nanoseconds, as
    /// far as it is concerned (nil: as long as it likes; 0: do not sleep, call me again).
    public typealias PreWaitHook = () -> Int64?

    public let index: Int
    let epollFD: Int32
    private let wakeFD: Int32
    private let inboxLock = Mutex<Inbox>(Inbox())
    private let notified = Atomic<Bool>(false)
    private var watchers: [(any EventLoopWatcher)?] = []
    private var freeSlots: [Int] = []
    private var timers = TimerHeap()
    private var hooks: [(token: Int, hook: PreWaitHook)] = []
    private var nextHookToken = 0
    private var running = true
    /// Work was made ready on the loop (by a hook, a callback): do not sleep before the next round.
    private var spin = false
    private var thread: pthread_t?
    private let threadID = Atomic<UInt>(0)
    private static let wakeTag = UInt64.max

    struct Inbox {
        var jobs: [@Sendable () -> Void] = []
        /// Set with the stop job: nothing is accepted after it.
        var closed = false
    }

    public init(index: Int = 0) {
        self.index = index
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        precondition(epollFD >= 0 && wakeFD >= 0, "epoll_create1/eventfd failed: errno \(errno)")
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: Self.wakeTag))
        epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event)
    }

    deinit {
        close(wakeFD)
        close(epollFD)
    }

    /// `duration` in nanoseconds, the unit of ``now()`` and of every deadline on a loop
    /// (truncated toward zero; beyond ±292 years, the largest count). From its attoseconds:
    /// `Duration.components` costs more (128-bit divisions and multiplications).
    public static func nanoseconds(_ duration: Duration) -> Int64 {
        let attoseconds = duration.attoseconds
        let magnitude = attoseconds.magnitude
        // Below 2^72 attoseconds (some 78 minutes: every timeout a call converts), a shift and a
        // 64-bit division (10^9 is 2^9 times 1 953 125), not a 128-bit division (~140
        // instructions, three times per proxied call). Truncated toward zero either way.
        if magnitude >> 72 == 0 {
            let whole = Int64(UInt64(truncatingIfNeeded: magnitude >> 9) / 1_953_125)
            return attoseconds < 0 ? -whole : whole
        }
        return Int64(clamping: attoseconds / 1_000_000_000)
    }

    /// Nanoseconds on the monotonic clock.
    public static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// Whether the caller runs on this loop's thread.
    public var inEventLoop: Bool {
        let owner = threadID.load(ordering: .relaxed)
        return owner != 0 && owner == UInt(pthread_self())
    }

    /// Starts the loop's thread (once).
    public func start() {
        precondition(thread == nil, "EventLoop.start called twice")
        let unmanaged = Unmanaged.passRetained(self)
        var created = pthread_t()
        let result = pthread_create(
            &created,
            nil,
            { argument in
                let loop = Unmanaged<EventLoop>.fromOpaque(argument!).takeRetainedValue()
                loop.run()
                return nil
            },
            unmanaged.toOpaque()
        )
        precondition(result == 0, "pthread_create failed: \(result)")
        thread = created
    }

    /// Stops the loop after the work already posted and joins its thread (from the loop's own
    /// thread: the loop ends after the current job, unjoined). Whatever owns watchers on it must
    /// have removed them first.
    public func stop() {
        guard let thread else { return }
        let onOwnThread = inEventLoop
        let accepted = inboxLock.withLock { inbox in
            guard !inbox.closed else { return false }
            inbox.jobs.append { [unowned self] in self.running = false }
            inbox.closed = true
            return true
        }
        if accepted { wake() }
        if onOwnThread {
            // The last owner let go from a job on this very loop (an HTTP client's own loop): the
            // loop ends after this job, and nobody waits for its thread.
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
        self.thread = nil
    }

    /// Runs `job` on the loop's thread, soon; callable from any thread (also the loop's own,
    /// where it runs after the current event, not inside it). Returns false, and drops the job,
    /// once the loop is stopping.
    @discardableResult
    public func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        let accepted = inboxLock.withLock { inbox in
            guard !inbox.closed else { return false }
            inbox.jobs.append(job)
            return true
        }
        if accepted { wake() }
        return accepted
    }

    private func wake() {
        if !notified.exchange(true, ordering: .acquiringAndReleasing) {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
    }

    // MARK: Loop-thread API

    /// Watches `fd` for `events` (`EPOLLIN`, `EPOLLOUT`, …); returns the token to change or end
    /// the watch with. Loop thread only (or before `start`).
    @discardableResult
    public func watch(_ fd: Int32, events: UInt32, _ watcher: any EventLoopWatcher) -> Int {
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            watchers[slot] = watcher
        } else {
            slot = watchers.count
            watchers.append(watcher)
        }
        var event = epoll_event(events: events, data: epoll_data_t(u64: UInt64(slot)))
        epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event)
        return slot
    }

    /// Changes the events a watch waits for. Loop thread only.
    public func modify(_ token: Int, fd: Int32, events: UInt32) {
        var event = epoll_event(events: events, data: epoll_data_t(u64: UInt64(token)))
        epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event)
    }

    /// Ends a watch (before `fd` is closed, or after: a closed descriptor leaves the set by
    /// itself). Loop thread only.
    public func unwatch(_ token: Int, fd: Int32) {
        epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
        watchers[token] = nil
        freeSlots.append(token)
    }

    /// Runs `action` on the loop at `deadline` (``now()`` nanoseconds) unless cancelled first.
    /// Loop thread only.
    @discardableResult
    public func schedule(at deadline: Int64, _ action: @escaping () -> Void) -> EventLoopTimer {
        let timer = EventLoopTimer(deadline: deadline, loop: self, action: action)
        timers.push(timer)
        return timer
    }

    /// A timer not yet scheduled that keeps `action` when it fires, to be scheduled again and
    /// again (``EventLoopTimer/schedule(at:)``): one object for a deadline that moves all the time,
    /// such as libcurl's. Loop thread only.
    public func makeTimer(_ action: @escaping () -> Void) -> EventLoopTimer {
        EventLoopTimer(deadline: 0, loop: self, action: action, reusable: true)
    }

    /// Adds a hook run before every wait; returns the token to remove it with. Loop thread only
    /// (or before `start`).
    @discardableResult
    public func addPreWaitHook(_ hook: @escaping PreWaitHook) -> Int {
        nextHookToken += 1
        hooks.append((nextHookToken, hook))
        return nextHookToken
    }

    /// Asks for another round without sleeping: something made work ready that a hook (which may
    /// already have run this round) must see. Loop thread only.
    public func wakeSoon() {
        spin = true
    }

    /// Removes a hook (its owner is going away). Loop thread only.
    public func removePreWaitHook(_ token: Int) {
        hooks.removeAll { $0.token == token }
    }

    // MARK: The loop

    private func run() {
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        CEpoll_set_thread_name("tg-loop-\(index)")
        let capacity: Int32 = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: Int(capacity))
        defer { events.deallocate() }
        while true {
            drainInbox()
            guard running else { break }
            runTimers()
            var sleep: Int64?
            // By index: a `for` over the array holds a reference to it for the round (two
            // counts per round, every round). A hook that adds or removes hooks is seen by count.
            var hookIndex = 0
            while hookIndex < hooks.count {
                if let wanted = hooks[hookIndex].hook() { sleep = min(sleep ?? wanted, wanted) }
                hookIndex += 1
            }
            // After the hooks: they may have scheduled timers (libcurl does, when it starts a transfer).
            if let next = nextTimerDelay() { sleep = min(sleep ?? next, next) }
            if spin || notified.load(ordering: .acquiring) { sleep = 0 }
            spin = false
            let timeout: Int32 = sleep.map { Int32(clamping: ($0 + 999_999) / 1_000_000) } ?? -1
            let count = epoll_wait(epollFD, events, capacity, timeout)
            guard count > 0 else { continue }
            for index in 0..<Int(count) {
                let event = events[index]
                if event.data.u64 == Self.wakeTag {
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, 8)
                    continue
                }
                let slot = Int(event.data.u64)
                if slot < watchers.count, let watcher = watchers[slot] { watcher.ready(event.events) }
            }
        }
        // Timers that never fired go with the loop (their actions hold what they would have touched).
        timers.removeAll()
    }

    private func drainInbox() {
        guard notified.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let jobs = inboxLock.withLock { inbox in
            let taken = inbox.jobs
            inbox.jobs.removeAll(keepingCapacity: true)
            return taken
        }
        for job in jobs { job() }
    }

    /// Runs due timers.
    private func runTimers() {
        guard !timers.isEmpty else { return }
        let now = Self.now()
        while let deadline = timers.firstDeadline, deadline <= now, let first = timers.popFirst() {
            let action = first.action
            if !first.reusable { first.action = nil }
            action?()
        }
    }

    /// Nanoseconds until the next timer (0 if one is due), if any.
    private func nextTimerDelay() -> Int64? {
        guard let deadline = timers.firstDeadline else { return nil }
        return max(0, deadline - Self.now())
    }

    /// Timers waiting to fire; loop thread only (tests).
    var pendingTimers: Int { timers.count }

    fileprivate func cancel(_ timer: EventLoopTimer) {
        timer.action = nil
        timers.remove(timer)
    }

    fileprivate func unschedule(_ timer: EventLoopTimer) {
        timers.remove(timer)
    }

    fileprivate func reschedule(_ timer: EventLoopTimer) {
        timers.move(timer)
    }
}

/// A timer on an ``EventLoop``; loop thread only.
public final class EventLoopTimer {
    public private(set) var deadline: Int64
    var action: (() -> Void)?
    /// Made by ``EventLoop/makeTimer(_:)``: keeps its action when it fires.
    let reusable: Bool
    /// Its place in the loop's heap; -1 once it fired or was cancelled.
    fileprivate var heapIndex = -1
    private unowned let loop: EventLoop

    init(deadline: Int64, loop: EventLoop, action: @escaping () -> Void, reusable: Bool = false) {
        self.deadline = deadline
        self.loop = loop
        self.action = action
        self.reusable = reusable
    }

    /// A reusable timer fires at `deadline` (``EventLoop/now()`` nanoseconds), in place of any
    /// time it was set for before.
    public func schedule(at deadline: Int64) {
        precondition(reusable, "only a timer from makeTimer is scheduled again")
        self.deadline = deadline
        loop.reschedule(self)
    }

    /// It waits to fire (scheduled, and neither fired nor cancelled since).
    public var isScheduled: Bool { heapIndex >= 0 }

    /// A reusable timer does not fire until it is scheduled again.
    public func unschedule() {
        loop.unschedule(self)
    }

    /// The action will not run (if it has not yet); the timer leaves the loop's heap at once, so
    /// a loop whose requests each cancel a long deadline keeps only the live ones.
    public func cancel() {
        guard heapIndex >= 0 else {
            action = nil
            return
        }
        loop.cancel(self)
    }
}

/// A binary min-heap of timers by deadline. Each timer knows its index, so a cancelled one is
/// removed at once (O(log n)) instead of waiting to reach the top.
struct TimerHeap {
    /// Each timer with its deadline, compared without touching the object. The heap owns one
    /// reference to each timer, taken in `push` and given back when it leaves, so moving timers
    /// around the heap costs no reference counting (a streamed answer's idle deadline comes and
    /// goes with each such call).
    private var items: [(deadline: Int64, timer: Unmanaged<EventLoopTimer>)] = []

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }
    var firstDeadline: Int64? { items.first?.deadline }

    mutating func push(_ timer: EventLoopTimer) {
        items.append((timer.deadline, Unmanaged.passRetained(timer)))
        timer.heapIndex = items.count - 1
        siftUp(items.count - 1)
    }

    /// Puts `timer` where its (new) deadline belongs: moved in place if it is in the heap,
    /// added if not.
    mutating func move(_ timer: EventLoopTimer) {
        guard let index = position(of: timer) else {
            push(timer)
            return
        }
        items[index].deadline = timer.deadline
        siftDown(siftUp(index))
    }

    /// Takes the earliest timer out.
    mutating func popFirst() -> EventLoopTimer? {
        guard let first = items.first?.timer.takeUnretainedValue() else { return nil }
        remove(first)
        return first
    }

    /// Removes `timer` if it is in the heap.
    mutating func remove(_ timer: EventLoopTimer) {
        guard let index = position(of: timer) else { return }
        timer.heapIndex = -1
        let last = items.removeLast()
        if index < items.count {
            items[index] = last
            last.timer._withUnsafeGuaranteedRef { $0.heapIndex = index }
            siftDown(siftUp(index))
        }
        Unmanaged.passUnretained(timer).release()
    }

    /// Where `timer` is in the heap, if it is.
    private func position(of timer: EventLoopTimer) -> Int? {
        let index = timer.heapIndex
        guard index >= 0, index < items.count, items[index].timer.toOpaque() == Unmanaged.passUnretained(timer).toOpaque() else {
            return nil
        }
        return index
    }

    /// Empties the heap (the loop ended): every timer's reference is given back.
    mutating func removeAll() {
        for item in items {
            item.timer._withUnsafeGuaranteedRef { $0.heapIndex = -1 }
            item.timer.release()
        }
        items = []
    }

    @discardableResult
    private mutating func siftUp(_ start: Int) -> Int {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].deadline < items[parent].deadline else { break }
            swap(child, parent)
            child = parent
        }
        return child
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < items.count else { return }
            var child = left
            if left + 1 < items.count, items[left + 1].deadline < items[left].deadline { child = left + 1 }
            guard items[child].deadline < items[parent].deadline else { return }
            swap(child, parent)
            parent = child
        }
    }

    private mutating func swap(_ a: Int, _ b: Int) {
        items.swapAt(a, b)
        items[a].timer._withUnsafeGuaranteedRef { $0.heapIndex = a }
        items[b].timer._withUnsafeGuaranteedRef { $0.heapIndex = b }
    }
}

/// The loops of a process: one per CPU it may use by default, handed out round robin.
public final class EventLoopGroup: Sendable {
    public let loops: [EventLoop]
    private let nextIndex = Atomic<Int>(0)

    /// Creates and starts `count` loops (at least one).
    public init(count: Int) {
        loops = (0..<max(1, count)).map { EventLoop(index: $0) }
        for loop in loops { loop.start() }
    }

    /// One loop per CPU the process may use (``UsableCPUs``: its affinity mask, its cgroup's CPU
    /// quota, the CPUs online), at least one.
    public static var defaultCount: Int { UsableCPUs.current().count }

    /// The next loop, round robin.
    public func next() -> EventLoop {
        loops[nextIndex.add(1, ordering: .relaxed).newValue % loops.count]
    }

    /// Stops every loop (see ``EventLoop/stop()``).
    public func stop() {
        for loop in loops { loop.stop() }
    }
}

extension EventLoop {
    /// Runs `body` on the loop and returns its result to the awaiting task.
    /// Once the loop is stopping, `body` runs on the caller's thread instead (nothing else
    /// runs on the loop any more).
    public func run<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { continuation in
            let box = ContinuationBox(continuation: continuation)
            if !execute({ box.resume(body()) }) { continuation.resume(returning: body()) }
        }
    }
}

/// A continuation resumed once from the loop (or, when the loop refused the job, by its caller).
private final class ContinuationBox<Result: Sendable>: Sendable {
    let continuation: CheckedContinuation<Result, Never>

    init(continuation: CheckedContinuation<Result, Never>) {
        self.continuation = continuation
    }

    func resume(_ value: Result) { continuation.resume(returning: value) }
}

extension EventLoop {
    /// The `EPOLL*` bits a watch waits for and a watcher is told of, for modules that do not
    /// import epoll's header themselves.
    public static let readable = EPOLLIN.rawValue
    public static let writable = EPOLLOUT.rawValue
    /// An error or a hang-up on the descriptor (always reported, whatever is watched).
    public static let failed = EPOLLERR.rawValue | EPOLLHUP.rawValue
}

import CEpoll
import CMicroHTTPD
import CMicroHTTPDShims
import Synchronization
import TGBase
import TGEventLoop

#if canImport(Glibc)
import Glibc
#endif

/// One libmicrohttpd daemon in external mode, driven by one event loop: its epoll set is nested in
/// the loop's, it runs when that set is ready or its timeout is due, and again before the loop
/// sleeps whenever a connection was resumed (libmicrohttpd 0.9.75 in external mode would
/// otherwise leave a resumed connection waiting for the next unrelated event).
///
/// Connections are suspended only on the loop (in libmicrohttpd's callbacks) and resumed only on
/// the loop: a resume asked for elsewhere is posted to it. The set of suspended connections makes
/// a resume idempotent and lets shutdown close every one of them before the daemon stops
/// (stopping a daemon with a suspended connection aborts the process).
final class LoopDaemon: EventLoopWatcher, @unchecked Sendable {
    // Invariants: every field but `server`, `loop`, `logTarget` and the counters (atomics,
    // written on the loop's thread, read anywhere) is touched only on the loop's thread, once
    // `attach()` ran there (before: only by the thread that created the daemon, which has not
    // handed it to the loop yet). libmicrohttpd calls every callback of this
    // daemon from `MHD_run`, that is, on the loop.
    /// Unchecked: the server's deinit stops its daemons and waits for that on the loop, and
    /// libmicrohttpd calls back (through this) while it does; a checked unowned reference to an
    /// object in its deinit traps. The server outlives every use: its deinit returns only after.
    unowned(unsafe) let server: HTTPServer
    let loop: EventLoop
    private(set) var daemon: OpaquePointer?
    private var watchToken = -1
    private var hookToken = 0
    private var epollFD: Int32 = -1
    private var needsRun = false
    private var suspended = Set<WordKey>()
    /// Answers queued as upgrades whose 101 has not gone out yet, by their request's context.
    var pendingUpgrades: [WordKey: any ConnectionUpgradeHandler] = [:]
    /// Upgraded connections not closed yet (closed by ``stop()`` if still open).
    private var upgraded: [ObjectIdentifier: UpgradedConnection] = [:]
    /// Shutting down: every callback refuses work, so resumed connections close.
    private(set) var closing = false
    let logTarget = UnsafeMutablePointer<CShims_MHD_LogTarget>.allocate(capacity: 1)
    /// This loop's requests between their request line and their completion, and its suspended
    /// connections so far. Counted per loop, written only by the loop's thread: one counter for
    /// the whole server had every request of every loop write the same cache line.
    let inFlight = Atomic<Int>(0)
    let suspensions = Atomic<Int>(0)
    /// This loop's suspended requests under their deadline.
    let deadlines: RequestDeadlines

    init(server: HTTPServer, loop: EventLoop) {
        self.server = server
        self.loop = loop
        deadlines = RequestDeadlines(loop: loop) { [unowned(unsafe) server] context in
            server.complete(context, with: HTTPServer.timeoutResponse, bodyError: .requestTimedOut)
        }
    }

    deinit {
        logTarget.deallocate()
    }

    /// Called once with the started daemon, before the loop sees it.
    func started(_ daemon: OpaquePointer) {
        self.daemon = daemon
        epollFD = CShims_MHD_epoll_fd(daemon)
    }

    /// On the loop: watch the daemon's epoll set and run it before every wait.
    func attach() {
        watchToken = loop.watch(epollFD, events: EPOLLIN.rawValue, self)
        hookToken = loop.addPreWaitHook { [unowned self] in self.beforeWait() }
        needsRun = true
    }

    func ready(_ events: UInt32) {
        guard let daemon else { return }
        needsRun = false
        MHD_run(daemon)
    }

    /// Runs the daemon while it has work it can do without waiting (resumed connections, data
    /// already read, connections left on its ready list: it says so with a zero timeout), then
    /// tells the loop how long it may sleep.
    private func beforeWait() -> Int64? {
        guard let daemon else { return nil }
        var milliseconds: UInt64 = 0
        for _ in 0..<16 {
            if needsRun {
                needsRun = false
                MHD_run(daemon)
            }
            guard MHD_get_timeout(daemon, &milliseconds) == MHD_Result.YES else { return needsRun ? 0 : nil }
            guard milliseconds == 0 else { return needsRun ? 0 : Int64(clamping: milliseconds) * 1_000_000 }
            needsRun = true
        }
        return 0
    }

    /// On the loop, inside a callback of this connection.
    func suspend(_ connection: OpaquePointer) {
        MHD_suspend_connection(connection)
        suspended.insert(WordKey(UnsafeMutableRawPointer(connection)))
    }

    /// From any thread: resume `connection` if it is suspended (once, however often asked).
    func resume(_ connection: OpaquePointer) {
        let raw = UnsafeMutableRawPointer(connection)
        if loop.inEventLoop {
            resumeOnLoop(raw)
        } else {
            let address = SendableAddress(raw)
            loop.execute { [self] in self.resumeOnLoop(address.pointer) }
        }
    }

    private func resumeOnLoop(_ raw: UnsafeMutableRawPointer) {
        guard suspended.remove(WordKey(raw)) != nil else { return }
        MHD_resume_connection(OpaquePointer(raw))
        needsRun = true
        loop.wakeSoon()
    }

    /// From any thread: `context` was answered, so it leaves the loop's deadlines. The registry
    /// is the loop's alone: from elsewhere, leaving it is posted there (as the resume is).
    func answered(_ context: RequestContext) {
        if loop.inEventLoop {
            deadlines.remove(context)
        } else {
            loop.execute { [self] in self.deadlines.remove(context) }
        }
    }

    /// On the loop: the daemon has work (an upgraded connection was closed): it runs before the
    /// loop sleeps.
    func runSoon() {
        needsRun = true
        loop.wakeSoon()
    }

    func upgradedOpened(_ connection: UpgradedConnection) {
        upgraded[ObjectIdentifier(connection)] = connection
    }

    func upgradedClosed(_ connection: UpgradedConnection) {
        upgraded[ObjectIdentifier(connection)] = nil
    }

    /// On the loop: the request whose context is `raw` completed; an upgrade queued for it whose
    /// 101 never went out is abandoned.
    func abandonUpgrade(of raw: UnsafeMutableRawPointer) {
        guard !pendingUpgrades.isEmpty, let handler = pendingUpgrades.removeValue(forKey: WordKey(raw)) else { return }
        handler.abandoned()
    }

    /// On the loop: stop accepting; returns the listening socket for the caller to close.
    func quiesce() -> Int32 {
        guard let daemon else { return -1 }
        return MHD_quiesce_daemon(daemon)
    }

    /// On the loop: close every connection (suspended ones are resumed into a refusal, which
    /// closes them) and stop the daemon. Returns how many suspended connections had to be closed.
    @discardableResult
    func stop() -> Int {
        guard let daemon else { return 0 }
        closing = true
        deadlines.stop()
        // Upgraded connections first: their handlers hear it, then each is closed.
        for connection in Array(upgraded.values) { connection.serverStops() }
        let forced = suspended.count
        var rounds = 0
        while !suspended.isEmpty, rounds < 64 {
            for key in suspended { MHD_resume_connection(OpaquePointer(bitPattern: UInt(key.word))) }
            suspended.removeAll()
            MHD_run(daemon)
            MHD_run(daemon)
            rounds += 1
        }
        if watchToken >= 0 {
            loop.unwatch(watchToken, fd: epollFD)
            loop.removePreWaitHook(hookToken)
            watchToken = -1
        }
        self.daemon = nil
        for handler in pendingUpgrades.values { handler.abandoned() }
        pendingUpgrades.removeAll()
        if suspended.isEmpty {
            MHD_stop_daemon(daemon)
        }
        // Otherwise the daemon is left as it is: libmicrohttpd aborts the process when stopped with
        // a suspended connection (a core with secrets in it); the process is about to exit.
        return forced
    }
}

/// A C pointer handed to the loop thread. The pointee is used only there.
struct SendableAddress: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer

    init(_ pointer: UnsafeMutableRawPointer) {
        self.pointer = pointer
    }
}

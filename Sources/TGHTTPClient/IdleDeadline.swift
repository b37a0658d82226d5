import TGEventLoop

/// The idle deadline of one exchange on a loop: `expire` runs once no byte moved for `timeout`.
/// Time the exchange spends paused by its own side (a reader that is behind, an upload that waits
/// for its producer) does not count: the peer is not the slow one then. One reusable loop timer,
/// moved only when it fires. Loop thread only.
///
/// Used by ``LoopExchange`` for the body after the head, and by the transfer of an exchange with a
/// streamed request body for the whole exchange (see
/// ``HTTPClient/startOnLoop(_:body:headTimeout:idleTimeout:wholeBodyUpTo:)``); never
/// `CURLOPT_TIMEOUT`, which counts paused time (docs/c-libraries.md).
final class IdleDeadline {
    private let timeout: Int64
    private var lastActivity: Int64
    private let isPaused: () -> Bool
    private let expire: () -> Void
    private var timer: EventLoopTimer?

    /// Armed on `loop` at once, counting from now.
    init(timeout: Int64, on loop: EventLoop, isPaused: @escaping () -> Bool, expire: @escaping () -> Void) {
        self.timeout = timeout
        self.isPaused = isPaused
        self.expire = expire
        lastActivity = EventLoop.now()
        let timer = loop.makeTimer { [weak self] in self?.check() }
        timer.schedule(at: lastActivity + timeout)
        self.timer = timer
    }

    /// Bytes moved (or the exchange's own pause ended): the deadline counts from now.
    func moved() {
        lastActivity = EventLoop.now()
    }

    /// The exchange ended: the deadline will not fire.
    func stop() {
        timer?.cancel()
        timer = nil
    }

    private func check() {
        guard let timer else { return }
        let now = EventLoop.now()
        if isPaused() { lastActivity = now }
        if now - lastActivity < timeout {
            timer.schedule(at: lastActivity + timeout)
        } else {
            stop()
            expire()
        }
    }
}

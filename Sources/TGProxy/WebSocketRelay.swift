import TGEventLoop
import TGHTTPClient
import TGHTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// Bytes read from one side of a WebSocket and not yet written to the other, at most
/// ``capacity`` of them: a side is read only while the other has taken enough (back-pressure:
/// a slow reader holds its writer back, through TCP, instead of filling memory).
struct RelayBuffer {
    static let capacity = 64 * 1024
    private(set) var bytes: [UInt8] = []
    private var start = 0
    var tracker = WebSocketFrameTracker()
    /// The side it is read from closed its connection (or failed).
    var sourceEnded = false
    /// Not read any more: a close frame of the relay's own is queued (or the source ended).
    var stopped = false

    var pending: Int { bytes.count - start }
    var room: Int { max(0, Self.capacity - pending) }
    /// Drained and nothing more will come.
    var isDone: Bool { (sourceEnded || stopped) && pending == 0 }

    /// Bytes read from the source: they pass the frame tracker and wait to be written.
    mutating func append(read: UnsafeRawBufferPointer) {
        tracker.pass(read)
        bytes.append(contentsOf: read)
    }

    /// A frame of the relay's own (it does not pass the tracker: it is not the source's).
    mutating func append(own frame: [UInt8]) {
        bytes.append(contentsOf: frame)
    }

    /// Writes what it can with `write` (which returns how many bytes went, or nil on failure).
    mutating func drain(_ write: (UnsafeRawBufferPointer) -> Int?) -> Int? {
        guard pending > 0 else { return 0 }
        let written = bytes.withUnsafeBytes { write(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        guard let written else { return nil }
        start += written
        if start == bytes.count {
            bytes.removeAll(keepingCapacity: true)
            start = 0
        } else if start >= Self.capacity {
            bytes.removeFirst(start)
            start = 0
        }
        return written
    }

    /// How many bytes may be read now: none past a frame's end once the relay is ending (its
    /// close frame goes in between two frames).
    func readLimit(ending: Bool) -> Int {
        guard !sourceEnded, !stopped else { return 0 }
        guard ending else { return room }
        return min(room, tracker.bytesToBoundary)
    }
}

/// One WebSocket through the proxy, after both handshakes: the app's connection (given by the
/// server with the 101) and the API's (an ``UpstreamTunnel``), relayed both ways on the loop of
/// the app's connection with a bounded buffer each way. Frames pass as they are (extensions
/// such as compression included); only their headers are read, so that the relay can end the
/// connection cleanly: when its session ends (close code 1008) or the instance shuts down
/// (1001), each side gets a close frame at its next frame boundary, and both connections close
/// once those are written (or after ``endingGrace``, whatever is pending); so does a connection
/// on which nothing moved for the API's idle timeout (1001). When either side
/// closes its connection, what it sent is passed on and the other is closed too.
final class WebSocketRelay: ConnectionUpgradeHandler, SessionBoundStream, @unchecked Sendable {
    // Invariant: used only on `loop`, the loop of the app's connection and of the tunnel: the
    // server calls ``upgraded(_:)`` and ``abandoned()`` there, the watchers and timers fire
    // there, and ``OpenStreams`` ends streams there.
    let loop: EventLoop
    private let tunnel: UpstreamTunnel
    private let hold: StreamHold?
    private var client: UpgradedConnection?
    private var toUpstream = RelayBuffer()
    private var toClient = RelayBuffer()
    private var clientSide: RelaySide?
    private var upstreamSide: RelaySide?
    /// Whether a read might find bytes (a wait clears it, readiness sets it; TLS may hold
    /// bytes the socket no longer shows, so a side stopped for lack of room is read again).
    private var clientReadable = true
    private var upstreamReadable = true
    private var ending: (code: UInt16, reason: String)?
    private var endingTimer: EventLoopTimer?
    /// No byte either way for this long ends the connection (1001); 0: never.
    private let idleTimeout: Int64
    private var idleTimer: EventLoopTimer?
    /// When a byte last came from either side (``EventLoop/now()``).
    private var lastActivity: Int64 = 0
    private var finished = false
    /// Itself, while it relays (nothing else need hold it: the loop's watches and the register
    /// hold its sides and it, but a call without a session is in no register).
    private var keepAlive: WebSocketRelay?

    /// How long an ending relay waits for its close frames to go before it closes anyway.
    static let endingGrace: Int64 = 5_000_000_000

    init(tunnel: UpstreamTunnel, upstreamEarly: [UInt8], hold: StreamHold?, loop: EventLoop, idleTimeout: Duration = .zero) {
        self.tunnel = tunnel
        self.hold = hold
        self.loop = loop
        self.idleTimeout = EventLoop.nanoseconds(idleTimeout)
        upstreamEarly.withUnsafeBytes { toClient.append(read: $0) }
        // In the register from now: a session that ends before the 101 went out still ends it.
        if let hold { hold.streams.add(self, holder: hold.holder) }
    }

    // MARK: ConnectionUpgradeHandler

    func upgraded(_ connection: UpgradedConnection) {
        client = connection
        connection.onServerStop = { [unowned self] in self.finish() }
        connection.early.withUnsafeBytes { toUpstream.append(read: $0) }
        let clientSide = RelaySide(relay: self, isClient: true, socket: connection.socket)
        let upstreamSide = RelaySide(relay: self, isClient: false, socket: tunnel.socket)
        clientSide.token = loop.watch(connection.socket, events: EventLoop.readable, clientSide)
        upstreamSide.token = loop.watch(tunnel.socket, events: EventLoop.readable, upstreamSide)
        clientSide.registered = EventLoop.readable
        upstreamSide.registered = EventLoop.readable
        self.clientSide = clientSide
        self.upstreamSide = upstreamSide
        keepAlive = self
        lastActivity = EventLoop.now()
        if idleTimeout > 0 {
            let timer = loop.makeTimer { [unowned self] in self.checkIdle() }
            timer.schedule(at: lastActivity + idleTimeout)
            idleTimer = timer
        }
        if ending != nil { startEndingTimer() }
        pump()
    }

    func abandoned() {
        finished = true
        tunnel.close()
        if let hold { hold.streams.remove(self, session: hold.holder.session) }
    }

    // MARK: SessionBoundStream

    func end() {
        beginEnding(code: WebSocketFrames.policyViolation, reason: "session ended")
    }

    func endForShutdown() {
        beginEnding(code: WebSocketFrames.goingAway, reason: "server shutting down")
    }

    /// Starts the ending; before the 101 went out, the ending starts with the relay.
    private func beginEnding(code: UInt16, reason: String) {
        guard !finished, ending == nil else { return }
        ending = (code, reason)
        guard client != nil else { return }
        startEndingTimer()
        pump()
    }

    private func startEndingTimer() {
        endingTimer = loop.schedule(at: EventLoop.now() + Self.endingGrace) { [weak self] in self?.finish() }
    }

    /// The idle timer fired: the connection ends if nothing moved since, else the timer waits
    /// for the new deadline.
    private func checkIdle() {
        guard !finished, ending == nil else { return }
        let due = lastActivity + idleTimeout
        if due <= EventLoop.now() {
            beginEnding(code: WebSocketFrames.goingAway, reason: "idle timeout")
        } else {
            idleTimer?.schedule(at: due)
        }
    }

    // MARK: Relaying

    fileprivate func ready(client isClient: Bool, events: UInt32) {
        guard !finished else { return }
        if events & EventLoop.failed != 0, events & EventLoop.readable == 0 {
            finish()
            return
        }
        if isClient { clientReadable = true } else { upstreamReadable = true }
        pump()
    }

    /// Moves what can move without waiting, both ways, then watches for what it waits on.
    private func pump() {
        while !finished, moveOnce() {}
        guard !finished else { return }
        // One side closed and all it sent went on; or, ending, both close frames went.
        if (toUpstream.sourceEnded && toUpstream.pending == 0) || (toClient.sourceEnded && toClient.pending == 0)
            || (toUpstream.isDone && toClient.isDone)
        {
            finish()
            return
        }
        watch()
    }

    /// One round each way: writes what waits, reads what room allows. Whether anything moved
    /// (false once the relay finished on a failed write). Not inlined into ``pump()``, nor the
    /// reads into it: Swift 6.3's optimizer crashes on the inlined loop in release builds
    /// (SimplifyCFG's jump threading, "cannot get borrow introducers for unknown guaranteed value").
    @inline(never)
    private func moveOnce() -> Bool {
        let ending = self.ending != nil
        // The app to the API.
        guard let toAPI = writeUpstream() else {
            finish()
            return false
        }
        var moved = toAPI > 0
        let clientLimit = clientReadable ? toUpstream.readLimit(ending: ending) : 0
        if clientLimit > 0, readClient(limit: clientLimit) { moved = true }
        // The API to the app.
        guard let toApp = writeClient() else {
            finish()
            return false
        }
        if toApp > 0 { moved = true }
        let upstreamLimit = upstreamReadable ? toClient.readLimit(ending: ending) : 0
        if upstreamLimit > 0, readUpstream(limit: upstreamLimit) { moved = true }
        if ending { queueCloseFrames() }
        return moved
    }

    private func writeUpstream() -> Int? {
        let tunnel = self.tunnel
        return toUpstream.drain { tunnel.send($0) }
    }

    private func writeClient() -> Int? {
        let socket = client?.socket ?? -1
        return toClient.drain { Self.send($0, to: socket) }
    }

    @inline(never)  // see moveOnce()
    private func readClient(limit: Int) -> Bool {
        let socket = client?.socket ?? -1
        return withUnsafeTemporaryAllocation(byteCount: limit, alignment: 1) { buffer in
            let count = recv(socket, buffer.baseAddress, limit, Int32(MSG_DONTWAIT))
            if count > 0 {
                toUpstream.append(read: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                if idleTimeout > 0 { lastActivity = EventLoop.now() }
                // Less than asked for: the socket is drained (no read just to hear EAGAIN; the
                // watch, level-triggered, says when more comes).
                if count < limit { clientReadable = false }
                return true
            }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                clientReadable = false
                return false
            }
            toUpstream.sourceEnded = true
            return true
        }
    }

    @inline(never)  // see moveOnce()
    private func readUpstream(limit: Int) -> Bool {
        withUnsafeTemporaryAllocation(byteCount: limit, alignment: 1) { buffer in
            switch tunnel.receive(into: buffer) {
            case .bytes(let count):
                toClient.append(read: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                if idleTimeout > 0 { lastActivity = EventLoop.now() }
                // As for the app's side, over plain TCP. Over TLS, bytes may wait decrypted in
                // OpenSSL, where no watch sees them: read until it says there is nothing.
                if count < limit, !tunnel.isTLS { upstreamReadable = false }
                return true
            case .wait:
                upstreamReadable = false
                return false
            case .end, .failed:
                toClient.sourceEnded = true
                return true
            }
        }
    }

    /// Ending: a side at a frame boundary stops being read and its peer gets the relay's close
    /// frame (unless that side sent one of its own already, which is then the last it sends).
    private func queueCloseFrames() {
        guard let ending else { return }
        if !toClient.stopped, toClient.tracker.atBoundary || toClient.sourceEnded {
            toClient.stopped = true
            if !toClient.tracker.closeSeen, !toClient.sourceEnded {
                toClient.append(own: WebSocketFrames.close(code: ending.code, reason: ending.reason, mask: nil))
            }
        }
        if !toUpstream.stopped, toUpstream.tracker.atBoundary || toUpstream.sourceEnded {
            toUpstream.stopped = true
            if !toUpstream.tracker.closeSeen, !toUpstream.sourceEnded {
                let mask = UInt32.random(in: 0...UInt32.max)
                let key = (UInt8(mask >> 24), UInt8(mask >> 16 & 0xFF), UInt8(mask >> 8 & 0xFF), UInt8(mask & 0xFF))
                toUpstream.append(own: WebSocketFrames.close(code: ending.code, reason: ending.reason, mask: key))
            }
        }
    }

    /// Each socket watched for what the relay waits on: readable while its buffer has room,
    /// writable while bytes wait for it.
    private func watch() {
        let ending = self.ending != nil
        if let clientSide {
            var events: UInt32 = toUpstream.readLimit(ending: ending) > 0 ? EventLoop.readable : 0
            if toClient.pending > 0 { events |= EventLoop.writable }
            clientSide.want(events, on: loop)
        }
        if let upstreamSide {
            var events: UInt32 = toClient.readLimit(ending: ending) > 0 ? EventLoop.readable : 0
            if toUpstream.pending > 0 { events |= EventLoop.writable }
            upstreamSide.want(events, on: loop)
        }
    }

    /// Closes both connections (once) and leaves the register.
    private func finish() {
        guard !finished else { return }
        finished = true
        endingTimer?.cancel()
        endingTimer = nil
        idleTimer?.cancel()
        idleTimer = nil
        clientSide?.stop(on: loop)
        upstreamSide?.stop(on: loop)
        clientSide = nil
        upstreamSide = nil
        client?.close()
        client = nil
        tunnel.close()
        if let hold { hold.streams.remove(self, session: hold.holder.session) }
        keepAlive = nil
    }

    /// Writes to the app's socket without blocking: how many bytes went, nil on failure.
    private static func send(_ bytes: UnsafeRawBufferPointer, to socket: Int32) -> Int? {
        guard socket >= 0 else { return nil }
        let count = Glibc.send(socket, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
        if count >= 0 { return count }
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : nil
    }
}

/// One socket of a relay in the loop's epoll set.
private final class RelaySide: EventLoopWatcher {
    unowned let relay: WebSocketRelay
    let isClient: Bool
    let socket: Int32
    var token = -1
    var registered: UInt32 = 0

    init(relay: WebSocketRelay, isClient: Bool, socket: Int32) {
        self.relay = relay
        self.isClient = isClient
        self.socket = socket
    }

    func ready(_ events: UInt32) {
        relay.ready(client: isClient, events: events)
    }

    func want(_ events: UInt32, on loop: EventLoop) {
        guard events != registered, token >= 0 else { return }
        loop.modify(token, fd: socket, events: events)
        registered = events
    }

    func stop(on loop: EventLoop) {
        guard token >= 0 else { return }
        loop.unwatch(token, fd: socket)
        token = -1
    }
}

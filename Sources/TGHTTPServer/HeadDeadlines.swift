import Synchronization
import TGBase
import TGEventLoop

#if canImport(Glibc)
import Glibc
#endif

/// `SHUT_RDWR` (2 on every Linux ABI), spelled out: some incremental builds of this module, which
/// also imports the epoll headers (`CEpoll`), did not find the C constant.
let shutBoth: Int32 = 2

/// The open connections and, for each, since when its next request head (request line and
/// headers) has been arriving: since the connection opened, or since its previous request ended.
///
/// libmicrohttpd's connection timeout is an idle timeout, so a client that trickles a head a byte
/// at a time (slowloris) would hold its connection forever; ``expire(timeout:now:)`` shuts down
/// the socket of every connection whose head has taken longer than the timeout, and
/// libmicrohttpd then closes the connection as it would after any socket error.
///
/// Marking a head's start and arrival is on every request's path, so it takes no lock and reads
/// the coarse monotonic clock (a few milliseconds of resolution, plenty for a timeout of seconds).
final class HeadDeadlines: @unchecked Sendable {
    // Invariants:
    // - `open` is only accessed with `lock` held.
    // - An entry is in `open` from the connection's STARTED notification to its CLOSED one, and
    //   libmicrohttpd notifies CLOSED before it closes the socket, which it cannot do while
    //   `expire` holds `lock`: `expire` never shuts down a descriptor that was closed and reused.
    final class Entry: Sendable {
        let socket: Int32
        /// Coarse monotonic nanoseconds when the current head started arriving; 0 when none is.
        let since: Atomic<Int64>
        /// The peer counted against the per-IP connection limit (nil: not counted).
        let peer: PeerAddress?
        /// When the current window of a request body began (0: no body arriving, or paused by
        /// the server for back-pressure), and the bytes received in it.
        let bodyWindowStart = Atomic<Int64>(0)
        let bodyWindowBytes = Atomic<Int>(0)
        /// What a handler remembers from one of the connection's requests for the next.
        let memo = ConnectionMemo()
        /// The peer's address as text, formatted once for all of the connection's requests
        /// (`.unknown` when libmicrohttpd did not give one).
        let address: PeerAddress

        init(socket: Int32, since: Int64, peer: PeerAddress? = nil, address: PeerAddress = .unknown) {
            self.socket = socket
            self.since = Atomic(since)
            self.peer = peer
            self.address = address
        }

        /// A request body starts arriving (or resumes after a pause of the server's making).
        func bodyStarted(now: Int64 = HeadDeadlines.now()) {
            bodyWindowBytes.store(0, ordering: .relaxed)
            bodyWindowStart.store(now, ordering: .relaxed)
        }

        /// Body bytes arrived.
        func bodyReceived(_ count: Int) {
            bodyWindowBytes.add(count, ordering: .relaxed)
        }

        /// No body is arriving that the client is responsible for (ended, or paused by the server).
        func bodyStopped() {
            bodyWindowStart.store(0, ordering: .relaxed)
        }
    }

    private let lock = Lock()
    private var open: [ObjectIdentifier: Entry] = [:]

    /// Nanoseconds on the coarse monotonic clock (never 0 on a running system).
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    func opened(_ entry: Entry) {
        lock.withLock { open[ObjectIdentifier(entry)] = entry }
    }

    func closed(_ entry: Entry) {
        lock.withLock { _ = open.removeValue(forKey: ObjectIdentifier(entry)) }
    }

    /// The head of the connection's next request starts arriving now.
    func headStarted(_ entry: Entry) {
        entry.since.store(Self.now(), ordering: .relaxed)
    }

    /// The head arrived in full.
    func headArrived(_ entry: Entry) {
        entry.since.store(0, ordering: .relaxed)
    }

    /// Shuts down the sockets of connections whose request body arrives slower than
    /// `bytesPerSecond` over a whole `window` (a trickled body: the connection timeout only
    /// counts silence); returns how many. A window with enough bytes starts the next one.
    @discardableResult
    func expireSlowBodies(bytesPerSecond: Int, window: Duration, now: Int64 = HeadDeadlines.now()) -> Int {
        let length = EventLoop.nanoseconds(window)
        let needed = Int(Double(bytesPerSecond) * Double(length) / 1e9)
        return lock.withLock {
            var expired = 0
            for entry in open.values {
                let start = entry.bodyWindowStart.load(ordering: .relaxed)
                guard start != 0, now - start >= length else { continue }
                if entry.bodyWindowBytes.load(ordering: .relaxed) >= needed {
                    entry.bodyStarted(now: now)
                    continue
                }
                guard entry.bodyWindowStart.compareExchange(expected: start, desired: 0, ordering: .relaxed).exchanged else { continue }
                shutdown(entry.socket, shutBoth)
                expired += 1
            }
            return expired
        }
    }

    /// Shuts down the sockets of connections whose head started `timeout` or more before `now`;
    /// returns how many. A head that arrives while this runs is not cut off.
    @discardableResult
    func expire(timeout: Duration, now: Int64 = HeadDeadlines.now()) -> Int {
        let limit = EventLoop.nanoseconds(timeout)
        return lock.withLock {
            var expired = 0
            for entry in open.values {
                let since = entry.since.load(ordering: .relaxed)
                guard since != 0, now - since >= limit else { continue }
                guard entry.since.compareExchange(expected: since, desired: 0, ordering: .relaxed).exchanged else {
                    continue
                }
                shutdown(entry.socket, shutBoth)
                expired += 1
            }
            return expired
        }
    }
}

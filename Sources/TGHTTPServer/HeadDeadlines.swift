#if canImport(Glibc)
import Glibc
#endif

/// The open connections and, for each, since when its next request head (request line and
/// headers) has been arriving: since the connection opened, or since its previous request ended.
///
/// libmicrohttpd's connection timeout is an idle timeout, so a client that trickles a head a byte
/// at a time (slowloris) would hold its connection forever; ``expire(now:timeout:)`` shuts down
/// the socket of every connection whose head has taken longer than the timeout, and
/// libmicrohttpd then closes the connection as it would after any socket error.
final class HeadDeadlines: @unchecked Sendable {
    // Invariants:
    // - `open` and every entry's `since` are only accessed with `lock` held.
    // - An entry is in `open` from the connection's STARTED notification to its CLOSED one, and
    //   libmicrohttpd notifies CLOSED before it closes the socket, which it cannot do while
    //   `expire` holds `lock`: `expire` never shuts down a descriptor that was closed and reused.
    final class Entry: @unchecked Sendable {
        let socket: Int32
        var since: ContinuousClock.Instant?

        init(socket: Int32, since: ContinuousClock.Instant) {
            self.socket = socket
            self.since = since
        }
    }

    private let lock = Lock()
    private var open: [ObjectIdentifier: Entry] = [:]

    func opened(_ entry: Entry) {
        lock.withLock { open[ObjectIdentifier(entry)] = entry }
    }

    func closed(_ entry: Entry) {
        lock.withLock { _ = open.removeValue(forKey: ObjectIdentifier(entry)) }
    }

    /// The head of the connection's next request starts arriving now.
    func headStarted(_ entry: Entry, at now: ContinuousClock.Instant) {
        lock.withLock { entry.since = now }
    }

    /// The head arrived in full.
    func headArrived(_ entry: Entry) {
        lock.withLock { entry.since = nil }
    }

    /// Shuts down the sockets of connections whose head started `timeout` or more before `now`;
    /// returns how many.
    @discardableResult
    func expire(now: ContinuousClock.Instant, timeout: Duration) -> Int {
        lock.withLock {
            var expired = 0
            for entry in open.values {
                guard let since = entry.since, now - since >= timeout else { continue }
                entry.since = nil
                shutdown(entry.socket, Int32(SHUT_RDWR))
                expired += 1
            }
            return expired
        }
    }
}

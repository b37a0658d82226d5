import Synchronization

/// Open connections per client address, for ``HTTPServer/Configuration/perIPConnectionLimit``,
/// counted across all loops (libmicrohttpd's own per-IP limit would count per daemon, so N loops
/// would allow N times the limit).
final class ConnectionsPerIP: Sendable {
    let limit: Int
    private let counts = Mutex<[PeerAddress: Int]>([:])

    init(limit: Int) {
        self.limit = limit
    }

    /// Counts a connection from `peer`; false when it is over the limit (the caller closes it,
    /// and still reports it ``closed(_:)``).
    func opened(_ peer: PeerAddress) -> Bool {
        counts.withLock { counts in
            let now = counts[peer, default: 0] + 1
            counts[peer] = now
            return now <= limit
        }
    }

    func closed(_ peer: PeerAddress) {
        counts.withLock { counts in
            let left = counts[peer, default: 1] - 1
            counts[peer] = left > 0 ? left : nil
        }
    }
}

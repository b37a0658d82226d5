import Synchronization
import TGBase

/// Open connections per client, for ``HTTPServer/Configuration/perIPConnectionLimit``, counted
/// across all loops (libmicrohttpd's own per-IP limit would count per daemon, so N loops would
/// allow N times the limit). A client is its ``ClientKey``: an IPv4 address, or an IPv6 address's
/// first `ipv6PrefixLength` bits (one subscriber's /64 is one client).
final class ConnectionsPerIP: Sendable {
    let limit: Int
    let ipv6PrefixLength: Int
    private let counts = Mutex<[ClientKey: Int]>([:])

    init(limit: Int, ipv6PrefixLength: Int = ClientKey.defaultIPv6PrefixLength) {
        self.limit = limit
        self.ipv6PrefixLength = ipv6PrefixLength
    }

    /// Counts a connection from `peer`; false when it is over the limit (the caller closes it,
    /// and still reports it ``closed(_:)``).
    func opened(_ peer: PeerAddress) -> Bool {
        let key = peer.clientKey(ipv6PrefixLength: ipv6PrefixLength)
        return counts.withLock { counts in
            let now = counts[key, default: 0] + 1
            counts[key] = now
            return now <= limit
        }
    }

    func closed(_ peer: PeerAddress) {
        let key = peer.clientKey(ipv6PrefixLength: ipv6PrefixLength)
        counts.withLock { counts in
            let left = counts[key, default: 1] - 1
            counts[key] = left > 0 ? left : nil
        }
    }
}

import Testing

@testable import TGHTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// The slowloris guard's bookkeeping, with time injected: which connections it cuts off and when.
@Suite struct HeadDeadlinesTests {
    private static let second: Int64 = 1_000_000_000

    /// A registry with one open connection whose head started at `since`: `body` gets the
    /// registry, the connection's entry, and a probe telling whether its socket was shut down.
    private func withConnection(
        since: Int64 = 100 * second,
        _ body: (HeadDeadlines, HeadDeadlines.Entry, () -> Bool) throws -> Void
    ) rethrows {
        var fds: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let heads = HeadDeadlines()
        let entry = HeadDeadlines.Entry(socket: fds[0], since: since)
        heads.opened(entry)
        // The peer reads end of file at once when the socket was shut down.
        let peer = fds[1]
        _ = fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) | O_NONBLOCK)
        let wasShutDown = {
            var byte: UInt8 = 0
            return read(peer, &byte, 1) == 0
        }
        try body(heads, entry, wasShutDown)
    }

    @Test func shutsDownAHeadThatTookTheWholeTimeoutAndNotOneAMomentYounger() {
        withConnection { heads, _, wasShutDown in
            #expect(heads.expire(timeout: .seconds(30), now: 129 * Self.second) == 0)
            #expect(!wasShutDown())
            #expect(heads.expire(timeout: .seconds(30), now: 130 * Self.second) == 1)
            #expect(wasShutDown())
            // Cut off once: the entry no longer counts as waiting for a head.
            #expect(heads.expire(timeout: .seconds(30), now: 200 * Self.second) == 0)
        }
    }

    @Test func leavesAConnectionAloneOnceItsHeadArrived() {
        withConnection { heads, entry, wasShutDown in
            heads.headArrived(entry)
            #expect(heads.expire(timeout: .seconds(30), now: 1_000 * Self.second) == 0)
            #expect(!wasShutDown())
        }
    }

    @Test func forgetsAClosedConnection() {
        withConnection { heads, entry, wasShutDown in
            heads.closed(entry)
            #expect(heads.expire(timeout: .seconds(30), now: 1_000 * Self.second) == 0)
            #expect(!wasShutDown())
        }
    }

    @Test func timesTheNextHeadFromWhenThePreviousRequestEnded() {
        withConnection(since: 1) { heads, entry, wasShutDown in
            heads.headArrived(entry)
            heads.headStarted(entry)
            let started = HeadDeadlines.now()
            #expect(heads.expire(timeout: .seconds(30), now: started + 29 * Self.second) == 0)
            #expect(heads.expire(timeout: .seconds(30), now: started + 31 * Self.second) == 1)
            #expect(wasShutDown())
        }
    }
}

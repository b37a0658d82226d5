import Testing

@testable import TGHTTPServer

#if canImport(Glibc)
import Glibc
#endif

/// The slowloris guard's bookkeeping, with time injected: which connections it cuts off and when.
@Suite struct HeadDeadlinesTests {
    private static let second: Int64 = 1_000_000_000

    /// A connected socket pair; the test owns both ends.
    private func socketPair() -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        return (fds[0], fds[1])
    }

    /// True when the peer of `fd` was shut down (a read returns end of file at once).
    private func peerWasShutDown(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        return read(fd, &byte, 1) == 0
    }

    @Test func shutsDownAHeadThatTookTheWholeTimeoutAndNotOneAMomentYounger() {
        let (server, client) = socketPair()
        defer {
            close(server)
            close(client)
        }
        let heads = HeadDeadlines()
        let entry = HeadDeadlines.Entry(socket: server, since: 100 * Self.second)
        heads.opened(entry)
        #expect(heads.expire(timeout: .seconds(30), now: 129 * Self.second) == 0)
        #expect(!peerWasShutDown(client))
        #expect(heads.expire(timeout: .seconds(30), now: 130 * Self.second) == 1)
        #expect(peerWasShutDown(client))
        // Cut off once: the entry no longer counts as waiting for a head.
        #expect(heads.expire(timeout: .seconds(30), now: 200 * Self.second) == 0)
    }

    @Test func leavesAConnectionAloneOnceItsHeadArrived() {
        let (server, client) = socketPair()
        defer {
            close(server)
            close(client)
        }
        let heads = HeadDeadlines()
        let entry = HeadDeadlines.Entry(socket: server, since: 100 * Self.second)
        heads.opened(entry)
        heads.headArrived(entry)
        #expect(heads.expire(timeout: .seconds(30), now: 1_000 * Self.second) == 0)
        #expect(!peerWasShutDown(client))
    }

    @Test func forgetsAClosedConnection() {
        let (server, client) = socketPair()
        defer {
            close(server)
            close(client)
        }
        let heads = HeadDeadlines()
        let entry = HeadDeadlines.Entry(socket: server, since: 100 * Self.second)
        heads.opened(entry)
        heads.closed(entry)
        #expect(heads.expire(timeout: .seconds(30), now: 1_000 * Self.second) == 0)
        #expect(!peerWasShutDown(client))
    }

    @Test func timesTheNextHeadFromWhenThePreviousRequestEnded() {
        let (server, client) = socketPair()
        defer {
            close(server)
            close(client)
        }
        let heads = HeadDeadlines()
        let entry = HeadDeadlines.Entry(socket: server, since: 1)
        heads.opened(entry)
        heads.headArrived(entry)
        heads.headStarted(entry)
        let started = HeadDeadlines.now()
        #expect(heads.expire(timeout: .seconds(30), now: started + 29 * Self.second) == 0)
        #expect(heads.expire(timeout: .seconds(30), now: started + 31 * Self.second) == 1)
        #expect(peerWasShutDown(client))
    }
}

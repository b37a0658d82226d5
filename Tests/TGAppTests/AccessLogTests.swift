import Foundation
import HTTPTypes
import Logging
import Synchronization
import TGHTTPServer
import TGTesting
import Testing

@testable import TGApp

/// A sink that keeps what it was given as one stream of bytes (as a file would) and counts the
/// writes.
final class RawLogSink: LogSink, @unchecked Sendable {
    // Invariant: `bytes` and `writes` are only accessed with `lock` held.
    private let lock = NSLock()
    private var bytes: [UInt8] = []
    private var writes = 0

    func write(line: String) {
        lock.withLock {
            bytes += Array(line.utf8) + [10]
            writes += 1
        }
    }

    func write(lines: UnsafeRawBufferPointer) {
        lock.withLock {
            bytes += Array(lines)
            writes += 1
        }
    }

    var text: String { lock.withLock { String(decoding: bytes, as: UTF8.self) } }
    var writeCount: Int { lock.withLock { writes } }
    /// Complete lines only (what follows the last newline would be a partial line).
    var lines: [String] {
        let text = self.text
        #expect(text.isEmpty || text.hasSuffix("\n"), "a write ended inside a line")
        return text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }
}

/// A clock the test moves by hand.
final class HandMovedClock: Sendable {
    let nanoseconds = Mutex<Int64>(0)
    func set(_ value: Int64) { nanoseconds.withLock { $0 = value } }
    var read: @Sendable () -> Int64 { { self.nanoseconds.withLock { $0 } } }
}

@Suite struct AccessLogTests {
    private func record(_ log: AccessLog, _ id: String) {
        log.record(requestID: id, method: "GET", route: "/api/{upstream}/**", status: 200, nanoseconds: 1_234_567, remote: "127.0.0.1")
    }

    @Test(arguments: [0, 1, 499, 500, 999_999, 1_234_600, 12_000_000, 100_250_000, 3_600_000_000_000] as [Int64])
    func aLineIsWhatTheLogHandlerPrintsForTheSameRequest(nanoseconds: Int64) throws {
        let route = "/a \"b\"\\\n\u{01}\u{1F}é/{id}"
        let handlerSink = CapturingLogSink()
        capturingLogger(handlerSink).info(
            "request",
            metadata: [
                "request_id": "r-1", "method": "GET", "route": .string(route), "status": .stringConvertible(201),
                "duration_ms": .stringConvertible((Double(nanoseconds) / 1e6 * 1000).rounded() / 1000), "remote": "::1",
            ]
        )
        let sink = RawLogSink()
        let log = AccessLog(label: "tokengate.test", sink: sink, settings: AccessLog.Settings(bufferSize: 0))
        log.record(requestID: "r-1", method: "GET", route: route, status: 201, nanoseconds: nanoseconds, remote: "::1")
        let expected = try #require(handlerSink.lines.first)
        let line = try #require(sink.lines.first)
        // The same text after the time, which both print as 2026-11-28T14:49:02.123Z.
        let afterTime = { (text: String) in String(text[text.range(of: #"Z","level""#)!.lowerBound...]) }
        #expect(afterTime(line) == afterTime(expected))
        #expect(line.utf8.count == expected.utf8.count)
        let time = try #require(decodeJSON(line)["time"] as? String)
        #expect(time.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil)
        #expect(decodeJSON(line)["route"] as? String == route)
    }

    @Test func linesStayWholeAndInOrderWhenManyThreadsWriteAtOnce() throws {
        let sink = RawLogSink()
        // Small buffers: many writes, each of whole lines, from threads that race each other.
        let log = AccessLog(label: "tokengate", sink: sink, settings: AccessLog.Settings(bufferSize: 700))
        let threads = 8
        let perThread = 2_000
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for number in 0..<perThread { record(log, "t\(thread)-\(number)") }
        }
        log.flush()
        let lines = sink.lines
        #expect(lines.count == threads * perThread)
        #expect(sink.writeCount > threads * perThread / 10)
        var next = [Int](repeating: 0, count: threads)
        for line in lines {
            let object = decodeJSON(line)
            let id = try #require(object["request_id"] as? String)
            let parts = id.dropFirst().split(separator: "-").compactMap { Int($0) }
            try #require(parts.count == 2)
            // Each thread's lines come in the order it recorded them.
            #expect(parts[1] == next[parts[0]])
            next[parts[0]] = parts[1] + 1
            #expect(object["status"] as? Int == 200)
        }
        #expect(next == [Int](repeating: perThread, count: threads))
    }

    @Test func aBufferIsWrittenOnceItsOldestLineIsTheIntervalOld() {
        let sink = RawLogSink()
        let clock = HandMovedClock()
        let log = AccessLog(
            label: "tokengate",
            sink: sink,
            settings: AccessLog.Settings(bufferSize: 32 * 1024, flushInterval: .seconds(1)),
            now: clock.read
        )
        clock.set(5_000_000_000)
        record(log, "first")
        clock.set(5_500_000_000)
        record(log, "second")
        log.flushDue(now: 5_999_999_999)
        #expect(sink.writeCount == 0)
        log.flushDue(now: 6_000_000_000)
        // Both lines in one write: the buffer goes whole.
        #expect(sink.writeCount == 1)
        #expect(sink.lines.count == 2)
        clock.set(6_200_000_000)
        record(log, "third")
        log.flushDue(now: 7_100_000_000)
        #expect(sink.lines.count == 2)
        log.flushDue(now: 7_200_000_000)
        #expect(sink.lines.count == 3)
        #expect(sink.writeCount == 2)
    }

    @Test func aFullBufferIsWrittenAtOnce() throws {
        let sink = RawLogSink()
        let log = AccessLog(label: "tokengate", sink: sink, settings: AccessLog.Settings(bufferSize: 1_000, flushInterval: .seconds(60)))
        var recorded = 0
        while sink.writeCount == 0 {
            record(log, "n\(recorded)")
            recorded += 1
            try #require(recorded < 100)
        }
        #expect(sink.text.utf8.count >= 1_000)
        #expect(sink.lines.count == recorded)
    }

    @Test func theFlusherThreadWritesLinesPastTheirInterval() async throws {
        let sink = RawLogSink()
        let log = AccessLog(label: "tokengate", sink: sink, settings: AccessLog.Settings(flushInterval: .milliseconds(40)))
        log.start()
        record(log, "one")
        var waited = 0
        while sink.lines.isEmpty, waited < 200 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(sink.lines.count == 1)
        log.stop()
    }

    @Test func stopWritesEveryThreadsLines() {
        let sink = RawLogSink()
        let log = AccessLog(label: "tokengate", sink: sink, settings: AccessLog.Settings(bufferSize: 1 << 20, flushInterval: .seconds(60)))
        log.start()
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for number in 0..<50 { record(log, "s\(thread)-\(number)") }
        }
        #expect(sink.writeCount == 0)
        log.stop()
        #expect(sink.lines.count == 200)
    }

    @Test func aServedRequestsLineIsBufferedUntilTheLogIsStopped() async throws {
        let sink = RawLogSink()
        let logger = Logger(label: "tokengate") { label in JSONLogHandler(label: label, sink: sink) }
        let lines = AccessLog(label: "tokengate", sink: sink, settings: AccessLog.Settings(bufferSize: 1 << 20, flushInterval: .seconds(60)))
        var router = Router()
        router.add(.get, "/items/{id}", .sync { _, _ in ServerResponse(status: .ok, contentType: "text/plain", body: "") })
        let server = try serve(Application(router: router, logger: logger, accessLines: lines))
        for number in 0..<20 { _ = try await curl(["-o", "/dev/null", server.baseURL + "/items/\(number)"]) }
        #expect(sink.lines.isEmpty)
        await server.shutdown()
        lines.stop()
        let written = sink.lines.filter { $0.contains(#""message":"request""#) }
        #expect(written.count == 20)
        #expect(written.allSatisfy { decodeJSON($0)["route"] as? String == "/items/{id}" })
    }
}

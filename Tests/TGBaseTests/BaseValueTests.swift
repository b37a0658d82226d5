import Foundation
import Synchronization
import TGBase
import Testing

@Suite struct LoopbackTests {
    @Test func onlyNamesAndAddressesOfThisMachineAreLoopback() {
        for host in ["localhost", "LocalHost", "127.0.0.1", "127.200.1.9", "::1", "[::1]"] {
            #expect(Loopback.isLoopback(host: host), "\(host)")
        }
        for host in ["", "128.0.0.1", "10.0.0.1", "localhost.example.com", "::2", "[127.0.0.1", "127.0.0.1.nip.io"] {
            #expect(!Loopback.isLoopback(host: host), "\(host)")
        }
    }
}

@Suite struct DurationConversionTests {
    @Test func convertsToSecondsAndWholeUnits() {
        #expect(Duration.milliseconds(1500).timeInterval == 1.5)
        #expect(Duration.milliseconds(1500).wholeMilliseconds == 1500)
        #expect(Duration.microseconds(2999).wholeMilliseconds == 2)
        #expect(Duration.milliseconds(2999).wholeSeconds == 2)
    }
}

@Suite struct SingleFlightTests {
    @Test func callersOfAKeyInFlightShareOneRunAndTheKeyIsFreeAfterwards() async throws {
        let flights = SingleFlight<String, Int>()
        let runs = Atomic<Int>(0)
        let joins = Atomic<Int>(0)
        let (gate, open) = AsyncStream<Void>.makeStream()
        let work: @Sendable () async throws -> Int = {
            runs.add(1, ordering: .relaxed)
            for await _ in gate { break }
            return 7
        }
        async let first = flights.run("k", work: work)
        while !flights.isRunning("k") { await Task.yield() }
        async let second = flights.run("k", joined: { joins.add(1, ordering: .relaxed) }, work: work)
        while joins.load(ordering: .relaxed) == 0 { await Task.yield() }
        open.yield()
        #expect(try await [first, second] == [7, 7])
        #expect(runs.load(ordering: .relaxed) == 1)
        while flights.isRunning("k") { await Task.yield() }
        #expect(try await flights.run("k") { 8 } == 8)
    }

    @Test func aCallerThatGivesUpDoesNotCancelTheWorkOthersWaitFor() async throws {
        let flights = SingleFlight<Int, String>()
        let (gate, open) = AsyncStream<Void>.makeStream()
        let waiting = Task {
            try await flights.run(1) {
                for await _ in gate { break }
                // The flight is no caller's child: a caller's cancellation does not reach it.
                try Task.checkCancellation()
                return "done"
            }
        }
        while !flights.isRunning(1) { await Task.yield() }
        waiting.cancel()
        let joined = Task { try await flights.run(1) { "second" } }
        open.yield()
        #expect(try await joined.value == "done")
    }
}

@Suite struct JSONValueTests {
    @Test func wholeNumbersAreWrittenWithoutAFractionAndOthersKeepIt() throws {
        let value = try #require(JSONValue(parsing: Array(#"{"a":1,"b":1.5,"c":[true,null,"x"],"d":1e300}"#.utf8)))
        #expect(SortedJSON.data(value).map { String(decoding: $0, as: UTF8.self) } == #"{"a":1,"b":1.5,"c":[true,null,"x"],"d":1e+300}"#)
    }

    @Test func swiftValuesKeepTheirKind() {
        #expect(JSONValue(foundation: true) == .bool(true))
        #expect(JSONValue(foundation: 3) == .number(3))
        #expect(JSONValue(foundation: Date()) == nil)
    }
}

@Suite struct ChunkQueueTests {
    @Test func readsAcrossChunksInOrderAndTakesTheRestAtOnce() {
        var queue = ChunkQueue()
        queue.append([1, 2, 3])
        queue.append([])
        queue.append([4, 5])
        #expect(queue.count == 5)
        var buffer = [UInt8](repeating: 0, count: 4)
        let copied = buffer.withUnsafeMutableBytes { queue.read(into: $0) }
        #expect(copied == 4 && buffer == [1, 2, 3, 4] && queue.count == 1)
        queue.append([6])
        #expect(queue.takeAll() == [5, 6] && queue.isEmpty)
        let single: [UInt8] = [9, 9]
        queue.append(single)
        #expect(queue.takeAll() == single)
        let none = buffer.withUnsafeMutableBytes { queue.read(into: $0) }
        #expect(none == 0)
    }

    /// Chunks of every size appended between reads of every size, past the batch in which spent
    /// chunks are dropped: the bytes read and then taken are the bytes appended, in order.
    @Test func bytesComeOutAsTheyWentInWhateverTheChunksAndReadsSizes() {
        var queue = ChunkQueue()
        var appended: [UInt8] = []
        var out: [UInt8] = []
        var state: UInt32 = 7
        func next(_ bound: Int) -> Int {
            state = state &* 1_103_515_245 &+ 12345
            return Int(state >> 16) % bound
        }
        for round in 0..<400 {
            for _ in 0..<next(4) {
                let chunk = (0..<next(9)).map { _ in UInt8(truncatingIfNeeded: appended.count + Int(state)) }
                appended.append(contentsOf: chunk)
                queue.append(chunk)
            }
            var buffer = [UInt8](repeating: 0, count: next(10))
            let copied = buffer.withUnsafeMutableBytes { queue.read(into: $0) }
            out.append(contentsOf: buffer[..<copied])
            #expect(queue.count == appended.count - out.count, "round \(round)")
        }
        out.append(contentsOf: queue.takeAll())
        #expect(out == appended && queue.isEmpty)
    }
}

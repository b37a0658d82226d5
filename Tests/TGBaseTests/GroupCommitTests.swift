import Synchronization
import TGBase
import Testing

/// Requests that arrive while a statement runs go together in the next one.
@Suite struct GroupCommitTests {
    @Test func requestsArrivingDuringAStatementShareTheNextOneAndGetTheirOwnAnswers() async {
        let batches = Mutex<[[Int]]>([])
        let commit = GroupCommit<Int, Int>(maxBatch: 100) { inputs in
            batches.withLock { $0.append(inputs) }
            // Long enough for the others to queue behind the first statement.
            try? await Task.sleep(for: .milliseconds(50))
            return .success(inputs.map { $0 * 10 })
        }
        let answers = await withTaskGroup(of: (Int, Int?).self) { group in
            for value in 1...20 {
                group.addTask { (value, try? await commit.submit(value).get()) }
            }
            return await group.reduce(into: [Int: Int?]()) { $0[$1.0] = $1.1 }
        }
        #expect(answers.count == 20 && answers.allSatisfy { $0.value == $0.key * 10 })
        let sizes = batches.withLock { $0.map(\.count) }
        #expect(sizes.reduce(0, +) == 20)
        #expect(sizes.count < 20, "\(sizes)")
    }

    @Test func aFailedStatementFailsEachOfItsRequestsAndTheNextStatementStillRuns() async throws {
        struct Refused: Error {}
        let calls = Atomic<Int>(0)
        let commit = GroupCommit<Int, Int>(maxBatch: 4) { inputs in
            calls.add(1, ordering: .relaxed).oldValue == 0 ? .failure(Refused()) : .success(inputs)
        }
        await #expect(throws: Refused.self) { try await commit.submit(1).get() }
        #expect(try await commit.submit(2).get() == 2)
        // An answer for another number of inputs fails them rather than pairing them wrongly.
        let short = GroupCommit<Int, Int>(maxBatch: 4) { _ in .success([]) }
        await #expect(throws: GroupCommitError.outputCountMismatch) { try await short.submit(1).get() }
    }
}

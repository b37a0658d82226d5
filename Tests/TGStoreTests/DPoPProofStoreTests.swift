import Foundation
import TGStore
import TGTesting
import Testing

/// The shared record of DPoP proofs, against a real PostgreSQL with TokenGate's schema.
@Suite struct DPoPProofStoreTests {
    func key(_ byte: UInt8) -> [UInt8] { Array(repeating: byte, count: 16) }

    @Test func aBatchRecordsEachNewProofOnceAndTellsWhichWereSeen() async throws {
        try await StoreFixture.run { f in
            let proofs = f.store.dpopProofs
            let until = f.now.addingTimeInterval(60)
            #expect(try await proofs.record(key(1), until: until))
            // One seen before, two new, and one of them twice in the batch: the first has it.
            let answers = try await proofs.record([(key(1), until), (key(2), until), (key(3), until), (key(2), until)])
            #expect(answers == [false, true, true, false])
            #expect(try await !proofs.record(key(3), until: until))
            #expect(try await proofs.record([]) == [])
            #expect(try await proofs.deleteExpired(now: f.now.addingTimeInterval(59), limit: 10) == 0)
            #expect(try await proofs.deleteExpired(now: until, limit: 10) == 3)
            #expect(try await f.count("dpop_proofs") == 0)
        }
    }
}

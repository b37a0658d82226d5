import Foundation
import Logging
import TGAuth
import TGCrypto
import TGPostgres
import TGStore
import TGTesting
import Testing

/// A DPoP proof is accepted once by the whole fleet (RFC 9449 §11.1): the shared record in
/// PostgreSQL, against a real database.
@Suite struct DPoPReplayTests {
    static let url = "https://gw.example/api/graph/me"

    /// Another instance: its own verifier and memory, the same database, keys and clock.
    func secondInstance(_ f: DomainFixture) -> AuthServices { f.anotherInstance() }

    func verified(_ auth: AuthServices, _ proof: String) throws -> DPoPProof {
        try auth.dpop.verifier.verify(proof, for: DPoPTarget(method: "GET", uri: Self.url, accessToken: "access-token"))
    }

    @Test func aProofAcceptedByOneInstanceIsRefusedByAnother() async throws {
        try await DomainFixture.run { f in
            let key = try DPoPKey()
            let second = secondInstance(f)
            let proof = try key.proof("GET", Self.url, accessToken: "access-token", issuedAt: f.clock.now)
            try await f.auth.dpop.recordProof(try verified(f.auth, proof))
            // The other instance verifies it (its signature and claims are good) and refuses it as used.
            let elsewhere = try verified(second, proof)
            await #expect(throws: DPoPError.self) { try await second.dpop.recordProof(elsewhere) }
            // And so does the first, from its memory.
            await #expect(throws: DPoPError.self) { try await f.auth.dpop.recordProof(try verified(f.auth, proof)) }
            // A new proof of the same key is good on either.
            let fresh = try key.proof("GET", Self.url, accessToken: "access-token", issuedAt: f.clock.now)
            try await second.dpop.recordProof(try verified(second, fresh))
        }
    }

    @Test func twoInstancesRecordingOneProofAtOnceAcceptItOnce() async throws {
        try await DomainFixture.run { f in
            let key = try DPoPKey()
            let instances = [f.auth, secondInstance(f), secondInstance(f), secondInstance(f)]
            let proof = try key.proof("GET", Self.url, accessToken: "access-token", issuedAt: f.clock.now)
            let verifiedProofs = try instances.map { try verified($0, proof) }
            let accepted = await withTaskGroup(of: Bool.self) { group in
                for (auth, verified) in zip(instances, verifiedProofs) {
                    group.addTask { (try? await auth.dpop.recordProof(verified)) != nil }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(accepted == 1)
        }
    }

    @Test func theSweeperForgetsProofsOnceTheyAreTooOldToBeAccepted() async throws {
        try await DomainFixture.run { f in
            let key = try DPoPKey()
            for _ in 0..<3 {
                let proof = try key.proof("GET", Self.url, accessToken: "access-token", issuedAt: f.clock.now)
                try await f.auth.dpop.recordProof(try verified(f.auth, proof))
            }
            #expect(try await f.auth.sweeper.sweep()?.dpopProofs == 0)
            f.clock.advance(by: f.settings.dpop.proofMaxAge + 1)
            #expect(try await f.auth.sweeper.sweep()?.dpopProofs == 3)
        }
    }
}

/// While the database cannot be reached, this instance's memory alone decides.
@Suite struct DPoPReplayOutageTests {
    static let url = DPoPReplayTests.url

    @Test func whileTheDatabaseIsUnreachableMemoryDecidesAndRefusesWhatItCouldNotRemember() async throws {
        var database = PostgresClient.Configuration(url: "postgresql://tokengate@127.0.0.1:\(try freeLoopbackPort())/gone?connect_timeout=1")
        database.acquireTimeout = .seconds(1)
        let client = PostgresClient(configuration: database)
        defer { client.shutdown() }
        let keys = try KeyRing(currentKeyID: "k1", keys: ["k1": try SymmetricKey(bytes: Array(repeating: 7, count: 32))])
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        var settings = AuthSettings()
        // A key may hold a quarter of the memory: one proof here.
        settings.dpop.replayCapacity = 4
        let auth = AuthServices(
            store: Store(database: client),
            vault: TokenVault(keyRing: keys),
            providers: [],
            clients: [],
            settings: settings,
            issuer: "https://gw.example",
            clock: clock.wallClock,
            logger: .init(label: "tokengate.test")
        )
        let key = try DPoPKey()
        func verified(_ proof: String) throws -> DPoPProof {
            try auth.dpop.verifier.verify(proof, for: DPoPTarget(method: "GET", uri: Self.url, accessToken: "access-token"))
        }
        let proof = try key.proof("GET", Self.url, accessToken: "access-token", issuedAt: clock.now)
        // Accepted on memory alone (tokengate_dpop_proofs_unshared_total counts it).
        try await auth.dpop.recordProof(try verified(proof))
        // Memory still refuses it a second time.
        await #expect(throws: DPoPError.self) { try await auth.dpop.recordProof(try verified(proof)) }
        // A proof memory could not remember (the key's share is full) is not vouched for: the
        // database's unavailability answers (503 at the edge).
        let another = try key.proof("GET", Self.url, accessToken: "access-token", issuedAt: clock.now)
        await #expect(throws: StoreError.self) { try await auth.dpop.recordProof(try verified(another)) }
    }
}

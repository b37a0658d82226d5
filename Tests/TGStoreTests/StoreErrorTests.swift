import Foundation
import TGPostgres
import TGStore
import TGTesting
import Testing

/// The store's failures reach the layers above as ``StoreError``, whatever the driver threw.
@Suite struct StoreErrorTests {
    @Test func anUnreachableDatabaseIsAnUnavailableStoreError() async throws {
        var configuration = PostgresClient.Configuration(url: "postgresql://tokengate@127.0.0.1:\(try freeLoopbackPort())/gone?connect_timeout=1")
        configuration.acquireTimeout = .seconds(1)
        let database = PostgresClient(configuration: configuration)
        defer { database.shutdown() }
        let store = Store(database: database)
        let statement = await #expect(throws: StoreError.self) { try await store.sessions.find(accessTokenHash: StoreFixture.randomHash()) }
        #expect(statement?.kind == .unavailable && statement?.isTransient == true)
        let transaction = await #expect(throws: StoreError.self) { try await store.transaction { _ in 1 } }
        #expect(transaction?.kind == .unavailable)
        let locked = await #expect(throws: StoreError.self) { try await store.exclusively(lockKey: 7) { 1 } }
        #expect(locked?.kind == .unavailable)
        #expect(Store.isDatabaseFailure(try #require(statement)))
    }

    @Test func aRefusedConstraintIsAConflictAndADomainErrorPassesUnchanged() async throws {
        try await StoreFixture.run { f in
            // A grant of an account that does not exist: the foreign key refuses it.
            let grant = GrantWrite(
                account: UUID(),
                refreshToken: StoreFixture.blob("grant"),
                keyID: "k1",
                scopes: [],
                expiresAt: nil,
                idTokenHint: nil,
                policy: nil
            )
            let refused = await #expect(throws: StoreError.self) { try await f.store.accounts.storeGrant(grant, now: f.now) }
            #expect(refused?.kind == .conflict && refused?.isTransient == false)
            #expect(refused?.description.contains("23503") == true)
            struct DomainRule: Error {}
            await #expect(throws: DomainRule.self) { try await f.store.transaction { _ in throw DomainRule() } }
        }
    }
}

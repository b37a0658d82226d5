import Foundation
import TGPostgres
import TGStore
import TGTesting
import Testing

/// The session store against a real PostgreSQL with TokenGate's schema.
@Suite struct SessionStoreTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// A fresh migrated database with `accounts` active accounts (alice, bob, …) on one device.
    func withAccounts(_ count: Int, _ body: (Store, [UUID], UUID) async throws -> Void) async throws {
        try await TestDatabase.withFreshDatabase { database, _ in
            _ = try await Migrator(migrations: SchemaMigrations.all).migrate(database)
            var accounts: [UUID] = []
            for index in 0..<count {
                let rows = try await database.query(
                    """
                    INSERT INTO accounts (provider, issuer, subject, claims, state, created_at, updated_at, last_used_at)
                    VALUES ('fake', 'https://idp.example', \("user-\(index)"), '{"name":"User"}'::jsonb, 'active', \(now), \(now), \(now))
                    RETURNING id
                    """
                )
                accounts.append(try #require(rows.first).decode(UUID.self, "id"))
            }
            let device = try await Self.device(database, now: now)
            try await body(Store(database: database), accounts, device)
        }
    }

    static func device(_ database: PostgresClient, now: Date) async throws -> UUID {
        let rows = try await database.query(
            """
            INSERT INTO devices (secret_hash, client_id, created_at, last_seen_at)
            VALUES (\(TokenHash((0..<32).map { _ in UInt8.random(in: 0...255) })), 'com.example.app', \(now), \(now)) RETURNING id
            """
        )
        return try #require(rows.first).decode(UUID.self, "id")
    }

    func start(_ store: Store, device: UUID, account: UUID, idleFor idle: TimeInterval = 3600) async throws -> (UUID, TokenHash) {
        let access = TokenHash((0..<32).map { _ in UInt8.random(in: 0...255) })
        let id = try await store.sessions.start(
            SessionStore.Start(
                device: device,
                account: account,
                clientID: "com.example.app",
                accessTokenHash: access,
                accessExpiresAt: now.addingTimeInterval(300),
                refreshTokenHash: TokenHash((0..<32).map { _ in UInt8.random(in: 0...255) }),
                expiresAt: now.addingTimeInterval(idle),
                absoluteExpiresAt: now.addingTimeInterval(86400),
                now: now
            )
        )
        return (id, access)
    }

    @Test func aStartedSessionIsFoundByItsAccessTokenHashWithItsAccount() async throws {
        try await withAccounts(1) { store, accounts, device in
            let (id, access) = try await start(store, device: device, account: accounts[0])
            let found = try #require(try await store.sessions.find(accessTokenHash: access))
            #expect(found.id == id && found.deviceID == device && found.clientID == "com.example.app")
            #expect(found.account.id == accounts[0] && found.account.subject == "user-0" && found.account.state == "active")
            #expect(found.accessExpiresAt == now.addingTimeInterval(300) && found.expiresAt == now.addingTimeInterval(3600))
            #expect(try await store.sessions.find(accessTokenHash: TokenHash(Array(repeating: 0, count: 32))) == nil)
        }
    }

    @Test func startingAgainForTheSameDeviceAndAccountReplacesTheSession() async throws {
        try await withAccounts(1) { store, accounts, device in
            let (first, oldAccess) = try await start(store, device: device, account: accounts[0])
            let (second, newAccess) = try await start(store, device: device, account: accounts[0])
            #expect(first == second)
            #expect(try await store.sessions.find(accessTokenHash: oldAccess) == nil)
            #expect(try await store.sessions.find(accessTokenHash: newAccess)?.id == first)
        }
    }

    @Test func endingSelectsExactlyTheNamedSessionsAndReturnsTheirAccounts() async throws {
        try await withAccounts(2) { store, accounts, device in
            let otherDevice = try await Self.device(store.database, now: now)
            _ = try await start(store, device: device, account: accounts[0])
            _ = try await start(store, device: device, account: accounts[1])
            _ = try await start(store, device: otherDevice, account: accounts[0])
            // One account on one device: the other device keeps its session.
            #expect(try await store.sessions.end(.account(accounts[0], device: device)) == [accounts[0]])
            #expect(try await store.sessions.end(.account(accounts[0], device: device)) == [])
            // Everywhere: the account's sessions on every device, nobody else's.
            #expect(try await store.sessions.end(.everywhere(account: accounts[0])) == [accounts[0]])
            #expect(try await store.sessions.accounts(onDevice: device, now: now).map(\.id) == [accounts[1]])
            // A device: all of its sessions.
            #expect(try await store.sessions.end(.device(device)) == [accounts[1]])
            #expect(try await store.sessions.accounts(onDevice: device, now: now).isEmpty)
        }
    }

    @Test func endStaleEndsExpiredSessionsAndThoseOfStaleAccountsOnlyOnThatDevice() async throws {
        try await withAccounts(3) { store, accounts, device in
            _ = try await start(store, device: device, account: accounts[0], idleFor: -1)
            _ = try await start(store, device: device, account: accounts[1])
            let (kept, _) = try await start(store, device: device, account: accounts[2])
            try await store.database.query("UPDATE accounts SET state = 'stale' WHERE id = \(accounts[1])")
            let ended = try await store.sessions.endStale(onDevice: device, now: now)
            #expect(Set(ended) == [accounts[0], accounts[1]])
            #expect(try await store.sessions.accounts(onDevice: device, now: now).map(\.id) == [accounts[2]])
            #expect(try await store.sessions.end(.session(kept)) == [accounts[2]])
        }
    }

    @Test func aTransactionThatThrowsLeavesNoSessionBehind() async throws {
        struct Abandon: Error {}
        try await withAccounts(1) { store, accounts, device in
            await #expect(throws: Abandon.self) {
                try await store.transaction { transaction in
                    _ = try await transaction.sessions.start(
                        SessionStore.Start(
                            device: device,
                            account: accounts[0],
                            clientID: "com.example.app",
                            accessTokenHash: TokenHash(Array(repeating: 7, count: 32)),
                            accessExpiresAt: now.addingTimeInterval(300),
                            refreshTokenHash: TokenHash(Array(repeating: 8, count: 32)),
                            expiresAt: now.addingTimeInterval(3600),
                            absoluteExpiresAt: now.addingTimeInterval(86400),
                            now: now
                        )
                    )
                    throw Abandon()
                }
            }
            let left = try await store.sessions.find(accessTokenHash: TokenHash(Array(repeating: 7, count: 32)))
            #expect(left == nil)
        }
    }
}

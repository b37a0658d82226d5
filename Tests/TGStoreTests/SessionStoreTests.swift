import Foundation
import TGStore
import Testing

/// The session store against a real PostgreSQL with TokenGate's schema.
@Suite struct SessionStoreTests {
    @Test func aStartedSessionIsFoundByItsAccessTokenHashWithItsAccount() async throws {
        try await StoreFixture.run { f in
            let account = try await f.account("alice")
            let device = try await f.device()
            let (id, access) = try await f.session(device: device, account: account)
            let found = try #require(try await f.store.sessions.find(accessTokenHash: access))
            #expect(found.id == id && found.deviceID == device && found.clientID == "com.example.app")
            #expect(found.account.id == account && found.account.subject == "alice" && found.account.state == "active")
            #expect(found.accessExpiresAt == f.now.addingTimeInterval(300) && found.expiresAt == f.now.addingTimeInterval(3600))
            #expect(try await f.store.sessions.find(accessTokenHash: StoreFixture.randomHash()) == nil)
        }
    }

    @Test func startingAgainForTheSameDeviceAndAccountReplacesTheSession() async throws {
        try await StoreFixture.run { f in
            let account = try await f.account("alice")
            let device = try await f.device()
            let (first, oldAccess) = try await f.session(device: device, account: account)
            let (second, newAccess) = try await f.session(device: device, account: account)
            #expect(first == second)
            #expect(try await f.store.sessions.find(accessTokenHash: oldAccess) == nil)
            #expect(try await f.store.sessions.find(accessTokenHash: newAccess)?.id == first)
        }
    }

    @Test func endingSelectsExactlyTheNamedSessionsAndReturnsTheirAccounts() async throws {
        try await StoreFixture.run { f in
            let alice = try await f.account("alice")
            let bob = try await f.account("bob")
            let device = try await f.device()
            let otherDevice = try await f.device()
            try await f.session(device: device, account: alice)
            try await f.session(device: device, account: bob)
            try await f.session(device: otherDevice, account: alice)
            let sessions = f.store.sessions
            // One account on one device: the other device keeps its session.
            #expect(try await sessions.end(.account(alice, device: device)) == [alice])
            #expect(try await sessions.end(.account(alice, device: device)) == [])
            // Everywhere: the account's sessions on every device, nobody else's.
            #expect(try await sessions.end(.everywhere(account: alice)) == [alice])
            #expect(try await sessions.accounts(onDevice: device, now: f.now).map(\.id) == [bob])
            // A device: all of its sessions.
            #expect(try await sessions.end(.device(device)) == [bob])
            #expect(try await sessions.accounts(onDevice: device, now: f.now).isEmpty)
        }
    }

    @Test func endStaleEndsExpiredSessionsAndThoseOfStaleAccountsOnlyOnThatDevice() async throws {
        try await StoreFixture.run { f in
            let expired = try await f.account("expired")
            let stale = try await f.account("stale")
            let kept = try await f.account("kept")
            let device = try await f.device()
            let otherDevice = try await f.device()
            try await f.session(device: device, account: expired, idleFor: -1)
            try await f.session(device: device, account: stale)
            try await f.session(device: otherDevice, account: expired, idleFor: -1)
            let (keptSession, _) = try await f.session(device: device, account: kept)
            _ = try await f.store.accounts.markStale(stale, reason: "test", now: f.now)
            let ended = try await f.store.sessions.endStale(onDevice: device, now: f.now)
            #expect(ended == [expired])  // the stale account's session already ended with markStale
            #expect(try await f.store.sessions.accounts(onDevice: device, now: f.now).map(\.id) == [kept])
            #expect(try await f.count("sessions") == 2)
            #expect(try await f.store.sessions.end(.session(keptSession)) == [kept])
        }
    }

    @Test func aRotationKeepsTheSpentTokenAsPreviousAndRevokedAndAReuseFindsItsFamily() async throws {
        try await StoreFixture.run { f in
            let account = try await f.account("alice")
            let device = try await f.device()
            let refresh = StoreFixture.randomHash()
            let id = try await f.store.sessions.start(
                SessionStore.Start(
                    device: device,
                    account: account,
                    clientID: "com.example.app",
                    accessTokenHash: StoreFixture.randomHash(),
                    accessExpiresAt: f.now.addingTimeInterval(300),
                    refreshTokenHash: refresh,
                    expiresAt: f.now.addingTimeInterval(3600),
                    absoluteExpiresAt: f.now.addingTimeInterval(7200),
                    now: f.now
                )
            )
            let next = StoreFixture.randomHash()
            try await f.store.transaction { transaction in
                let current = try #require(try await transaction.sessions.lockForRefresh(refreshTokenHash: refresh))
                #expect(current.id == id && current.account.id == account)
                try await transaction.sessions.rotate(
                    SessionRotation(
                        session: id,
                        familyID: current.familyID,
                        accessTokenHash: StoreFixture.randomHash(),
                        accessExpiresAt: f.now.addingTimeInterval(300),
                        refreshTokenHash: next,
                        spentRefreshTokenHash: refresh,
                        absoluteExpiresAt: current.absoluteExpiresAt,
                        replay: StoreFixture.blob("answer"),
                        // Past the absolute expiry: the idle expiry never passes it.
                        idleExpiresAt: f.now.addingTimeInterval(10_000),
                        now: f.now
                    )
                )
            }
            #expect(try await f.store.sessions.lockForRefresh(refreshTokenHash: refresh) == nil)
            let rotated = try #require(try await f.store.sessions.lockByPreviousRefreshToken(refresh))
            #expect(rotated.id == id && rotated.replay == StoreFixture.blob("answer") && rotated.rotatedAt == f.now)
            #expect(try await f.store.sessions.revokedFamily(refreshTokenHash: refresh) == rotated.familyID)
            let refreshed = try #require(try await f.store.sessions.lockForRefresh(refreshTokenHash: next))
            #expect(refreshed.expiresAt == f.now.addingTimeInterval(7200))
            try await f.store.sessions.clearReplays(rotatedBefore: f.now)
            #expect(try await f.store.sessions.lockByPreviousRefreshToken(refresh)?.replay == nil)
            #expect(try await f.store.sessions.end(.family(rotated.familyID)) == [account])
        }
    }

    @Test func aTransactionThatThrowsLeavesNoSessionBehind() async throws {
        struct Abandon: Error {}
        try await StoreFixture.run { f in
            let account = try await f.account("alice")
            let device = try await f.device()
            await #expect(throws: Abandon.self) {
                try await f.store.transaction { transaction in
                    _ = try await transaction.sessions.start(
                        SessionStore.Start(
                            device: device,
                            account: account,
                            clientID: "com.example.app",
                            accessTokenHash: TokenHash(Array(repeating: 7, count: 32)),
                            accessExpiresAt: f.now.addingTimeInterval(300),
                            refreshTokenHash: TokenHash(Array(repeating: 8, count: 32)),
                            expiresAt: f.now.addingTimeInterval(3600),
                            absoluteExpiresAt: f.now.addingTimeInterval(86400),
                            now: f.now
                        )
                    )
                    throw Abandon()
                }
            }
            #expect(try await f.count("sessions") == 0)
        }
    }
}

import Foundation
import Synchronization
import TGPostgres
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

    @Test func liveUntilNamesTheUnexpiredSessionsOfActiveAccountsWithTheirNearerExpiry() async throws {
        try await StoreFixture.run { f in
            let device = try await f.device()
            let alice = try await f.account("alice")
            let bob = try await f.account("bob")
            let carol = try await f.account("carol")
            let live = try await f.session(device: device, account: alice, idleFor: 3600)
            let expired = try await f.session(device: device, account: bob, idleFor: -1)
            let stale = try await f.session(device: device, account: carol)
            _ = try await f.store.accounts.markStale(carol, reason: "test", now: f.now)
            let found = try await f.store.sessions.liveUntil([live.id, expired.id, stale.id, UUID()], now: f.now)
            #expect(found == [live.id: f.now.addingTimeInterval(3600)])
            // Past its absolute expiry (a day) though its idle one is later.
            let long = try await f.session(device: try await f.device(), account: alice, idleFor: 2 * 86400)
            #expect(try await f.store.sessions.liveUntil([long.id], now: f.now) == [long.id: f.now.addingTimeInterval(86400)])
            #expect(try await f.store.sessions.liveUntil([long.id], now: f.now.addingTimeInterval(86400)).isEmpty)
        }
    }

    @Test func aDeletedSessionIsAnnouncedOnTheSessionEndFeedWhateverDeletesIt() async throws {
        try await StoreFixture.run { f in
            let feed = try SessionEndFeed(url: f.url)
            defer { feed.stop() }
            let heard = Mutex<[UUID]>([])
            let listening = Task {
                for await event in feed.events { if case .ended(let id) = event { heard.withLock { $0.append(id) } } }
            }
            defer { listening.cancel() }
            let account = try await f.account("alice")
            // The listener connects in the background: sessions end until it hears one (bounded).
            var first: UUID?
            for _ in 0..<500 where first == nil {
                let session = try await f.session(device: try await f.device(), account: account)
                try await f.store.sessions.end(.session(session.id))
                try await Task.sleep(for: .milliseconds(10))
                first = heard.withLock { $0.last == session.id ? session.id : nil }
            }
            #expect(first != nil)
            // A cascade (the account removed) and a suspension (its grant rejected) are announced too.
            let device = try await f.device()
            let bob = try await f.account("bob")
            let bobs = try await f.session(device: device, account: bob)
            try await f.database.query("DELETE FROM accounts WHERE id = \(bob)")
            let carol = try await f.account("carol")
            let carols = try await f.session(device: device, account: carol)
            _ = try await f.store.accounts.markStale(carol, reason: "test", now: f.now)
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline, !heard.withLock({ Set($0).isSuperset(of: [bobs.id, carols.id]) }) {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(heard.withLock { Set($0).isSuperset(of: [bobs.id, carols.id]) })
        }
    }
}

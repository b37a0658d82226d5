import Foundation
import Synchronization
import TGPostgres
import TGStore
import Testing

@Suite struct AccountStoreTests {
    @Test func upsertCreatesOnceAndBringsAStaleAccountBackWithFreshClaims() async throws {
        try await StoreFixture.run { f in
            let id = try await f.account("alice")
            _ = try await f.store.accounts.markStale(id, reason: "grant revoked", now: f.now)
            #expect(try await f.store.accounts.findActive(id) == nil)
            let again = try await f.store.accounts.upsert(
                provider: "fake",
                issuer: "https://idp.example",
                tenant: "t1",
                subject: "alice",
                claims: #"{"name":"Alice"}"#,
                now: f.now
            )
            #expect(again == id)
            let found = try #require(try await f.store.accounts.findActive(id))
            #expect(found.state == "active" && found.tenant == "t1" && found.claims.contains("Alice"))
            #expect(try await f.count("accounts") == 1)
        }
    }

    @Test func markingStaleEndsTheSessionsAndDropsTheStoredAccessTokens() async throws {
        try await StoreFixture.run { f in
            let id = try await f.account("alice")
            try await f.session(device: try await f.device(), account: id)
            try await f.session(device: try await f.device(), account: id)
            try await f.store.accounts.storeAccessToken(
                StoreFixture.blob("at"),
                keyID: "k1",
                account: id,
                scopeKey: "User.Read",
                expiresAt: f.now.addingTimeInterval(3600),
                issuedAt: f.now
            )
            #expect(try await f.store.accounts.markStale(id, reason: "invalid_grant", now: f.now) == 2)
            #expect(try await f.store.accounts.accessToken(id, scopeKey: "User.Read") == nil)
            #expect(try await f.store.accounts.grant(id)?.accountState == "stale")
        }
    }

    @Test func aRotationIsWrittenOnlyAtTheVersionItReadAndKeepsWhatItDoesNotChange() async throws {
        try await StoreFixture.run { f in
            let id = try await f.account("alice")
            let grant = try #require(try await f.store.accounts.grant(id))
            #expect(grant.refreshToken == StoreFixture.blob("grant-alice") && grant.refreshFailures == 0)
            try await f.store.accounts.recordRefreshFailure(id, retryAt: f.now.addingTimeInterval(30))
            let rotation = GrantRotation(
                account: id,
                version: grant.version,
                refreshToken: nil,
                keyID: "k2",
                refreshTokenExpiresAt: nil,
                idTokenHint: nil,
                forced: true
            )
            #expect(try await f.store.accounts.writeRotation(rotation, now: f.now))
            // The same version again: someone wrote in between.
            #expect(try await !f.store.accounts.writeRotation(rotation, now: f.now))
            let after = try #require(try await f.store.accounts.grant(id))
            #expect(after.version == grant.version + 1 && after.refreshToken == grant.refreshToken)
            #expect(after.refreshFailures == 0 && after.refreshRetryAt == nil && after.forcedRefreshAt == f.now)
            #expect(try await f.store.accounts.logoutHint(id)?.idTokenHint == StoreFixture.blob("hint-alice"))
        }
    }

    @Test func removingAccountsWithoutSessionsQueuesTheirGrantsAndSparesHeldOnes() async throws {
        try await StoreFixture.run { f in
            let held = try await f.account("held")
            let free = try await f.account("free")
            let waiting = try await f.account("waiting")
            let noGrant = try await f.account("nogrant", withGrant: false)
            try await f.session(device: try await f.device(), account: held)
            try await f.store.loginStates.issueHandoff(
                codeHash: StoreFixture.randomHash(),
                account: waiting,
                clientID: "com.example.app",
                redirectURI: "com.example.app:/cb",
                codeChallenge: "c",
                now: f.now,
                expiresAt: f.now.addingTimeInterval(60)
            )
            let (removed, queued) = try await f.store.accounts.remove(
                .withoutSessions([held, free, waiting, noGrant]),
                giveUpAt: f.now.addingTimeInterval(86400),
                now: f.now
            )
            #expect(removed == 2)
            #expect(queued.map(\.account) == [free] && queued.first?.sealed == StoreFixture.blob("grant-free"))
            #expect(try await f.count("accounts") == 2)
            #expect(try await f.count("upstream_grants") == 2)
            #expect(try await f.count("upstream_revocations") == 1)
        }
    }

    @Test func theSweepRemovesStaleAndIdleAccountsWithinItsLimit() async throws {
        try await StoreFixture.run { f in
            let stale = try await f.account("stale")
            let active = try await f.account("active")
            try await f.session(device: try await f.device(), account: active)
            _ = try await f.store.accounts.markStale(stale, reason: "test", now: f.now)
            let (removed, queued) = try await f.store.accounts.remove(
                .sweepable(idleSince: f.now.addingTimeInterval(-60), staleBefore: f.now, limit: 10),
                giveUpAt: f.now.addingTimeInterval(86400),
                now: f.now
            )
            #expect(removed == 1 && queued.map(\.account) == [stale])
            #expect(try await f.store.accounts.findActive(active) != nil)
        }
    }
}

@Suite struct LoginStateStoreTests {
    func pending(_ f: StoreFixture, expiresIn: TimeInterval, at: Date? = nil) -> PendingLoginRecord {
        PendingLoginRecord(
            stateHash: StoreFixture.randomHash(),
            clientID: "com.example.app",
            redirectURI: "com.example.app:/cb",
            appState: "s",
            codeChallenge: "c",
            provider: "fake",
            policy: nil,
            nonce: "n",
            codeVerifier: StoreFixture.blob("v"),
            keyID: "k1",
            issuer: "https://idp.example",
            createdAt: at ?? f.now,
            expiresAt: (at ?? f.now).addingTimeInterval(expiresIn)
        )
    }

    @Test func aPendingLoginIsConsumedOnceAndABeginClearsExpiredOnes() async throws {
        try await StoreFixture.run { f in
            let old = pending(f, expiresIn: -1)
            try await f.store.loginStates.begin(old)
            let login = pending(f, expiresIn: 600)
            try await f.store.loginStates.begin(login)
            #expect(try await f.count("pending_logins") == 1)
            let consumed = try #require(try await f.store.loginStates.consume(stateHash: login.stateHash))
            #expect(consumed.codeVerifier == login.codeVerifier && consumed.expiresAt == login.expiresAt && consumed.appState == "s")
            #expect(try await f.store.loginStates.consume(stateHash: login.stateHash) == nil)
        }
    }

    @Test func aHandoffCodeIsLockedBurntOrMarkedWithItsSession() async throws {
        try await StoreFixture.run { f in
            let account = try await f.account("alice")
            let (session, _) = try await f.session(device: try await f.device(), account: account)
            let code = StoreFixture.randomHash()
            let burnt = StoreFixture.randomHash()
            for hash in [code, burnt] {
                try await f.store.loginStates.issueHandoff(
                    codeHash: hash,
                    account: account,
                    clientID: "com.example.app",
                    redirectURI: "com.example.app:/cb",
                    codeChallenge: "c",
                    now: f.now,
                    expiresAt: f.now.addingTimeInterval(60)
                )
            }
            try await f.store.transaction { transaction in
                let locked = try #require(try await transaction.loginStates.lockHandoff(codeHash: code))
                #expect(locked.account == account && locked.redeemedAt == nil && locked.session == nil)
                try await transaction.loginStates.markRedeemed(codeHash: code, session: session, now: f.now)
                try await transaction.loginStates.burnHandoff(codeHash: burnt)
            }
            let redeemed = try #require(try await f.store.loginStates.lockHandoff(codeHash: code))
            #expect(redeemed.redeemedAt == f.now && redeemed.session == session)
            #expect(try await f.store.loginStates.lockHandoff(codeHash: burnt) == nil)
            #expect(try await f.store.loginStates.deleteExpiredHandoffs(now: f.now.addingTimeInterval(61), limit: 10) == 1)
        }
    }
}

@Suite struct DeviceAndRevocationStoreTests {
    @Test func aDeviceIsFoundOnlyByItsOwnClientWhileNotIdleAndIdleOnesWithoutSessionsGo() async throws {
        try await StoreFixture.run { f in
            let secret = StoreFixture.randomHash()
            let device = try await f.device(secretHash: secret)
            let devices = f.store.devices
            #expect(try await devices.touch(secretHash: secret, client: "org.other", seenSince: f.now.addingTimeInterval(-60), now: f.now) == nil)
            #expect(try await devices.touch(secretHash: secret, client: "com.example.app", seenSince: f.now, now: f.now) == nil)
            #expect(
                try await devices.touch(secretHash: secret, client: "com.example.app", seenSince: f.now.addingTimeInterval(-60), now: f.now)
                    == device
            )
            let used = try await f.device()
            try await f.session(device: used, account: try await f.account("alice"))
            #expect(try await devices.deleteIdle(seenBefore: f.now.addingTimeInterval(1), limit: 10) == 1)
            #expect(try await f.count("devices") == 1)
        }
    }

    @Test func dueRevocationsAreClaimedOnceUntilTheLeaseAndExpiredOnesAreDropped() async throws {
        try await StoreFixture.run { f in
            for subject in ["a", "b"] { _ = try await f.account(subject) }
            _ = try await f.store.accounts.remove(
                .sweepable(idleSince: f.now.addingTimeInterval(1), staleBefore: f.now, limit: 10),
                giveUpAt: f.now.addingTimeInterval(3600),
                now: f.now
            )
            let revocations = f.store.revocations
            let claimed = try await revocations.claimDue(now: f.now, leaseUntil: f.now.addingTimeInterval(60), limit: 10)
            #expect(claimed.count == 2)
            #expect(try await revocations.claimDue(now: f.now, leaseUntil: f.now.addingTimeInterval(60), limit: 10).isEmpty)
            try await revocations.retryLater(claimed[0].id, at: f.now.addingTimeInterval(30))
            try await revocations.remove(claimed[1].id)
            let again = try await revocations.claimDue(now: f.now.addingTimeInterval(30), leaseUntil: f.now.addingTimeInterval(90), limit: 10)
            #expect(again.map(\.id) == [claimed[0].id] && again[0].attempts == 1)
            #expect(try await revocations.dropExpired(now: f.now.addingTimeInterval(3600)) == ["fake"])
            #expect(try await f.count("upstream_revocations") == 0)
        }
    }
}

@Suite struct KeyStoreTests {
    @Test func onlySecretsUnderAnotherKeyAreResealedAndNamedWithTheCurrentKey() async throws {
        try await StoreFixture.run { f in
            let old = try await f.account("old")
            _ = try await f.account("current")
            try await f.database.query("UPDATE upstream_grants SET key_id = 'k2' WHERE account_id <> \(old)")
            #expect(try await f.store.keys.remaining(notUnder: "k2") == 1)
            var seen: [UUID] = []
            let count = try await f.store.transaction { transaction in
                try await transaction.keys.resealGrants(notUnder: "k2", limit: 10) { account, token, hint in
                    seen.append(account)
                    return (SealedBlob(token.bytes + [1]), hint)
                }
            }
            #expect(count == 1 && seen == [old])
            #expect(try await f.store.keys.remaining(notUnder: "k2") == 0)
            #expect(try await f.store.accounts.grant(old)?.refreshToken == SealedBlob(Array("grant-old".utf8) + [1]))
        }
    }
}

@Suite struct SharedCoordinationTests {
    @Test func anExclusiveRunIsRefusedWhileAnotherHoldsItsLockAndTheLockIsGivenBack() async throws {
        try await StoreFixture.run { f in
            let inner = try await f.store.exclusively(lockKey: 42) {
                try await f.store.exclusively(lockKey: 42) { "second" } ?? "refused"
            }
            #expect(inner == "refused")
            #expect(try await f.store.exclusively(lockKey: 42) { "again" } == "again")
        }
    }

    @Test func aCommittedChangeOfAnAccountIsAnnouncedOnTheInvalidationFeed() async throws {
        try await StoreFixture.run { f in
            let feed = try InvalidationFeed(url: f.url)
            defer { feed.stop() }
            let account = try await f.account("alice")
            let heard = Mutex<Invalidation?>(nil)
            let listening = Task { for await event in feed.events { heard.withLock { $0 = event } } }
            defer { listening.cancel() }
            // The listener connects in the background: notify until it hears one (bounded). Only a
            // change to stale is announced, so the account signs in again in between.
            for _ in 0..<500 where heard.withLock({ $0 }) == nil {
                _ = try await f.account("alice")
                _ = try await f.store.accounts.markStale(account, reason: "test", now: f.now)
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(heard.withLock { $0 } == .account(account))
        }
    }
}

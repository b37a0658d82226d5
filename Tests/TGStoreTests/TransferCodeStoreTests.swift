import Foundation
import TGPostgres
import TGStore
import Testing

/// The transfer-code store against a real PostgreSQL with TokenGate's schema.
@Suite struct TransferCodeStoreTests {
    func issue(_ f: StoreFixture, device: UUID, accounts: [UUID], at offset: TimeInterval = 0, limit: Int = 3) async throws -> TokenHash {
        let hash = StoreFixture.randomHash()
        try await f.store.transaction { transaction in
            try await transaction.transferCodes.issue(
                codeHash: hash,
                clientID: "com.example.app",
                device: device,
                accounts: accounts,
                codeChallenge: String(repeating: "c", count: 43),
                now: f.now.addingTimeInterval(offset),
                expiresAt: f.now.addingTimeInterval(offset + 3600),
                limit: limit
            )
        }
        return hash
    }

    func lock(_ f: StoreFixture, _ hash: TokenHash) async throws -> TransferCodeRecord? {
        try await f.store.transaction { try await $0.transferCodes.lock(codeHash: hash) }
    }

    @Test func aCodeIsReadBackWithItsAccountsAndItsDevicesOldestCodesGoPastTheLimit() async throws {
        try await StoreFixture.run { f in
            let alice = try await f.account("alice")
            let bob = try await f.account("bob")
            let device = try await f.device()
            let first = try await issue(f, device: device, accounts: [alice, bob], limit: 2)
            let record = try #require(try await lock(f, first))
            #expect(record.accounts == [alice, bob] && record.device == device && record.redeemedAt == nil && record.failedAttempts == 0)
            let second = try await issue(f, device: device, accounts: [], at: 1, limit: 2)
            #expect(try await lock(f, second)?.accounts == [])
            _ = try await issue(f, device: device, accounts: [alice], at: 2, limit: 2)
            #expect(try await lock(f, first) == nil)
            #expect(try await lock(f, second) != nil)
            #expect(try await f.count("transfer_codes") == 2)
        }
    }

    @Test func concurrentIssuesOfOneDeviceStayWithinTheLimit() async throws {
        try await StoreFixture.run { f in
            let device = try await f.device()
            try await withThrowingTaskGroup(of: TokenHash.self) { group in
                for index in 0..<8 {
                    group.addTask { try await issue(f, device: device, accounts: [], at: TimeInterval(index), limit: 2) }
                }
                try await group.waitForAll()
            }
            #expect(try await f.count("transfer_codes") == 2)
        }
    }

    @Test func onlyLiveSessionsOfActiveAccountsWithAnUnexpiredGrantAreTransferable() async throws {
        try await StoreFixture.run { f in
            let alice = try await f.account("alice")
            let bob = try await f.account("bob")
            let carol = try await f.account("carol", withGrant: false)
            let dave = try await f.account("dave")
            let erin = try await f.account("erin")
            let device = try await f.device()
            for account in [alice, bob, carol, dave, erin] { try await f.session(device: device, account: account) }
            try await f.database.query("UPDATE upstream_grants SET expires_at = \(f.now) WHERE account_id = \(bob)")
            try await f.database.query("UPDATE accounts SET state = 'stale' WHERE id = \(dave)")
            try await f.database.query("UPDATE sessions SET expires_at = \(f.now) WHERE account_id = \(erin)")
            let moving = try await f.store.transferCodes.transferable(accounts: [alice, bob, carol, dave, erin], device: device, now: f.now)
            #expect(moving.map(\.account.id) == [alice])
            #expect(moving.first?.absoluteExpiresAt == f.now.addingTimeInterval(86400) && moving.first?.createdAt == f.now)
            // Only the code's accounts, and only on that device.
            #expect(try await f.store.transferCodes.transferable(accounts: [bob], device: device, now: f.now).isEmpty)
            #expect(try await f.store.transferCodes.transferable(accounts: [alice], device: try await f.device(), now: f.now).isEmpty)
        }
    }

    @Test func failedAttemptsCountUpAndTheLastOneRemovesTheCode() async throws {
        try await StoreFixture.run { f in
            let device = try await f.device()
            let code = try await issue(f, device: device, accounts: [])
            for _ in 0..<2 { #expect(try await f.store.transferCodes.recordFailedAttempt(codeHash: code, maxAttempts: 3)) }
            #expect(try await lock(f, code)?.failedAttempts == 2)
            #expect(try await !f.store.transferCodes.recordFailedAttempt(codeHash: code, maxAttempts: 3))
            #expect(try await lock(f, code) == nil)
        }
    }

    @Test func revokingKeepsRedeemedCodesAndTheOneNamedAndTheSweeperRemovesOnlyExpiredOnes() async throws {
        try await StoreFixture.run { f in
            let device = try await f.device()
            let redeemed = try await issue(f, device: device, accounts: [])
            let kept = try await issue(f, device: device, accounts: [], at: 1)
            let other = try await issue(f, device: device, accounts: [], at: 2)
            let newDevice = try await f.device()
            try await f.store.transferCodes.markRedeemed(codeHash: redeemed, newDevice: newDevice, replay: SealedBlob([1]), now: f.now)
            #expect(try await f.store.transferCodes.revoke(device: device, except: kept) == 1)
            #expect(try await lock(f, other) == nil)
            #expect(try await lock(f, redeemed)?.redeemedDevice == newDevice)
            // The issuing device gone: its codes stay, naming no device.
            try await f.store.devices.delete(device)
            #expect(try await lock(f, kept)?.device == nil)
            #expect(try await f.store.transferCodes.deleteExpired(now: f.now.addingTimeInterval(3600), limit: 10) == 1)
            #expect(try await f.store.transferCodes.deleteExpired(now: f.now.addingTimeInterval(3601), limit: 10) == 1)
        }
    }

    @Test func aRedeemedCodeKeepsItsSealedAnswerUntilTheReplaysOfItsTimeAreCleared() async throws {
        try await StoreFixture.run { f in
            let code = try await issue(f, device: try await f.device(), accounts: [])
            #expect(try await lock(f, code)?.replay == nil)
            try await f.store.transferCodes.markRedeemed(codeHash: code, newDevice: nil, replay: SealedBlob([1, 2, 3]), now: f.now)
            #expect(try await lock(f, code)?.replay == SealedBlob([1, 2, 3]))
            try await f.store.transferCodes.clearReplays(redeemedBefore: f.now.addingTimeInterval(-1))
            #expect(try await lock(f, code)?.replay == SealedBlob([1, 2, 3]))
            try await f.store.transferCodes.clearReplays(redeemedBefore: f.now)
            let cleared = try await lock(f, code)
            #expect(cleared?.replay == nil && cleared?.redeemedAt != nil)
        }
    }
}

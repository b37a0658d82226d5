import Foundation
import TGPostgres
import TGStore
import Testing

/// A provider failing as a whole, as every instance sees it, and the accounts a rejected grant
/// suspends rather than deletes.
@Suite struct ProviderFaultStoreTests {
    @Test func aFailingProviderIsAttemptedByOneCallerPerWindowAndItsBackoffDoubles() async throws {
        try await StoreFixture.run { f in
            let faults = f.store.providerFaults
            let first = try await faults.markFailing("fake", kind: .client, reason: "invalid_client", now: f.now, backoffBase: 2, backoffMax: 300)
            #expect(first.kind == .client && first.failures == 1 && first.retryAt == f.now.addingTimeInterval(2))
            // Not due yet: nobody may ask.
            #expect(try await faults.claimAttempt("fake", now: f.now.addingTimeInterval(1), holdUntil: f.now.addingTimeInterval(31)) != .claimed)
            // Due: the first caller has it; the second sees it asked (the window's end unmoved).
            let due = f.now.addingTimeInterval(3)
            #expect(try await faults.claimAttempt("fake", now: due, holdUntil: due.addingTimeInterval(30)) == .claimed)
            guard case .notClaimed(let asked?) = try await faults.claimAttempt("fake", now: due, holdUntil: due.addingTimeInterval(30)) else {
                Issue.record("a second caller claimed the attempt")
                return
            }
            #expect(asked.attemptUntil == due.addingTimeInterval(30) && asked.retryAt == f.now.addingTimeInterval(2))
            // Its caller did not settle it: released, the next caller has it at once; a release
            // of an attempt taken over meanwhile changes nothing.
            try await faults.releaseAttempt("fake", heldUntil: due.addingTimeInterval(30))
            #expect(try await faults.claimAttempt("fake", now: due, holdUntil: due.addingTimeInterval(31)) == .claimed)
            try await faults.releaseAttempt("fake", heldUntil: due.addingTimeInterval(30))
            #expect(try await faults.fault("fake")?.attemptUntil == due.addingTimeInterval(31))
            // An attempt whose caller never answered is taken over once its hold has passed.
            let late = due.addingTimeInterval(32)
            #expect(try await faults.claimAttempt("fake", now: late, holdUntil: late.addingTimeInterval(30)) == .claimed)
            let second = try await faults.markFailing("fake", kind: .client, reason: "invalid_client", now: due, backoffBase: 2, backoffMax: 300)
            #expect(second.failures == 2 && second.retryAt == due.addingTimeInterval(4) && second.failingSince == f.now)
            #expect(second.attemptUntil == nil, "its outcome settled the attempt")
            let cleared = try #require(try await faults.recordSuccess("fake", now: due.addingTimeInterval(5)))
            #expect(cleared.kind == .client && cleared.failures == 2)
            #expect(try await faults.fault("fake")?.kind == nil)
            #expect(try await faults.recordSuccess("fake", now: due.addingTimeInterval(6)) == nil)
            // A provider without a fault has nothing to claim.
            #expect(try await faults.claimAttempt("other", now: due, holdUntil: due.addingTimeInterval(30)) == .notClaimed(nil))
        }
    }

    @Test func theValveCountsDistinctGrantsRejectedInItsWindowSinceTheLastSuccess() async throws {
        try await StoreFixture.run { f in
            let faults = f.store.providerFaults
            let accounts = try await [f.account("a"), f.account("b"), f.account("c")]
            let window = f.now.addingTimeInterval(-60)
            #expect(try await faults.recordRejection("fake", account: accounts[0], now: f.now, windowStart: window) == 1)
            // The same grant twice is one grant.
            #expect(try await faults.recordRejection("fake", account: accounts[0], now: f.now, windowStart: window) == 1)
            #expect(try await faults.recordRejection("fake", account: accounts[1], now: f.now, windowStart: window) == 2)
            // A success in between: only what came after it counts.
            let later = f.now.addingTimeInterval(1)
            try await faults.recordRefreshed("fake", now: later)
            #expect(try await faults.recordRejection("fake", account: accounts[2], now: later, windowStart: window) == 1)
            // Out of the window: not counted.
            let muchLater = f.now.addingTimeInterval(120)
            #expect(
                try await faults.recordRejection("fake", account: accounts[0], now: muchLater, windowStart: muchLater.addingTimeInterval(-60)) == 1
            )
        }
    }

    @Test func aStaleAccountKeepsItsSessionsAsideAndTheValveBringsThemBack() async throws {
        try await StoreFixture.run { f in
            let id = try await f.account("alice")
            let other = try await f.account("bob")
            try await f.session(device: try await f.device(), account: id)
            try await f.session(device: try await f.device(), account: other)
            let rejectedAt = f.now
            _ = try await f.store.providerFaults.recordRejection("fake", account: id, now: rejectedAt, windowStart: rejectedAt)
            #expect(try await f.store.accounts.markStale(id, reason: "invalid_grant", now: rejectedAt) == 1)
            #expect(try await f.count("sessions") == 1)
            #expect(try await f.count("suspended_sessions") == 1)
            // Within the grace period the sweeper leaves it, grant and all.
            let (kept, queued) = try await f.store.accounts.remove(
                .sweepable(idleSince: f.now.addingTimeInterval(-86400), staleBefore: f.now.addingTimeInterval(-1), limit: 10),
                giveUpAt: f.now.addingTimeInterval(86400),
                now: f.now
            )
            #expect(kept == 0 && queued.isEmpty)
            let restored = try await f.store.transaction { try await $0.accounts.restore(provider: "fake", rejectedSince: rejectedAt, now: f.now) }
            #expect(restored == [id])
            #expect(try await f.store.accounts.findActive(id) != nil)
            #expect(try await f.count("sessions") == 2)
            #expect(try await f.count("suspended_sessions") == 0)
            #expect(try await f.count("grant_rejections") == 0)
        }
    }

    @Test func signingInAgainDropsWhatARejectedGrantSuspended() async throws {
        try await StoreFixture.run { f in
            let id = try await f.account("alice")
            try await f.session(device: try await f.device(), account: id)
            _ = try await f.store.providerFaults.recordRejection("fake", account: id, now: f.now, windowStart: f.now)
            _ = try await f.store.accounts.markStale(id, reason: "invalid_grant", now: f.now)
            _ = try await f.store.accounts.upsert(
                provider: "fake",
                issuer: "https://idp.example",
                tenant: nil,
                subject: "alice",
                claims: "{}",
                now: f.now
            )
            #expect(try await f.count("suspended_sessions") == 0)
            #expect(try await f.count("grant_rejections") == 0)
            // Nothing is left for the valve to bring back.
            #expect(try await f.store.transaction { try await $0.accounts.restore(provider: "fake", rejectedSince: f.now, now: f.now) }.isEmpty)
            #expect(try await f.count("sessions") == 0)
        }
    }

    @Test func theSweeperRemovesAStaleAccountOnceItsGracePeriodIsOver() async throws {
        try await StoreFixture.run { f in
            let id = try await f.account("alice")
            try await f.session(device: try await f.device(), account: id)
            _ = try await f.store.accounts.markStale(id, reason: "invalid_grant", now: f.now)
            let (removed, queued) = try await f.store.accounts.remove(
                .sweepable(idleSince: f.now.addingTimeInterval(-86400), staleBefore: f.now, limit: 10),
                giveUpAt: f.now.addingTimeInterval(86400),
                now: f.now
            )
            #expect(removed == 1 && queued.map(\.account) == [id])
            #expect(try await f.count("suspended_sessions") == 0)
        }
    }
}

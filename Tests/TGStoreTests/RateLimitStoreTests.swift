import Foundation
import TGPostgres
import TGStore
import TGTesting
import Testing

/// The shared rate-limit buckets, against a real PostgreSQL with TokenGate's schema.
@Suite struct RateLimitStoreTests {
    @Test func aBucketNeverSeenIsFullAndATakeGetsAtMostWhatIsLeft() async throws {
        try await StoreFixture.run { f in
            let buckets = f.store.rateLimits
            func take(_ want: Int, at seconds: Double = 0, client: String = "192.0.2.1") async throws -> RateLimitStore.Take {
                try await buckets.take(
                    scope: "login",
                    client: client,
                    want: want,
                    capacity: 10,
                    perSecond: 10.0 / 60,
                    now: f.now.addingTimeInterval(seconds)
                )
            }
            #expect(try await take(4) == RateLimitStore.Take(granted: 4, remaining: 6))
            #expect(try await take(8) == RateLimitStore.Take(granted: 6, remaining: 0))
            #expect(try await take(1).granted == 0)
            // Another client, and another limit, have buckets of their own.
            #expect(try await take(3, client: "192.0.2.2").granted == 3)
            let otherScope = try await buckets.take(scope: "token", client: "192.0.2.1", want: 2, capacity: 10, perSecond: 1, now: f.now)
            #expect(otherScope.granted == 2)
            // 10 a minute: one token every 6 s, and never more than the capacity.
            let refilled = try await take(5, at: 15)
            #expect(refilled.granted == 2 && abs(refilled.remaining - 0.5) < 1e-9)
            #expect(try await take(20, at: 3600).granted == 10)
        }
    }

    @Test func aClockBehindTheBucketsRefillsNothingAndMovesNothingBack() async throws {
        try await StoreFixture.run { f in
            let buckets = f.store.rateLimits
            func take(at seconds: Double) async throws -> RateLimitStore.Take {
                try await buckets.take(scope: "login", client: "c", want: 10, capacity: 10, perSecond: 1, now: f.now.addingTimeInterval(seconds))
            }
            let first = try await take(at: 100)
            // An instance whose clock is 50 s behind: no refill, and the bucket keeps its time.
            let behind = try await take(at: 50)
            let later = try await take(at: 103)
            #expect(first.granted == 10 && behind.granted == 0 && later.granted == 3)
        }
    }

    @Test func concurrentTakesFromOneBucketNeverGrantMoreThanItHolds() async throws {
        try await StoreFixture.run { f in
            let buckets = f.store.rateLimits
            let granted = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<16 {
                    group.addTask {
                        try await buckets.take(scope: "token", client: "c", want: 2, capacity: 25, perSecond: 0, now: f.now).granted
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(granted == 25)
        }
    }

    @Test func oneStatementTakesForManyClientsAndOverlappingBatchesNeitherDeadlockNorOverGrant() async throws {
        try await StoreFixture.run { f in
            let buckets = f.store.rateLimits
            let one = try await buckets.take(
                scope: "login",
                wants: ["a": 1, "b": 3, "c": 50],
                capacity: 10,
                perSecond: 0,
                now: f.now
            )
            #expect(one == ["a": .init(granted: 1, remaining: 9), "b": .init(granted: 3, remaining: 7), "c": .init(granted: 10, remaining: 0)])
            // 12 statements at once, each for the same 40 clients (listed in different orders):
            // rows are locked in one order, so none deadlocks, and each bucket gives out 10.
            let clients = (0..<40).map { "client-\($0)" }
            let granted = try await withThrowingTaskGroup(of: [String: RateLimitStore.Take].self) { group in
                for index in 0..<12 {
                    let order = index % 2 == 0 ? clients : clients.reversed()
                    group.addTask {
                        try await buckets.take(
                            scope: "token",
                            wants: Dictionary(uniqueKeysWithValues: order.map { ($0, 2) }),
                            capacity: 10,
                            perSecond: 0,
                            now: f.now
                        )
                    }
                }
                var total: [String: Int] = [:]
                for try await takes in group { for (client, take) in takes { total[client, default: 0] += take.granted } }
                return total
            }
            #expect(granted.count == 40 && granted.values.allSatisfy { $0 == 10 })
        }
    }

    @Test func bucketsUntouchedSinceTheCutOffAreRemoved() async throws {
        try await StoreFixture.run { f in
            let buckets = f.store.rateLimits
            _ = try await buckets.take(scope: "login", client: "old", want: 1, capacity: 60, perSecond: 1, now: f.now)
            _ = try await buckets.take(scope: "login", client: "new", want: 1, capacity: 60, perSecond: 1, now: f.now.addingTimeInterval(30))
            #expect(try await buckets.deleteIdle(before: f.now.addingTimeInterval(10), limit: 10) == 1)
            #expect(try await f.count("rate_limit_buckets") == 1)
        }
    }
}

extension RateLimitStore {
    /// One client's take.
    func take(scope: String, client: String, want: Int, capacity: Double, perSecond: Double, now: Date) async throws -> Take {
        try #require(try await take(scope: scope, wants: [client: want], capacity: capacity, perSecond: perSecond, now: now)[client])
    }
}

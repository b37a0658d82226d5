import Foundation
import Synchronization
import TGPostgres
import TGStore
import Testing

/// Migration 0011: replacing an account's stored upstream access token is announced like
/// deleting it, so another instance stops serving the old one (which the API may have refused).
@Suite struct AccessTokenInvalidationTests {
    @Test func aReplacedUpstreamAccessTokenIsAnnouncedButStoringTheSameOneIsNot() async throws {
        try await StoreFixture.run { f in
            let account = try await f.account("alice")
            let store = { (value: String) in
                try await f.store.accounts.storeAccessToken(
                    StoreFixture.blob(value),
                    keyID: "k1",
                    account: account,
                    scopeKey: "api",
                    expiresAt: f.now.addingTimeInterval(600),
                    issuedAt: f.now
                )
            }
            try await store("first")
            let feed = try InvalidationFeed(url: f.url)
            defer { feed.stop() }
            let heard = Mutex<[Invalidation]>([])
            let listening = Task { for await event in feed.events { heard.withLock { $0.append(event) } } }
            defer { listening.cancel() }
            // The listener subscribes in the background: replace the token until it hears it.
            var round = 0
            while heard.withLock({ $0.isEmpty }), round < 500 {
                round += 1
                try await store("replacement \(round)")
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(heard.withLock { $0.first } == .account(account))
            // The same token stored again changes nothing, and says nothing.
            try await store("replacement \(round)")
            try await store("replacement \(round)")
            try await Task.sleep(for: .milliseconds(300))
            heard.withLock { $0.removeAll() }
            try await store("replacement \(round)")
            try await Task.sleep(for: .milliseconds(300))
            #expect(heard.withLock { $0.isEmpty })
        }
    }
}

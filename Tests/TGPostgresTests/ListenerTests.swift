import Foundation
import TGPostgres
import TGTesting
import Testing

@Suite struct ListenerTests {
    func next(_ iterator: inout AsyncStream<PostgresListenerEvent>.Iterator, within limit: Duration = .seconds(5)) async -> PostgresListenerEvent? {
        let deadline = Task {
            try? await Task.sleep(for: limit)
        }
        defer { deadline.cancel() }
        return await iterator.next()
    }

    @Test func deliversNotificationsFromAnotherClient() async throws {
        try await TestDatabase.withFreshDatabase { client, url async throws in
            let listener = try PostgresListener(url: url, channels: ["tokengate_sessions"])
            defer { listener.stop() }
            var events = listener.events.makeAsyncIterator()
            // LISTEN runs on the listener's thread; notify until it has subscribed.
            let sender = Task {
                for index in 0..<50 {
                    try await client.notify(channel: "tokengate_sessions", payload: "logout:\(index)")
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            defer { sender.cancel() }
            let event = await events.next()
            guard case .notification(let channel, let payload) = event else {
                Issue.record("expected a notification, got \(String(describing: event))")
                return
            }
            #expect(channel == "tokengate_sessions")
            #expect(payload.hasPrefix("logout:"))
        }
    }

    @Test func listensAgainAfterItsBackendIsTerminated() async throws {
        try await TestDatabase.withFreshDatabase { client, url async throws in
            let listener = try PostgresListener(url: url, channels: ["tokengate_cache"])
            defer { listener.stop() }
            var events = listener.events.makeAsyncIterator()
            let sender = Task {
                while !Task.isCancelled {
                    try await client.notify(channel: "tokengate_cache", payload: "ping")
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            defer { sender.cancel() }
            #expect(await events.next() == .notification(channel: "tokengate_cache", payload: "ping"))
            try await client.query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tokengate-listener' AND datname = current_database()"
            )
            var sawReconnect = false
            var sawNotificationAfter = false
            while let event = await events.next() {
                if event == .reconnected {
                    sawReconnect = true
                } else if sawReconnect {
                    sawNotificationAfter = true
                    break
                }
            }
            #expect(sawReconnect)
            #expect(sawNotificationAfter)
        }
    }

    @Test func refusesChannelNamesThatAreNotPlainIdentifiers() {
        #expect(throws: PostgresError.self) { try PostgresListener(url: "postgresql://x", channels: ["bad\"; DROP"]) }
        #expect(throws: PostgresError.self) { try PostgresListener(url: "postgresql://x", channels: [""]) }
    }
}

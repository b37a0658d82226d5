public import Foundation
import TGPostgres

/// What the schema's `sessions_ended` trigger announces (`NOTIFY tokengate_session_ended`,
/// payload a session id) whenever a session row is deleted, by whatever deletes it.
public enum SessionEnd: Sendable, Equatable {
    /// This session ended.
    case ended(UUID)
    /// The connection was lost and is back: sessions may have ended meanwhile unannounced.
    case reconnected
}

/// Every instance's ended sessions as they commit, over a connection of its own (LISTEN): what
/// closes the streams a session opened, on whichever instance holds them (docs/proxy.md,
/// "Streams end with the session").
public final class SessionEndFeed: Sendable {
    /// The channel the schema's trigger notifies.
    public static let channel = "tokengate_session_ended"

    private let listener: PostgresListener
    public let events: AsyncStream<SessionEnd>

    /// Starts listening on `url` (not a pooled connection: LISTEN holds its connection), as
    /// `tokengate-session-listener` in `pg_stat_activity`.
    public init(url: String) throws {
        let listener = try StoreError.mappingNow {
            try PostgresListener(url: url, channels: [Self.channel], applicationName: "tokengate-session-listener")
        }
        self.listener = listener
        events = AsyncStream { continuation in
            let task = Task {
                for await event in listener.events {
                    switch event {
                    case .notification(_, let payload):
                        if let session = UUID(uuidString: payload) { continuation.yield(.ended(session)) }
                    case .reconnected:
                        continuation.yield(.reconnected)
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Stops listening; ``events`` ends.
    public func stop() { listener.stop() }
}

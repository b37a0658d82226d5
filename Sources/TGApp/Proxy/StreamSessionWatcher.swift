import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TGAuth
import TGBase
import TGProxy
import TGStore

/// Ends this instance's open proxied streams with their sessions (docs/proxy.md, "Streams end
/// with the session"), whatever ends a session and on whichever instance:
///
/// - a session row deleted anywhere (logout, back-channel logout, a rejected or revoked grant,
///   the sweeper, an operator) is announced to every instance at commit by the schema's trigger
///   (``SessionEndFeed``): its streams end at once;
/// - a session that expires while a stream is open (nothing deletes it until the sweeper runs):
///   every ``interval`` the sessions whose known end has passed are looked up again (a refresh
///   may have pushed the idle expiry on), and the streams of those that no longer live end;
/// - after the feed's connection was lost (announcements may have been missed), every open
///   stream's session is looked up again.
///
/// A lookup that fails (the database unreachable) leaves the streams open and is tried again on
/// the next round: nothing can log a session out meanwhile either.
struct StreamSessionWatcher: Service {
    static let interval: Duration = .seconds(1)
    let streams: OpenStreams
    let sessions: Sessions
    let clock: WallClock
    let databaseURL: String
    let logger: Logger
    let metrics: TokenGateMetrics?
    /// Whether the last lookup failed: a failing database is logged once, not every second.
    private let failing = Failing()

    final class Failing: Sendable {
        let now = Mutex(false)
    }

    init(streams: OpenStreams, sessions: Sessions, clock: WallClock, databaseURL: String, logger: Logger, metrics: TokenGateMetrics?) {
        self.streams = streams
        self.sessions = sessions
        self.clock = clock
        self.databaseURL = databaseURL
        self.logger = logger
        self.metrics = metrics
    }

    func run() async throws {
        let watcher = self
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await watcher.follow() }
                group.addTask { await watcher.checkExpiries() }
                await group.waitForAll()
            }
        }
    }

    /// Every instance's ended sessions, until cancelled.
    private func follow() async {
        let feed: SessionEndFeed
        do {
            feed = try SessionEndFeed(url: databaseURL)
        } catch {
            logger.error("cannot listen for ended sessions", metadata: ["error_type": "\(type(of: error))"])
            return
        }
        await withTaskCancellationHandler {
            for await event in feed.events {
                switch event {
                case .ended(let session):
                    let ended = streams.end(sessions: [session])
                    if ended > 0 {
                        metrics?.streamsEnded(ended, cause: "session_ended")
                        logger.info("streams ended with their session", metadata: ["streams": .stringConvertible(ended)])
                    }
                case .reconnected:
                    await recheck(streams.sessions)
                }
            }
        } onCancel: {
            feed.stop()
        }
    }

    /// The sessions whose known end passed, every ``interval``, until cancelled.
    private func checkExpiries() async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: Self.interval)
            } catch {
                return
            }
            let due = streams.due(at: clock.now())
            if !due.isEmpty { await recheck(due) }
        }
    }

    /// Looks `ids` up: the streams of a session that no longer lives end, the others' known end moves.
    func recheck(_ ids: [UUID]) async {
        guard !ids.isEmpty else { return }
        let live: [UUID: Date]
        do {
            live = try await sessions.liveUntil(ids)
        } catch {
            let first = failing.now.withLock { failing in
                defer { failing = true }
                return !failing
            }
            let metadata: Logger.Metadata = ["error_type": "\(type(of: error))"]
            if first {
                logger.warning("cannot look up the sessions of open streams; their streams stay open, trying again each second", metadata: metadata)
            } else {
                logger.debug("cannot look up the sessions of open streams", metadata: metadata)
            }
            return
        }
        if failing.now.withLock({ failing in
            defer { failing = false }
            return failing
        }) {
            logger.notice("the sessions of open streams are looked up again")
        }
        var gone: [UUID] = []
        for id in ids {
            if let until = live[id] { streams.extend(id, until: until) } else { gone.append(id) }
        }
        let ended = streams.end(sessions: gone)
        if ended > 0 {
            metrics?.streamsEnded(ended, cause: "session_expired")
            logger.info("streams ended with their session", metadata: ["streams": .stringConvertible(ended)])
        }
    }
}

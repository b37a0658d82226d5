import Foundation
import Logging
import TGStore

extension UpstreamTokens {
    /// Keeps this instance's ``cache`` coherent with every instance's changes, until cancelled:
    /// each notification drops what is held for its account; a lost connection (notifications
    /// may have been missed) drops everything once it is back.
    public func followInvalidations(databaseURL: String) async {
        let feed: InvalidationFeed
        do {
            feed = try InvalidationFeed(url: databaseURL)
        } catch {
            logger.error("cannot listen for cache invalidations", metadata: ["error_type": "\(type(of: error))"])
            return
        }
        await withTaskCancellationHandler {
            for await event in feed.events {
                switch event {
                case .account(let account):
                    cache.invalidate(accounts: [account])
                case .reconnected:
                    cache.invalidateAll()
                    logger.notice("cache dropped: the invalidation listener reconnected")
                    // The database may have failed over to a replica that missed the last commits.
                    Task { await rewriteRecentRotations() }
                }
            }
        } onCancel: {
            feed.stop()
        }
    }
}

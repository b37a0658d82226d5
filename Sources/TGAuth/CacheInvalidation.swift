import Foundation
import Logging
import TGPostgres

extension AuthService {
    /// The channel the schema's triggers notify (payload: an account id) whenever a session of an
    /// account ends or rotates, or the account, its grant or a cached token goes.
    public static let invalidationChannel = "tokengate_invalidate"

    /// Keeps this instance's ``cache`` coherent with every instance's changes, until cancelled:
    /// each notification drops what is held for its account; a lost connection (notifications
    /// may have been missed) drops everything once it is back.
    public func followInvalidations(databaseURL: String) async {
        let listener: PostgresListener
        do {
            listener = try PostgresListener(url: databaseURL, channels: [Self.invalidationChannel])
        } catch {
            logger.error("cannot listen for cache invalidations", metadata: ["error_type": "\(type(of: error))"])
            return
        }
        await withTaskCancellationHandler {
            for await event in listener.events {
                switch event {
                case .notification(_, let payload):
                    if let account = UUID(uuidString: payload) { cache.invalidate(accounts: [account]) }
                case .reconnected:
                    cache.invalidateAll()
                    logger.notice("cache dropped: the invalidation listener reconnected")
                }
            }
        } onCancel: {
            listener.stop()
        }
    }
}

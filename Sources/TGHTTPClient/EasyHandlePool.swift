import CCurl
import Foundation

/// Spare libcurl easy handles. Creating a handle and setting its options per request costs more
/// than the rest of a small request's setup; so a handle keeps the options that are the same for
/// every request of its client (set once, when it is made) and is lent again as it is. Every
/// option that differs between requests (URL, method, body, headers, deadline, callback data) is
/// set by each request in `HTTPClient.prepare`, so nothing of one request reaches the next.
final class EasyHandlePool: @unchecked Sendable {
    // Invariant: `spare` is only accessed with `lock` held; a handle in `spare` is attached to no
    // multi handle and owned by the pool alone.
    private let lock = NSLock()
    private var spare: [OpaquePointer] = []
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    deinit {
        for easy in spare { curl_easy_cleanup(easy) }
    }

    /// A handle; `fresh` when it was just made (its client's common options are not set yet).
    func take() -> (easy: OpaquePointer, fresh: Bool)? {
        if let easy = lock.withLock({ spare.popLast() }) { return (easy, false) }
        return curl_easy_init().map { ($0, true) }
    }

    /// Takes back a handle that is no longer attached to a multi handle. `reusable` false (its
    /// common options failed to set): it is destroyed.
    func give(_ easy: OpaquePointer, reusable: Bool) {
        let kept =
            reusable
            && lock.withLock {
                guard spare.count < capacity else { return false }
                spare.append(easy)
                return true
            }
        if !kept { curl_easy_cleanup(easy) }
    }
}

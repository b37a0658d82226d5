import CCurl
import Foundation

/// Spare libcurl easy handles. Creating and destroying a handle per request costs more than the
/// rest of a small request's setup; a returned handle is reset to libcurl's defaults (nothing of
/// its last request survives: options, headers, callbacks) and lent again.
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

    /// A handle with default options.
    func take() -> OpaquePointer? {
        if let easy = lock.withLock({ spare.popLast() }) { return easy }
        return curl_easy_init()
    }

    /// Takes back a handle that is no longer attached to a multi handle.
    func give(_ easy: OpaquePointer) {
        curl_easy_reset(easy)
        let kept = lock.withLock {
            guard spare.count < capacity else { return false }
            spare.append(easy)
            return true
        }
        if !kept { curl_easy_cleanup(easy) }
    }
}

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
    private var spare: [EasyHandle] = []
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    deinit {
        for handle in spare {
            curl_easy_cleanup(handle.easy)
            handle.errorBuffer.deallocate()
        }
    }

    /// A handle, its error buffer (`CURLOPT_ERRORBUFFER`, one per handle for its life) and what
    /// its last request left set (``LastRequest``); `fresh` when it was just made (its client's
    /// common options are not set yet).
    func take() -> (handle: EasyHandle, fresh: Bool)? {
        if let handle = lock.withLock({ spare.popLast() }) { return (handle, false) }
        guard let easy = curl_easy_init() else { return nil }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Self.errorBufferSize)
        errorBuffer.initialize(repeating: 0, count: Self.errorBufferSize)
        return (EasyHandle(easy: easy, errorBuffer: errorBuffer), true)
    }

    static let errorBufferSize = Int(CURL_ERROR_SIZE) + 1

    /// Takes back a handle that is no longer attached to a multi handle. `reusable` false (its
    /// common options failed to set): it is destroyed.
    func give(_ handle: EasyHandle, reusable: Bool) {
        let kept =
            reusable
            && lock.withLock {
                guard spare.count < capacity else { return false }
                spare.append(handle)
                return true
            }
        if !kept {
            curl_easy_cleanup(handle.easy)
            handle.errorBuffer.deallocate()
        }
    }
}

/// An easy handle as the pool lends it.
struct EasyHandle {
    let easy: OpaquePointer
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// What the handle's last request set of the options that differ between requests, so the
    /// next one sets only what changes (each `curl_easy_setopt` costs; a string option is copied).
    var last = LastRequest()
}

/// Per-request options a handle still has from its last request. The default (nothing known)
/// makes the next request set every one of them.
struct LastRequest {
    /// The URL text and the parsed origin (`CURLOPT_URL`, `CURLOPT_CURLU`), when the last request
    /// went to a parsed origin.
    var url: String?
    var origin: OpaquePointer?
    /// A GET without a body, a custom method or a whole-transfer timeout: `CURLOPT_HTTPGET` 1,
    /// `CURLOPT_CUSTOMREQUEST` and `CURLOPT_TIMEOUT_MS` unset, `CURLOPT_POSTFIELDSIZE_LARGE` -1.
    var plainGet = false
}

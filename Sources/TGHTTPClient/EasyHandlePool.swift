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
    private var spare: [(easy: OpaquePointer, errorBuffer: UnsafeMutablePointer<CChar>)] = []
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

    /// A handle and its error buffer (`CURLOPT_ERRORBUFFER`, one per handle for its life);
    /// `fresh` when it was just made (its client's common options are not set yet).
    func take() -> (easy: OpaquePointer, errorBuffer: UnsafeMutablePointer<CChar>, fresh: Bool)? {
        if let handle = lock.withLock({ spare.popLast() }) { return (handle.easy, handle.errorBuffer, false) }
        guard let easy = curl_easy_init() else { return nil }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Self.errorBufferSize)
        errorBuffer.initialize(repeating: 0, count: Self.errorBufferSize)
        return (easy, errorBuffer, true)
    }

    static let errorBufferSize = Int(CURL_ERROR_SIZE) + 1

    /// Takes back a handle that is no longer attached to a multi handle. `reusable` false (its
    /// common options failed to set): it is destroyed.
    func give(_ easy: OpaquePointer, errorBuffer: UnsafeMutablePointer<CChar>, reusable: Bool) {
        let kept =
            reusable
            && lock.withLock {
                guard spare.count < capacity else { return false }
                spare.append((easy, errorBuffer))
                return true
            }
        if !kept {
            curl_easy_cleanup(easy)
            errorBuffer.deallocate()
        }
    }
}

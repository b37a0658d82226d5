import CCurl
import TGBase

/// Spare libcurl easy handles. Creating a handle and setting its options per request costs more
/// than the rest of a small request's setup; so a handle keeps the options that are the same for
/// every request of its client (set once, when it is made) and is lent again as it is. Every
/// option that differs between requests (URL, method, body, headers, deadline, callback data) is
/// set by each request in `HTTPClient.prepare`, so nothing of one request reaches the next.
///
/// Two kinds, kept apart: a handle reads responses into a buffer libcurl allocates at its first
/// transfer and keeps for its life, of libcurl's 16 KiB, or, for a *compact* handle, of
/// ``compactReadBufferSize`` bytes. Of a 16 KiB buffer a small answer touches one 4 KiB page;
/// compact buffers share pages, two to a page: 2 KiB less resident memory per call in flight,
/// which is what a burst of thousands of calls to a slow API costs (docs/architecture.md,
/// "Memory under a burst"), against more reads (and write callbacks) for a large body. So the
/// client lends compact handles only above a number of transfers in flight
/// (`Configuration.compactReadsAbove`), and a compact handle comes back only to a request that
/// asks for one.
final class EasyHandlePool: @unchecked Sendable {
    // Invariant: `spare` and `spareCompact` are only accessed with `lock` held; a handle in either
    // is attached to no multi handle and owned by the pool alone.
    // A pthread lock, not Mutex: taken in libcurl's callbacks on the event threads too, where
    // ThreadSanitizer reports Mutex hand-offs with Swift tasks falsely (docs/c-libraries.md).
    private let lock = Lock()
    private var spare: [EasyHandle] = []
    private var spareCompact: [EasyHandle] = []
    private let capacity: Int

    /// A compact handle's read buffer (`CURLOPT_BUFFERSIZE`): libcurl allocates one byte more,
    /// so this makes a 2 KiB allocation.
    static let compactReadBufferSize = 2047

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Handles of both kinds waiting to be lent.
    var spareCount: Int { lock.withLock { spare.count + spareCompact.count } }

    deinit {
        for handle in spare + spareCompact { Self.destroy(handle) }
    }

    /// A handle of the kind asked for, its error buffer (`CURLOPT_ERRORBUFFER`, one per handle
    /// for its life) and what its last request left set (``LastRequest``); `fresh` when it was
    /// just made (its client's common options, the read buffer's size among them, are not set yet).
    /// A compact handle has no error buffer: it serves calls in a burst, thousands at once, and
    /// its failures are told by libcurl's code and the system's error (``Transfer``).
    func take(compact: Bool = false) -> (handle: EasyHandle, fresh: Bool)? {
        let kept = lock.withLock { compact ? spareCompact.popLast() : spare.popLast() }
        if let kept { return (kept, false) }
        guard let easy = curl_easy_init() else { return nil }
        var errorBuffer: UnsafeMutablePointer<CChar>?
        if !compact {
            errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Self.errorBufferSize)
            errorBuffer?.initialize(repeating: 0, count: Self.errorBufferSize)
        }
        return (EasyHandle(easy: easy, errorBuffer: errorBuffer, compact: compact), true)
    }

    /// What libcurl asks for (it writes at most this much, its NUL included): 256 bytes, one
    /// allocation size class below 257, and one per easy handle.
    static let errorBufferSize = Int(CURL_ERROR_SIZE)

    /// Takes back a handle that is no longer attached to a multi handle. `reusable` false (its
    /// common options failed to set): it is destroyed. Each kind keeps at most `capacity`.
    func give(_ handle: consuming EasyHandle, reusable: Bool) {
        // Moved into the pool, not copied: a copy counted the references of its last URL and
        // head buffer once more, and the caller's copy was destroyed (every call). So no
        // `withLock` closure, which could only copy what it captures.
        if reusable {
            lock.lock()
            if handle.compact ? spareCompact.count < capacity : spare.count < capacity {
                if handle.compact { spareCompact.append(handle) } else { spare.append(handle) }
                lock.unlock()
                return
            }
            lock.unlock()
        }
        Self.destroy(handle)
    }

    private static func destroy(_ handle: EasyHandle) {
        curl_easy_cleanup(handle.easy)
        handle.errorBuffer?.deallocate()
        handle.blockMemory.start?.deallocate()
    }
}

/// An easy handle as the pool lends it.
struct EasyHandle {
    let easy: OpaquePointer
    /// libcurl's message of a failure; none on a compact handle.
    let errorBuffer: UnsafeMutablePointer<CChar>?
    /// Its read buffer is ``EasyHandlePool/compactReadBufferSize`` bytes (else libcurl's 16 KiB).
    let compact: Bool
    /// What the handle's last request set of the options that differ between requests, so the
    /// next one sets only what changes (each `curl_easy_setopt` costs; a string option is copied).
    var last = LastRequest()
    /// The memory of its last request's header list and the buffer its last response head was
    /// kept in (emptied by the next head's status line), for the next request: two allocations a
    /// call fewer. A spare handle keeps about a kilobyte of them; a handle lent out needs both
    /// anyway.
    var blockMemory = HeaderBlockMemory()
    var headBytes: [UInt8] = []
}

/// Memory for a header list built in one block (``Transfer``), reused while it is large enough.
struct HeaderBlockMemory {
    private(set) var start: UnsafeMutableRawPointer?
    private(set) var byteCount = 0

    /// At least `count` bytes, aligned for list nodes: this memory, or a larger allocation that
    /// replaces it (the old one is freed: nothing points into it between requests).
    mutating func bytes(_ count: Int) -> UnsafeMutableRawPointer {
        if let start, byteCount >= count { return start }
        start?.deallocate()
        // Rounded up, so a request a few bytes longer than the last one does not reallocate.
        let size = (count + 127) & ~127
        let made = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<curl_slist>.alignment)
        start = made
        byteCount = size
        return made
    }
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

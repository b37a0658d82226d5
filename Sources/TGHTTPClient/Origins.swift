import CCurl
import Synchronization

/// The origins (`scheme://authority/`) a client's requests go to, each parsed by libcurl once
/// (`CURLU`) and handed to every transfer there (`CURLOPT_CURLU`): libcurl otherwise parses the
/// URL again on every transfer. A client's calls go to a few origins (an API, a provider's
/// endpoints); past `capacity`, a request's origin is parsed per transfer as before.
final class Origins: Sendable {
    /// One origin: its URL as text and libcurl's parse of it.
    final class Origin: @unchecked Sendable {
        // Invariant: immutable once made; libcurl only reads (copies) `parsed` when a transfer
        // starts, on the client's thread, and it lives as long as the client (origins are never
        // removed), so no transfer can start from a freed one.
        let url: String
        let parsed: OpaquePointer?

        /// `parse` false: libcurl parses `url` on every transfer (nothing kept).
        init(url: String, parse: Bool = true) {
            self.url = url
            let handle = parse ? curl_url() : nil
            if let handle, curl_url_set(handle, CURLUPART_URL, url, 0) != CURLUE_OK {
                curl_url_cleanup(handle)
                parsed = nil
            } else {
                parsed = handle
            }
        }

        deinit {
            if let parsed { curl_url_cleanup(parsed) }
        }
    }

    private struct Key: Hashable {
        var authority: String
        var secure: Bool
    }

    private let known = Mutex<[Key: Origin]>([:])
    let capacity: Int

    init(capacity: Int = 16) {
        self.capacity = capacity
    }

    /// The origin of `authority` (`https` when `secure`). A new one is parsed under the lock: once
    /// per origin, and never for one past the capacity.
    func origin(authority: String, secure: Bool) -> Origin {
        let key = Key(authority: authority, secure: secure)
        return known.withLock { known in
            if let origin = known[key] { return origin }
            let url = (secure ? "https://" : "http://") + authority + "/"
            guard known.count < capacity else { return Origin(url: url, parse: false) }
            let made = Origin(url: url)
            known[key] = made
            return made
        }
    }
}

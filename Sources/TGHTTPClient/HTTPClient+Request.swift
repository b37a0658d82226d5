import CCurl
import CCurlShims
import Foundation
import HTTPTypes
import Synchronization
import TGBase

/// A request body.
public enum HTTPClientRequestBody: Sendable {
    case none
    case bytes([UInt8])
    /// Produced while sending: `length` when known (else chunked transfer encoding); the closure
    /// writes chunks and returns at the end. Writing waits while the connection is behind.
    case stream(length: Int?, @Sendable (HTTPClientBodyWriter) async throws -> Void)
}

extension HTTPClientRequestBody {
    var isNone: Bool {
        if case .none = self { true } else { false }
    }
}

/// Writes the chunks of a streamed request body.
public struct HTTPClientBodyWriter: Sendable {
    let channel: BodyChannel
    let resume: @Sendable () -> Void

    /// Queues `bytes`; waits while more than the buffer size is queued. Throws
    /// ``HTTPClientError/cancelled`` once the transfer has ended.
    public func write(_ bytes: [UInt8]) async throws {
        guard !bytes.isEmpty else { return }
        guard await channel.send(bytes) else { throw HTTPClientError.cancelled }
        resume()
    }
}

extension HTTPClient {
    /// Sets the easy handle up for `request`; throws before anything is sent when the URL is
    /// refused.
    /// `timeout` nil: no deadline for the whole exchange (the caller keeps its own).
    func prepare(_ transfer: Transfer, _ request: HTTPRequest, body: HTTPClientRequestBody, timeout: Duration?) throws {
        let url = try validatedURL(scheme: request.scheme, authority: request.authority, path: request.path)
        let hasContentType = request.headerFields[.contentType] != nil
        try prepare(transfer, method: request.method.rawValue, url: url, body: body, timeout: timeout, hasContentType: hasContentType) {
            for field in request.headerFields where field.name != .contentLength && field.name != .transferEncoding {
                transfer.appendHeader(name: field.name.rawName, value: field.value)
            }
        }
    }

    /// The same for header lines built by the caller (see ``HeaderLines``).
    func prepare(_ transfer: Transfer, _ request: borrowing LoopRequest, body: HTTPClientRequestBody, timeout: Duration?) throws {
        let url: RequestURL
        // The origin the loop's last call went to is not checked again (a proxy's calls on one
        // loop all go to one API); the path is, on every call.
        if let last = lastLoopOrigin, last.scheme == request.scheme, last.authority == request.authority {
            guard Self.isCleanPath(request.path) else { throw HTTPClientError.invalidURL }
            url = RequestURL(url: last.url.url, target: Self.target(request.path), parsed: last.url.parsed)
        } else {
            url = try validatedURL(scheme: request.scheme, authority: request.authority, path: request.path)
            // Only a split origin and target can be reused (a client that follows redirects
            // sends whole URLs).
            if url.target != nil { lastLoopOrigin = LoopOrigin(scheme: request.scheme, authority: request.authority, url: url) }
        }
        // The two parts captured, not the request: a closure capturing it would copy it whole.
        try prepare(
            transfer,
            method: request.method,
            url: url,
            body: body,
            timeout: timeout,
            hasContentType: request.headers.hasContentType
        ) { [headers = request.headers, shared = request.sharedHeaders] in
            transfer.useHeaderLines(headers, shared: shared)
        }
    }

    /// `addHeaders` appends the request's own header lines to the transfer.
    private func prepare(
        _ transfer: Transfer,
        method: String,
        url: RequestURL,
        body: HTTPClientRequestBody,
        timeout: Duration?,
        hasContentType: Bool,
        addHeaders: () -> Void
    ) throws {
        let easy = transfer.easy
        if transfer.needsCommonOptions {
            try setCommonOptions(easy, errorBuffer: transfer.errorBuffer, compact: transfer.readsCompact)
            transfer.needsCommonOptions = false
        }
        let userdata = Unmanaged.passUnretained(transfer).toOpaque()
        // Every option that differs between requests is set here, each time (the handle keeps
        // the last request's otherwise; see `EasyHandlePool`). The first failing one, if any
        // (libcurl copies string options, so the C strings need to live only for the call).
        var failed = CURLE_OK
        func check(_ code: CURLcode) { if failed == CURLE_OK { failed = code } }
        func long(_ option: CURLoption, _ value: Int) { check(CShims_curl_easy_setopt_long(easy, option, value)) }
        func string(_ option: CURLoption, _ value: String) {
            check(value.withCString { CShims_curl_easy_setopt_ptr(easy, option, $0) })
        }
        // What the handle's last request left set is set again only where this one differs; until
        // this one is set up, nothing is known (a failure leaves the next request to set all).
        let last = transfer.lastRequest
        transfer.lastRequest = LastRequest()
        if url.parsed == nil || url.parsed != last.origin || url.url != last.url {
            string(CURLOPT_URL, url.url)
            // The parsed origin, when there is one, is what libcurl connects to (it takes precedence
            // over the URL's text, which stays what libcurl reports).
            check(CShims_curl_easy_setopt_ptr(easy, CURLOPT_CURLU, url.parsed.map { UnsafeMutableRawPointer($0) }))
        }
        if let target = url.target {
            string(CURLOPT_REQUEST_TARGET, target)
        } else {
            check(CShims_curl_easy_setopt_ptr(easy, CURLOPT_REQUEST_TARGET, nil))
        }
        check(CShims_curl_easy_setopt_ptr(easy, CURLOPT_PRIVATE, userdata))
        check(CShims_curl_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, userdata))
        check(CShims_curl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, userdata))
        check(CShims_curl_easy_setopt_ptr(easy, CURLOPT_READDATA, userdata))
        let plainGet = method == "GET" && timeout == nil && body.isNone
        if !(plainGet && last.plainGet) {
            long(CURLOPT_TIMEOUT_MS, timeout.map { max(1, Int($0.wholeMilliseconds)) } ?? 0)
            // GET, no body, no custom method: what the options below change.
            long(CURLOPT_HTTPGET, 1)
            check(CShims_curl_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, nil))
            check(CShims_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, -1))
        }

        var hasBody = false
        // Appended after the request's own lines (which come first when the caller built them).
        var sendsChunked = false
        switch body {
        case .none:
            break
        case .bytes(let bytes):
            hasBody = true
            transfer.uploadBytes = bytes
            check(CShims_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count)))
        case .stream(let length, let produce):
            hasBody = true
            let channel = BodyChannel(highWater: 256 * 1024)
            transfer.uploadChannel = channel
            if let length {
                check(CShims_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(length)))
            } else {
                sendsChunked = true
            }
            // Strong, as the task below: a weak reference would give the client a side table (see
            // `CurlSocket.client`); the producer holds the client until the upload ends.
            let resume: @Sendable () -> Void = { self.submit(.resume(transfer)) }
            let writer = HTTPClientBodyWriter(channel: channel, resume: resume)
            Task {
                do {
                    try await produce(writer)
                    channel.finish()
                } catch {
                    channel.finish(error: error)
                    self.cancel(transfer)
                }
                resume()
            }
        }
        if hasBody {
            long(CURLOPT_POST, 1)
            if method != "POST" { string(CURLOPT_CUSTOMREQUEST, method) }
        } else if method == "HEAD" {
            long(CURLOPT_NOBODY, 1)
        } else if method != "GET" {
            string(CURLOPT_CUSTOMREQUEST, method)
        }
        addHeaders()
        if sendsChunked { transfer.appendHeader(.chunked) }
        // No "Expect: 100-continue" round trip; no content-type guessed for bodies.
        transfer.appendHeader(.noExpect)
        if hasBody, !hasContentType { transfer.appendHeader(.noContentType) }
        transfer.finishHeaders()
        check(CShims_curl_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, transfer.headerList))
        if failed != CURLE_OK { throw HTTPClientError.from(failed, detail: "setting up the request") }
        transfer.lastRequest = LastRequest(url: url.parsed == nil ? nil : url.url, origin: url.parsed, plainGet: plainGet)
    }

    /// The options every request of this client shares, set once per easy handle.
    private func setCommonOptions(_ easy: OpaquePointer, errorBuffer: UnsafeMutablePointer<CChar>?, compact: Bool) throws {
        var failed = CURLE_OK
        func check(_ code: CURLcode) { if failed == CURLE_OK { failed = code } }
        func long(_ option: CURLoption, _ value: Int) { check(CShims_curl_easy_setopt_long(easy, option, value)) }
        func string(_ option: CURLoption, _ value: String) {
            check(value.withCString { CShims_curl_easy_setopt_ptr(easy, option, $0) })
        }
        string(CURLOPT_PROTOCOLS_STR, "http,https")
        if let errorBuffer { check(CShims_curl_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)) }
        // A redirect may not drop to plain HTTP (except to loopback under the test option).
        string(CURLOPT_REDIR_PROTOCOLS_STR, configuration.allowPlainHTTPToLoopbackForTesting ? "http,https" : "https")
        // Never route through a proxy named by the environment (http_proxy, …): TokenGate talks to
        // the hosts its configuration names, directly.
        string(CURLOPT_PROXY, "")
        // Set, so libcurl does not read `no_proxy` from the environment on every transfer (with no
        // proxy it excludes nothing anyway).
        string(CURLOPT_NOPROXY, "")
        // HTTP/1.1: pausing a transfer (back-pressure) is dependable there in libcurl 7.88.
        long(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        long(CURLOPT_NOSIGNAL, 1)
        // Only before the handle's first transfer: libcurl 7.88 allocates the buffer then, for
        // the handle's life, and refuses a new size afterwards.
        if compact { long(CURLOPT_BUFFERSIZE, EasyHandlePool.compactReadBufferSize) }
        long(CURLOPT_SSL_VERIFYPEER, 1)
        long(CURLOPT_SSL_VERIFYHOST, 2)
        if let caFile = configuration.caFile { string(CURLOPT_CAINFO, caFile) }
        long(CURLOPT_FOLLOWLOCATION, configuration.followRedirects ? 1 : 0)
        long(CURLOPT_MAXREDIRS, 5)
        long(CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(configuration.connectTimeout.wholeMilliseconds)))
        check(CShims_curl_easy_setopt_write_function(easy, CURLOPT_HEADERFUNCTION, headerCallback))
        check(CShims_curl_easy_setopt_write_function(easy, CURLOPT_WRITEFUNCTION, writeCallback))
        check(CShims_curl_easy_setopt_read_function(easy, CURLOPT_READFUNCTION, readCallback))
        // Sockets are closed through the client, which takes them out of the loop's epoll set.
        check(CShims_curl_easy_setopt_closesocket_function(easy, closeSocketCallback))
        check(CShims_curl_easy_setopt_ptr(easy, CURLOPT_CLOSESOCKETDATA, Unmanaged.passUnretained(self).toOpaque()))
        if failed != CURLE_OK { throw HTTPClientError.from(failed, detail: "setting up the connection options") }
    }

    /// The origin (scheme and authority) the last request started on the loop went to, checked,
    /// with its URL: one reference to copy where a tuple of five strings was copied on every call.
    final class LoopOrigin {
        let scheme: String
        let authority: String
        let url: RequestURL

        init(scheme: String, authority: String, url: RequestURL) {
            self.scheme = scheme
            self.authority = authority
            self.url = url
        }
    }

    /// What libcurl gets for a request: the URL it parses, and the request target it sends as
    /// given (nil: the URL's own path and query).
    struct RequestURL {
        var url: String
        var target: String?
        /// libcurl's parse of `url` (then only the origin), kept by the client (see ``Origins``).
        var parsed: OpaquePointer?
    }

    /// The URL for `request`, or a refusal: only http/https, and http only to loopback with the
    /// test option.
    ///
    /// A client that follows no redirects gives libcurl only the origin to parse and sends the
    /// path and query as the request target (`CURLOPT_REQUEST_TARGET`): libcurl parses a whole
    /// URL on every transfer otherwise (about 2 % of a proxied call, and as much again for the
    /// origin alone, which ``Origins`` keeps parsed), and its parser rewrites
    /// what it reads (lowercased escapes, an empty `?` dropped), which a proxy must not do. A
    /// fragment goes no further than it would through libcurl's parser.
    func validatedURL(scheme: String?, authority: String?, path: String?) throws -> RequestURL {
        guard let scheme, let authority, !authority.isEmpty else {
            throw HTTPClientError.invalidURL
        }
        let path = path ?? "/"
        // No user info (`@`) in the authority; no spaces or control characters anywhere.
        guard Self.isCleanPath(path), Self.isClean(authority, refusing: UInt8(ascii: "@")) else { throw HTTPClientError.invalidURL }
        let secure: Bool
        if Self.isScheme(scheme, "https") {
            secure = true
        } else if Self.isScheme(scheme, "http") {
            guard configuration.allowPlainHTTPToLoopbackForTesting else { throw HTTPClientError.insecureURLRefused }
            // The last loopback authority allowed, remembered: a proxy's calls all go to one.
            if lastLoopbackAuthority.withLock({ $0 != authority }) {
                guard Loopback.isLoopback(host: Self.host(of: authority)) else { throw HTTPClientError.insecureURLRefused }
                lastLoopbackAuthority.withLock { $0 = authority }
            }
            secure = false
        } else {
            throw HTTPClientError.invalidURL
        }
        if !configuration.followRedirects {
            let origin = origins.origin(authority: authority, secure: secure)
            return RequestURL(url: origin.url, target: Self.target(path), parsed: origin.parsed)
        }
        var url = secure ? "https://" : "http://"
        url.reserveCapacity(8 + authority.utf8.count + path.utf8.count)
        url += authority
        url += path
        return RequestURL(url: url)
    }

    /// A path (and query) as a request target: it starts with `/` and holds no space or control byte.
    static func isCleanPath(_ path: String) -> Bool {
        path.utf8.first == UInt8(ascii: "/") && isClean(path)
    }

    /// The request target of a clean path: up to its fragment, which goes no further.
    static func target(_ path: String) -> String {
        // `memchr` on the bytes in place (the view's `firstIndex` walked them by index, ~200
        // instructions for a short path, on every call).
        var path = path
        let end = path.withUTF8 { bytes -> Int? in
            guard let base = bytes.baseAddress, let found = memchr(base, Int32(UInt8(ascii: "#")), bytes.count) else { return nil }
            return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
        }
        guard let end else { return path }
        return String(decoding: path.utf8.prefix(end), as: UTF8.self)
    }

    /// No space, control byte or DEL in `text` (nor `refused`, if given). On the bytes in place:
    /// every request's authority and path pass here.
    private static func isClean(_ text: String, refusing refused: UInt8 = 0x7F) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { isClean($0, refusing: refused) }
            ?? Array(text.utf8).withUnsafeBufferPointer { isClean($0, refusing: refused) }
    }

    private static func isClean(_ bytes: UnsafeBufferPointer<UInt8>, refusing refused: UInt8) -> Bool {
        for byte in bytes where byte <= 0x20 || byte == 0x7F || byte == refused { return false }
        return true
    }

    /// `scheme` is `expected` (lowercase ASCII), in any case.
    private static func isScheme(_ scheme: String, _ expected: StaticString) -> Bool {
        scheme.utf8.withContiguousStorageIfAvailable { isScheme($0, expected) }
            ?? Array(scheme.utf8).withUnsafeBufferPointer { isScheme($0, expected) }
    }

    private static func isScheme(_ actual: UnsafeBufferPointer<UInt8>, _ expected: StaticString) -> Bool {
        guard actual.count == expected.utf8CodeUnitCount else { return false }
        for index in 0..<actual.count where actual[index] | 0x20 != expected.utf8Start[index] { return false }
        return true
    }

    static func host(of authority: String) -> String {
        if authority.hasPrefix("["), let end = authority.firstIndex(of: "]") {
            return String(authority[authority.index(after: authority.startIndex)..<end])
        }
        return String(authority[..<(authority.firstIndex(of: ":") ?? authority.endIndex)])
    }

}

import CCurl
import CCurlShims
import Foundation
public import HTTPTypes
import Synchronization

/// One request in flight: its easy handle and everything libcurl reads or writes through
/// callbacks. Created on the caller's task, then owned by the event thread once added. As it is,
/// a transfer keeps the whole body for ``HTTPClient/send(_:body:timeout:maxResponseBodySize:)``;
/// ``LoopExchange``, the one subclass, is a transfer driven and read on the client's loop (one
/// object for both: no second allocation, no reference from one to the other). Public only as
/// that class's superclass: nothing of it is.
public class Transfer: @unchecked Sendable {
    // Invariants:
    // - `easy`, `headerList`, `errorBuffer`, and the response-parsing fields (`status`,
    //   `headerFields`, `body`, `tooLarge`, `headDelivered`) are used during setup on the
    //   submitting task, then only on the event thread (libcurl calls callbacks there).
    // - `waiters` (the continuation, `finished`, `cancelRequested`) is a Mutex: no lock object
    //   per transfer; the continuation is resumed exactly once.
    // - After ``giveBackHandle()`` (the transfer is out of the multi handle and done) nothing
    //   touches `easy` or `errorBuffer`: another transfer may have the handle.

    let easy: OpaquePointer
    /// The largest body kept (a buffered transfer's).
    let bufferLimit: Int
    private(set) var headerList: UnsafeMutablePointer<curl_slist>?
    /// Lines waiting to become `headerBlock` (see ``useHeaderLines(_:)``).
    private var pendingLines: HeaderLines?
    /// The header list's nodes and text in one allocation, when built from ``HeaderLines``.
    private var headerBlock: UnsafeMutableRawPointer?
    /// The memory the block is built in: the handle's, kept from its last request (see
    /// ``EasyHandle``), and given back with it.
    private var blockMemory: HeaderBlockMemory
    /// Lines many requests share, which the list ends with (see ``SharedHeaderLines``); kept
    /// until the transfer is done with them.
    private var sharedLines: SharedHeaderLines?
    /// The handle's own (see `EasyHandlePool`), cleared for each request.
    let errorBuffer: UnsafeMutablePointer<CChar>?
    /// What the handle's previous request left set; updated by `HTTPClient.prepare` (event
    /// thread or the submitting task, before the transfer is added).
    var lastRequest: LastRequest
    var status = 0
    /// The current header block as received; parsed off the event thread (see `RawHead`).
    /// Appended to once per header line, so its dynamic exclusivity check is off: only libcurl's
    /// header callback on the event thread writes it, and `finish`/`deliverHead` on that thread
    /// read it between callbacks (the invariants above), so two accesses never overlap.
    @exclusivity(unchecked) var headBytes: [UInt8] = []
    /// What the proxy asks of the head, gathered as its lines arrive.
    var headFacts = RawHead.Facts()
    var body: [UInt8] = []
    var tooLarge = false
    var headDelivered = false
    /// On the loop: a head announcing a body of at most this many bytes waits for the body (see
    /// `wholeBodyUpTo` of ``HTTPClient/startOnLoop(_:body:headTimeout:idleTimeout:wholeBodyUpTo:)``).
    var holdHeadUpTo = 0
    /// The head is complete but waits for the body (`finish` hands both over).
    var headHeld = false
    /// Request body source: fixed bytes (with a read offset) or a channel fed by the caller.
    var uploadBytes: [UInt8] = []
    var uploadOffset = 0
    var uploadChannel: BodyChannel?
    /// Set on the event thread when a callback paused the transfer.
    var pausedForWrite = false
    var pausedForRead = false
    /// The idle timeout in nanoseconds of an exchange with a streamed request body (0: none; see
    /// ``HTTPClient/startOnLoop(_:body:headTimeout:idleTimeout:wholeBodyUpTo:)``), and its
    /// deadline once the transfer runs. Event thread.
    var idleTimeout: Int64 = 0
    /// Its index in the client's active transfers; -1 when not among them (loop thread only).
    var activeIndex = -1
    /// On the loop: when its exchange's head is due (``HTTPClient/watchHead(of:until:)``); 0 once
    /// it arrived, or for none.
    var headDeadline: Int64 = 0
    var idle: IdleDeadline?
    /// Only connects (`CURLOPT_CONNECT_ONLY`), and its connection outlives the transfer (``UpstreamTunnel``).
    var keepsConnection: Bool { false }

    private struct Waiters {
        var completion: CheckedContinuation<(RawHead, [UInt8]), any Error>?
        var finished = false
        var cancelRequested = false
    }
    private let waiters = Mutex(Waiters())

    private let handles: EasyHandlePool

    /// The handle is new: the client's common options are not set on it yet (see `EasyHandlePool`).
    var needsCommonOptions: Bool

    /// Its handle reads the response in ``EasyHandlePool/compactReadBufferSize`` pieces.
    let readsCompact: Bool

    init(bufferLimit: Int, handles: EasyHandlePool, compact: Bool = false) throws {
        guard var taken = handles.take(compact: compact) else {
            throw HTTPClientError(.transport, detail: "curl_easy_init failed")
        }
        easy = taken.handle.easy
        errorBuffer = taken.handle.errorBuffer
        lastRequest = taken.handle.last
        blockMemory = taken.handle.blockMemory
        readsCompact = taken.handle.compact
        needsCommonOptions = taken.fresh
        self.bufferLimit = bufferLimit
        self.handles = handles
        errorBuffer?[0] = 0
        // Moved, not copied: the handle's buffer stays uniquely referenced, so the first header
        // line fills it instead of copying it.
        swap(&headBytes, &taken.handle.headBytes)
    }

    deinit {
        // The client removed the handle from its multi handle before releasing the transfer.
        giveBackHandle()
    }

    private var handleGiven = false

    /// Gives the easy handle (with its header list's memory and head buffer) back to the pool,
    /// once: at the end of an exchange on the loop, whose object may live on while its body is
    /// read, or else when the transfer goes.
    func giveBackHandle() {
        guard !handleGiven else { return }
        handleGiven = true
        if headerBlock == nil, let headerList, sharedLines == nil {
            curl_slist_free_all(headerList)
        }
        headerBlock = nil
        headerList = nil
        // The head's buffer goes back as it is (the next status line empties it, keeping its
        // capacity; a relayed head that still holds it makes that line copy it instead).
        var handle = EasyHandle(easy: easy, errorBuffer: errorBuffer, compact: readsCompact, last: lastRequest, blockMemory: blockMemory)
        swap(&handle.headBytes, &headBytes)
        handles.give(handle, reusable: !needsCommonOptions)
    }

    /// A line of the client's own (`Expect:` and the like). With caller-built lines pending it
    /// waits for ``finishHeaders()`` (appending it to the caller's buffer would copy that buffer,
    /// which the caller's request still shares).
    func appendHeader(_ line: ClientLines) {
        if pendingLines != nil {
            clientLines.insert(line)
            return
        }
        line.forEachLine { text in
            headerList = text.withUTF8Buffer { bytes in
                withUnsafeTemporaryAllocation(of: CChar.self, capacity: bytes.count + 1) { buffer in
                    UnsafeMutableRawBufferPointer(buffer).copyMemory(from: UnsafeRawBufferPointer(bytes))
                    buffer[bytes.count] = 0
                    return curl_slist_append(headerList, buffer.baseAddress)
                }
            }
        }
    }

    /// The client's own lines, each at most once, in this order: one byte in the transfer (which
    /// lives as long as its call, thousands at once under a burst) instead of three strings.
    struct ClientLines: OptionSet {
        let rawValue: UInt8
        /// `Transfer-Encoding: chunked`: a streamed body of unknown length.
        static let chunked = ClientLines(rawValue: 1)
        /// `Expect:`: no `100-continue` round trip.
        static let noExpect = ClientLines(rawValue: 2)
        /// `Content-Type:`: libcurl adds none of its own to a body.
        static let noContentType = ClientLines(rawValue: 4)

        var count: Int { rawValue.nonzeroBitCount }

        /// The lines' bytes, each with its NUL.
        var byteCount: Int {
            var total = 0
            forEachLine { total += $0.utf8CodeUnitCount + 1 }
            return total
        }

        func forEachLine(_ body: (StaticString) -> Void) {
            if contains(.chunked) { body("Transfer-Encoding: chunked") }
            if contains(.noExpect) { body("Expect:") }
            if contains(.noContentType) { body("Content-Type:") }
        }
    }
    private var clientLines = ClientLines()

    /// Header lines built by the caller: with the client's own lines they become one block
    /// (list nodes and text in a single allocation) in ``finishHeaders()``, instead of two
    /// allocations per line through `curl_slist_append`.
    /// `shared`, if any, ends the list: its lines are linked to, not copied.
    func useHeaderLines(_ lines: HeaderLines, shared: SharedHeaderLines? = nil) {
        precondition(headerList == nil, "header lines come first")
        pendingLines = lines
        sharedLines = shared
    }

    /// The header list is complete: lines given to ``useHeaderLines(_:shared:)`` become its
    /// block, followed by the shared lines.
    func finishHeaders() {
        guard let lines = pendingLines else { return }
        pendingLines = nil
        let block = Self.headerBlock(lines, clientLines, then: sharedLines?.first, in: &blockMemory)
        clientLines = []
        headerBlock = block?.block
        headerList = block?.first ?? sharedLines?.first
    }

    /// `lines` and then `clientLines` as libcurl's list: the nodes and their text in one
    /// allocation, `memory`'s when it is large enough (else it is replaced by a larger one), the
    /// last node pointing to `next`. Nil when there is no line.
    static func headerBlock(
        _ lines: HeaderLines,
        _ clientLines: ClientLines = [],
        then next: UnsafeMutablePointer<curl_slist>?,
        in memory: inout HeaderBlockMemory
    ) -> (block: UnsafeMutableRawPointer, first: UnsafeMutablePointer<curl_slist>)? {
        let count = lines.lineCount + clientLines.count
        guard count > 0 else { return nil }
        let nodeBytes = count * MemoryLayout<curl_slist>.stride
        let textBytes = lines.storage.count + clientLines.byteCount
        let block = memory.bytes(nodeBytes + textBytes)
        let text = (block + nodeBytes).bindMemory(to: CChar.self, capacity: textBytes)
        lines.storage.withUnsafeBytes { UnsafeMutableRawPointer(text).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        var end = lines.storage.count
        clientLines.forEachLine { line in
            line.withUTF8Buffer { UnsafeMutableRawPointer(text + end).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            end += line.utf8CodeUnitCount
            text[end] = 0
            end += 1
        }
        let nodes = block.bindMemory(to: curl_slist.self, capacity: count)
        // Each of the `count` lines ends in its NUL: `strlen` steps from one to the next.
        var start = 0
        for index in 0..<count {
            (nodes + index).initialize(to: curl_slist(data: text + start, next: index + 1 < count ? nodes + index + 1 : next))
            start += strlen(text + start) + 1
        }
        return (block, nodes)
    }

    /// Appends `name: value` (libcurl copies the line), built in place without a Swift string.
    func appendHeader(name: String, value: String) {
        var name = name
        var value = value
        name.withUTF8 { name in
            value.withUTF8 { value in
                let length = name.count + 2 + value.count
                withUnsafeTemporaryAllocation(of: CChar.self, capacity: length + 1) { line in
                    let bytes = UnsafeMutableRawBufferPointer(line)
                    bytes.copyMemory(from: UnsafeRawBufferPointer(name))
                    bytes[name.count] = UInt8(ascii: ":")
                    bytes[name.count + 1] = UInt8(ascii: " ")
                    UnsafeMutableRawBufferPointer(rebasing: bytes[(name.count + 2)...]).copyMemory(from: UnsafeRawBufferPointer(value))
                    bytes[length] = 0
                    headerList = curl_slist_append(headerList, line.baseAddress)
                }
            }
        }
    }

    // MARK: Completion (any thread, under `lock`)

    func awaitCompletion(_ continuation: CheckedContinuation<(RawHead, [UInt8]), any Error>) {
        waiters.withLock { $0.completion = continuation }
    }

    /// Marks the transfer cancelled; true if it had not finished yet.
    func requestCancel() -> Bool {
        waiters.withLock {
            $0.cancelRequested = true
            return !$0.finished
        }
    }

    var isCancelRequested: Bool { waiters.withLock { $0.cancelRequested } }

    /// Headers are complete (event thread): an exchange on the loop gets the head now (a buffered
    /// call waits for the end).
    func deliverHead() {
        headDelivered = true
    }

    /// The head as received so far.
    var receivedHead: RawHead { RawHead(status: status, bytes: headBytes, facts: headFacts) }

    /// The transfer's end as an error, nil for a complete body (`override` decides when given).
    func outcome(_ result: CURLcode, _ override: HTTPClientError?) -> HTTPClientError? {
        override ?? (tooLarge ? .responseTooLarge : result == CURLE_OK ? nil : HTTPClientError.from(result, detail: failureDetail(result)))
    }

    /// What went wrong in libcurl's words: the message it left in the error buffer, else (a
    /// compact handle has none) the code's text and the system's error of the last socket call.
    func failureDetail(_ result: CURLcode) -> String {
        if let errorBuffer, errorBuffer[0] != 0 { return String(cString: errorBuffer) }
        var text = String(cString: curl_easy_strerror(result))
        var systemError = 0
        if CShims_curl_easy_getinfo_long(easy, CURLINFO_OS_ERRNO, &systemError) == CURLE_OK, systemError != 0 {
            text += ": " + String(cString: strerror(Int32(systemError)))
        }
        return text
    }

    /// The transfer ended (event thread): resume whoever waits, exactly once.
    func finish(_ result: CURLcode, error override: HTTPClientError? = nil) {
        stopSending()
        let (completion, cancelled): (CheckedContinuation<(RawHead, [UInt8]), any Error>?, Bool) = waiters.withLock {
            guard !$0.finished else { return (nil, false) }
            $0.finished = true
            let taken = ($0.completion, $0.cancelRequested)
            $0.completion = nil
            return taken
        }
        let error: HTTPClientError?
        if let override {
            error = override
        } else if cancelled {
            error = .cancelled
        } else if tooLarge {
            error = .responseTooLarge
        } else if result != CURLE_OK {
            error = HTTPClientError.from(result, detail: failureDetail(result))
        } else {
            error = nil
        }
        if let error {
            completion?.resume(throwing: error)
            return
        }
        completion?.resume(returning: (receivedHead, body))
    }

    /// The transfer's own deadline stops, and a producer still writing the request body stops
    /// (its write throws `cancelled`).
    func stopSending() {
        idle?.stop()
        idle = nil
        uploadChannel?.finish(error: HTTPClientError.cancelled)
    }

    /// Fails a transfer that never reached libcurl (refused, or the client shut down).
    func fail(_ error: HTTPClientError) {
        uploadChannel?.finish(error: error)
        let completion = waiters.withLock {
            $0.finished = true
            let taken = $0.completion
            $0.completion = nil
            return taken
        }
        completion?.resume(throwing: error)
    }

    // MARK: libcurl callbacks (event thread)

    /// One header line, kept as bytes (parsing waits for the caller's task): a status line starts
    /// a new block, a blank line ends it.
    func receiveHeader(_ line: UnsafeBufferPointer<UInt8>) {
        idle?.moved()
        if Self.isStatusLine(line) {
            // "HTTP/1.1 200 …" or "HTTP/2 200": the three digits after the first space.
            status = 0
            if let space = line.firstIndex(of: 0x20), space + 3 < line.count || space + 3 == line.count {
                for byte in line[(space + 1)..<min(space + 4, line.count)] where (0x30...0x39).contains(byte) {
                    status = status * 10 + Int(byte - 0x30)
                }
            }
            headBytes.removeAll(keepingCapacity: true)
            headFacts = RawHead.Facts()
            // One buffer for a typical head (growing line by line copied it five times).
            if headBytes.capacity < 1024 { headBytes.reserveCapacity(1024) }
        } else if line.count <= 2, line.allSatisfy({ $0 == 0x0D || $0 == 0x0A }) {
            // 1xx blocks (100 Continue) are followed by the real one. A small announced body is
            // awaited: `finish` hands head and body over together.
            if status >= 200, !headDelivered, !headHeld {
                if holdHeadUpTo > 0, let length = headFacts.contentLength, length <= holdHeadUpTo {
                    headHeld = true
                } else {
                    deliverHead()
                }
            }
        } else {
            headBytes.append(contentsOf: line)
            var end = line.count
            while end > 0, line[end - 1] == 0x0D || line[end - 1] == 0x0A { end -= 1 }
            headFacts.add(UnsafeBufferPointer(rebasing: line[..<end]))
        }
    }

    /// The line starts with `HTTP/` (a status line; compared in place, once per header line).
    private static func isStatusLine(_ line: UnsafeBufferPointer<UInt8>) -> Bool {
        line.count >= 5 && line[0] == UInt8(ascii: "H") && line[1] == UInt8(ascii: "T") && line[2] == UInt8(ascii: "T")
            && line[3] == UInt8(ascii: "P") && line[4] == UInt8(ascii: "/")
    }

    /// Body bytes, kept up to the limit (an exchange on the loop hands them to its reader).
    func receiveBody(_ data: UnsafeBufferPointer<UInt8>) -> Int {
        guard body.count + data.count <= bufferLimit else {
            tooLarge = true
            return 0
        }
        body.append(contentsOf: data)
        return data.count
    }

    /// Request body bytes for libcurl.
    func sendBody(into destination: UnsafeMutableRawPointer, capacity: Int) -> Int {
        if let channel = uploadChannel {
            guard let count = channel.read(into: destination, capacity: capacity) else {
                pausedForRead = true
                return Int(CURL_READFUNC_PAUSE)
            }
            // A producer that failed must not end the body as if it were complete (a chunked
            // body would look whole to the server): abort the transfer instead.
            if count == 0, channel.hasFailed { return Int(CURL_READFUNC_ABORT) }
            idle?.moved()
            return count
        }
        let count = min(capacity, uploadBytes.count - uploadOffset)
        guard count > 0 else { return 0 }
        uploadBytes.withUnsafeBytes { raw in
            destination.copyMemory(from: raw.baseAddress! + uploadOffset, byteCount: count)
        }
        uploadOffset += count
        return count
    }
}

/// A complete response.
public struct HTTPClientResponse: Sendable {
    public var head: HTTPResponse
    public var body: [UInt8]

    public init(head: HTTPResponse, body: [UInt8]) {
        self.head = head
        self.body = body
    }
}

// libcurl callbacks: `userdata` is the unretained Transfer (kept alive by the client's active set,
// so the callbacks borrow it without a retain of their own).

let headerCallback: curl_write_callback = { buffer, size, count, userdata in
    let length = size * count
    Unmanaged<Transfer>.fromOpaque(userdata!)._withUnsafeGuaranteedRef { transfer in
        buffer!.withMemoryRebound(to: UInt8.self, capacity: length) {
            transfer.receiveHeader(UnsafeBufferPointer(start: $0, count: length))
        }
    }
    return length
}

let writeCallback: curl_write_callback = { buffer, size, count, userdata in
    let length = size * count
    return Unmanaged<Transfer>.fromOpaque(userdata!)._withUnsafeGuaranteedRef { transfer in
        buffer!.withMemoryRebound(to: UInt8.self, capacity: length) {
            transfer.receiveBody(UnsafeBufferPointer(start: $0, count: length))
        }
    }
}

let readCallback: curl_read_callback = { buffer, size, count, userdata in
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    return transfer.sendBody(into: UnsafeMutableRawPointer(buffer!), capacity: size * count)
}

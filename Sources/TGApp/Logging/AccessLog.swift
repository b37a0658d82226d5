import Synchronization
import TGEventLoop

#if canImport(Glibc)
import Glibc
#endif

/// The access log: one JSON line per request, the shape ``JSONLogHandler`` gives a `request` line
/// (`{"time":…,"level":"info","label":…,"message":"request","duration_ms":…,"method":…,"remote":…,
/// "request_id":…,"route":…,"status":…}`), formatted straight into bytes and buffered per thread
/// (an event loop's, or a task thread's), like nginx's `access_log … buffer=32k flush=1s`:
/// a thread's buffer is written when it holds ``Settings/bufferSize`` bytes, and by
/// ``flushDue(now:)`` once its oldest line is ``Settings/flushInterval`` old (a thread of its own
/// calls it, ``start()``); ``stop()`` writes what is left (the server calls it after draining).
/// Each write is whole lines, at most one buffer at a time, so lines of different loops never mix.
public final class AccessLog: @unchecked Sendable {
    // Invariants: `buffers` is only accessed with `registry` held, and a buffer's bytes with its
    // own lock held; the output is written only with a buffer's lock and then `writing` held (in
    // that order, never the other), so writes are whole lines and one at a time. `key` (buffered
    // logs only) is created in init and deleted in deinit; `flusher` only with its own lock held.
    public struct Settings: Sendable {
        /// A thread's buffer is written once it holds this many bytes (0: every line at once).
        public var bufferSize = 32 * 1024
        /// The longest a line waits in a buffer, give or take a quarter of it.
        public var flushInterval: Duration = .seconds(1)

        public init(bufferSize: Int = 32 * 1024, flushInterval: Duration = .seconds(1)) {
            self.bufferSize = bufferSize
            self.flushInterval = flushInterval
        }
    }

    /// One thread's lines not yet written.
    final class Buffer: Sendable {
        let state = Mutex(State())

        struct State {
            var bytes: [UInt8] = []
            /// When the oldest line in `bytes` was added (``AccessLog`` clock).
            var since: Int64 = 0
            /// The wall-clock second `secondPrefix` spells, and its `"2026-11-28T14:49:02.`.
            var second = Int.min
            var secondPrefix: [UInt8] = []
        }
    }

    public let settings: Settings
    private let label: [UInt8]
    private let sink: any LogSink
    private let now: @Sendable () -> Int64
    private let interval: Int64
    private var key = pthread_key_t()
    private let registry = Mutex<[Buffer]>([])
    private let writing = Mutex(())
    private let flusher = Mutex<Flusher?>(nil)

    /// Lines labelled `label` (the logger's) written to `sink`; `now` is the clock of
    /// ``flushDue(now:)`` in nanoseconds (default: the event loops' monotonic clock; tests pass their own).
    public init(
        label: String,
        sink: any LogSink,
        settings: Settings = Settings(),
        now: (@Sendable () -> Int64)? = nil
    ) {
        self.label = Array(label.utf8)
        self.sink = sink
        self.settings = settings
        self.now = now ?? { EventLoop.now() }
        interval = max(1, EventLoop.nanoseconds(settings.flushInterval))
        // Unbuffered, no thread has a buffer (and the process's few thread keys are not used).
        if settings.bufferSize > 0 { precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed") }
    }

    deinit {
        stop()
        if settings.bufferSize > 0 { pthread_key_delete(key) }
    }

    /// Appends one request's line to the calling thread's buffer (and writes the buffer when full).
    public func record(requestID: String, method: String, route: String, status: Int, nanoseconds: Int64, remote: String?) {
        guard settings.bufferSize > 0 else {
            var state = Buffer.State()
            appendLine(&state, requestID: requestID, method: method, route: route, status: status, nanoseconds: nanoseconds, remote: remote)
            write(&state)
            return
        }
        let buffer = threadBuffer()
        buffer.state.withLock { state in
            if state.bytes.isEmpty {
                state.since = now()
                if state.bytes.capacity == 0 { state.bytes.reserveCapacity(settings.bufferSize + 512) }
            }
            appendLine(&state, requestID: requestID, method: method, route: route, status: status, nanoseconds: nanoseconds, remote: remote)
            if state.bytes.count >= settings.bufferSize { write(&state) }
        }
    }

    /// Writes every buffer whose oldest line is at least ``Settings/flushInterval`` older than `now`.
    public func flushDue(now: Int64) {
        for buffer in registry.withLock({ $0 }) {
            buffer.state.withLock { state in
                if !state.bytes.isEmpty, now - state.since >= interval { write(&state) }
            }
        }
    }

    /// Writes every buffer now.
    public func flush() {
        for buffer in registry.withLock({ $0 }) {
            buffer.state.withLock { state in
                if !state.bytes.isEmpty { write(&state) }
            }
        }
    }

    /// Starts the thread that writes lines past their interval (a quarter of it apart). Once.
    public func start() {
        flusher.withLock { flusher in
            guard flusher == nil else { return }
            let started = Flusher(period: max(1_000_000, interval / 4)) { [weak self] in
                guard let self else { return }
                self.flushDue(now: self.now())
            }
            started.start()
            flusher = started
        }
    }

    /// Stops the thread and writes what is left. Lines recorded afterwards are still buffered and
    /// written by the next ``flush()`` (or when full).
    public func stop() {
        let running = flusher.withLock { flusher in
            defer { flusher = nil }
            return flusher
        }
        running?.stop()
        flush()
    }

    private func write(_ state: inout Buffer.State) {
        writing.withLock { _ in
            state.bytes.withUnsafeBytes { sink.write(lines: $0) }
        }
        state.bytes.removeAll(keepingCapacity: true)
    }

    private func threadBuffer() -> Buffer {
        if let existing = pthread_getspecific(key) {
            return Unmanaged<Buffer>.fromOpaque(existing).takeUnretainedValue()
        }
        let buffer = Buffer()
        // Kept by the registry for the log's life: the thread's pointer stays valid after the
        // thread ends (its lines are still written by the next flush).
        registry.withLock { $0.append(buffer) }
        pthread_setspecific(key, Unmanaged.passUnretained(buffer).toOpaque())
        return buffer
    }
}

extension AccessLog {
    fileprivate func appendLine(
        _ state: inout Buffer.State,
        requestID: String,
        method: String,
        route: String,
        status: Int,
        nanoseconds: Int64,
        remote: String?
    ) {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        if time.tv_sec != state.second {
            state.secondPrefix = Self.secondPrefix(time.tv_sec)
            state.second = time.tv_sec
        }
        state.bytes.append(contentsOf: #"{"time":""#.utf8)
        state.bytes.append(contentsOf: state.secondPrefix)
        let millis = time.tv_nsec / 1_000_000
        state.bytes.append(UInt8(48 + millis / 100))
        state.bytes.append(UInt8(48 + millis / 10 % 10))
        state.bytes.append(UInt8(48 + millis % 10))
        state.bytes.append(contentsOf: #"Z","level":"info","label":"#.utf8)
        Self.appendQuoted(label, to: &state.bytes)
        // The keys in JSONLogHandler's order (sorted); the duration as it prints a Double.
        state.bytes.append(contentsOf: #","message":"request","duration_ms":"#.utf8)
        Self.appendMilliseconds(nanoseconds, to: &state.bytes)
        state.bytes.append(contentsOf: #","method":"#.utf8)
        Self.appendQuoted(method, to: &state.bytes)
        state.bytes.append(contentsOf: #","remote":"#.utf8)
        Self.appendQuoted(remote ?? "-", to: &state.bytes)
        state.bytes.append(contentsOf: #","request_id":"#.utf8)
        Self.appendQuoted(requestID, to: &state.bytes)
        state.bytes.append(contentsOf: #","route":"#.utf8)
        Self.appendQuoted(route, to: &state.bytes)
        state.bytes.append(contentsOf: #","status":"#.utf8)
        Self.appendDecimal(Int64(status), to: &state.bytes)
        state.bytes.append(contentsOf: "}\n".utf8)
    }

    /// `"2026-11-28T14:49:02.` of a second since the epoch (UTC).
    static func secondPrefix(_ seconds: Int) -> [UInt8] {
        var seconds = seconds
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var bytes: [UInt8] = []
        func digits(_ value: Int32, _ count: Int) {
            var divisor: Int32 = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 {
                bytes.append(UInt8(48 + value / divisor % 10))
                divisor /= 10
            }
        }
        digits(parts.tm_year + 1900, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(parts.tm_mon + 1, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(parts.tm_mday, 2)
        bytes.append(UInt8(ascii: "T"))
        digits(parts.tm_hour, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(parts.tm_min, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(parts.tm_sec, 2)
        bytes.append(UInt8(ascii: "."))
        return bytes
    }

    /// Appends `text` as a JSON string literal, escaped as ``JSONLogHandler/appendQuoted(_:to:)``
    /// escapes it (other bytes, UTF-8 included, as they are): runs without an escape are copied whole.
    static func appendQuoted(_ text: String, to bytes: inout [UInt8]) {
        var text = text
        text.withUTF8 { appendQuoted($0, to: &bytes) }
    }

    static func appendQuoted(_ text: [UInt8], to bytes: inout [UInt8]) {
        text.withUnsafeBufferPointer { appendQuoted($0, to: &bytes) }
    }

    static func appendQuoted(_ text: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var start = 0
        for index in 0..<text.count {
            let byte = text[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[start..<index]))
            start = index + 1
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): bytes.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\n"): bytes.append(contentsOf: #"\n"#.utf8)
            case UInt8(ascii: "\r"): bytes.append(contentsOf: #"\r"#.utf8)
            case UInt8(ascii: "\t"): bytes.append(contentsOf: #"\t"#.utf8)
            default:
                let hex = UInt8(ascii: "0")
                bytes.append(contentsOf: #"\u00"#.utf8)
                bytes.append(hex + byte >> 4)
                bytes.append(byte & 0xF < 10 ? hex + byte & 0xF : UInt8(ascii: "a") + byte & 0xF - 10)
            }
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[start...]))
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends `value` in decimal.
    static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buffer in
            var index = buffer.count
            repeat {
                index -= 1
                buffer[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: buffer[index...])
        }
    }

    /// Appends `nanoseconds` as milliseconds rounded to the microsecond, as Swift prints that
    /// `Double` (`(ms * 1000).rounded() / 1000`, which ``JSONLogHandler`` printed): `0.0`, `1.5`,
    /// `12.345`, without going through a `Double`'s text.
    static func appendMilliseconds(_ nanoseconds: Int64, to bytes: inout [UInt8]) {
        let micros = (Double(nanoseconds) / 1e6 * 1000).rounded()
        // Beyond 2^53 µs (285 years) a Double's text would switch to an exponent.
        guard micros.magnitude < 9e15 else {
            bytes.append(contentsOf: "\(micros / 1000)".utf8)
            return
        }
        let whole = Int64(micros)
        appendDecimal(whole / 1000, to: &bytes)
        if whole < 0, whole / 1000 == 0 { bytes.insert(UInt8(ascii: "-"), at: bytes.count - 1) }
        bytes.append(UInt8(ascii: "."))
        var fraction = Int(whole.magnitude % 1000)
        var width = 3
        while width > 1, fraction % 10 == 0 {
            fraction /= 10
            width -= 1
        }
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(fraction / divisor % 10))
            divisor /= 10
        }
    }
}

/// The thread that calls ``AccessLog/flushDue(now:)`` every `period` nanoseconds until stopped.
private final class Flusher: @unchecked Sendable {
    // Invariant: `stopping` only with `lock` held (the condition waits on it); `thread` is set by
    // `start` and read by `stop`, which the access log calls in that order under its own lock.
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var stopping = false
    private let period: Int64
    private let tick: @Sendable () -> Void
    private var thread: pthread_t?

    init(period: Int64, tick: @escaping @Sendable () -> Void) {
        self.period = period
        self.tick = tick
        pthread_mutex_init(lock, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(lock)
        condition.deallocate()
        lock.deallocate()
    }

    func start() {
        var created = pthread_t()
        let result = pthread_create(
            &created,
            nil,
            { argument in
                let flusher = Unmanaged<Flusher>.fromOpaque(argument!).takeRetainedValue()
                flusher.run()
                return nil
            },
            Unmanaged.passRetained(self).toOpaque()
        )
        precondition(result == 0, "cannot start the access log's flusher: \(result)")
        thread = created
    }

    func stop() {
        pthread_mutex_lock(lock)
        stopping = true
        pthread_cond_signal(condition)
        pthread_mutex_unlock(lock)
        if let thread {
            // The log's last reference may go away in a tick, on this very thread.
            if pthread_equal(thread, pthread_self()) != 0 { pthread_detach(thread) } else { pthread_join(thread, nil) }
        }
        thread = nil
    }

    private func run() {
        pthread_mutex_lock(lock)
        while !stopping {
            var deadline = timespec()
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            let next = Int64(deadline.tv_sec) * 1_000_000_000 + Int64(deadline.tv_nsec) + period
            deadline.tv_sec = Int(next / 1_000_000_000)
            deadline.tv_nsec = Int(next % 1_000_000_000)
            pthread_cond_timedwait(condition, lock, &deadline)
            if stopping { break }
            pthread_mutex_unlock(lock)
            tick()
            pthread_mutex_lock(lock)
        }
        pthread_mutex_unlock(lock)
    }
}

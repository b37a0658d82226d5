public import Foundation
import Synchronization
import TGEventLoop
import TGHTTPClient
import TGHTTPServer

/// Whom a proxied call's credential stands for, as far as its streamed answer is concerned: the
/// session its token opened (an id the assembler gives; the proxy knows HTTP, not OAuth), and
/// until when that session is known to live unless something ends it sooner.
public struct StreamHolder: Sendable, Equatable {
    public var session: UUID
    public var validUntil: Date

    public init(session: UUID, validUntil: Date) {
        self.session = session
        self.validUntil = validUntil
    }
}

/// A live answer that ends with its session (``OpenStreams``): a streamed body, a WebSocket.
protocol SessionBoundStream: AnyObject, Sendable {
    /// The loop of its connection, where it is ended.
    var loop: EventLoop { get }
    /// Its session ended (on ``loop``).
    func end()
    /// The instance shuts down (on ``loop``): it ends soon, cleanly if it can.
    func endForShutdown()
}

/// The answers this instance is streaming to apps (server-sent events, long downloads: every
/// proxied body not sent in one piece; WebSocket connections), by the session that opened them, so that they end with
/// it (docs/proxy.md, "Streams end with the session"). Whoever learns that sessions ended (the
/// assembler's watcher: every instance's `NOTIFY`, and its own check of expiries) calls
/// ``end(sessions:)``; each stream is then ended on its own loop.
///
/// How a stream ends: an event stream (`text/event-stream`) that is between two events gets a
/// last event, `event: tokengate.session_ended`, and then ends cleanly (its last chunk); any
/// other answer, or an event stream cut in the middle of an event, has its connection closed, so
/// that the app sees it incomplete rather than complete. A WebSocket gets a close frame (1008)
/// at its next frame boundary each way (``WebSocketRelay``).
public final class OpenStreams: Sendable {
    struct State {
        var bySession: [UUID: [ObjectIdentifier: any SessionBoundStream]] = [:]
        /// Per session, until when it was last known to live.
        var validUntil: [UUID: Date] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    /// The last event an event stream gets when its session ends.
    public static let endEvent = Array("event: tokengate.session_ended\ndata: {\"reason\":\"session_ended\"}\n\n".utf8)

    /// Streams open now.
    public var count: Int { state.withLock { $0.bySession.values.reduce(0) { $0 + $1.count } } }

    /// The sessions with a stream open now.
    public var sessions: [UUID] { state.withLock { Array($0.bySession.keys) } }

    /// The sessions with a stream open whose known end is at or before `now` (to be looked at
    /// again: a refresh may have pushed it on).
    public func due(at now: Date) -> [UUID] {
        state.withLock { state in state.validUntil.compactMap { $0.value <= now ? $0.key : nil } }
    }

    /// `session` was found to live until `until` (a later look at the store).
    public func extend(_ session: UUID, until: Date) {
        state.withLock { state in
            guard state.bySession[session] != nil else { return }
            state.validUntil[session] = until
        }
    }

    /// Ends every stream of `sessions`, each on its loop. Returns how many it ends.
    @discardableResult
    public func end(sessions: some Sequence<UUID>) -> Int {
        let ending = state.withLock { state in
            var ending: [any SessionBoundStream] = []
            for session in sessions {
                guard let streams = state.bySession.removeValue(forKey: session) else { continue }
                state.validUntil[session] = nil
                ending.append(contentsOf: streams.values)
            }
            return ending
        }
        for stream in ending {
            // A loop that stopped has closed its connections already.
            _ = stream.loop.execute { stream.end() }
        }
        return ending.count
    }

    /// The instance is shutting down: every event stream ends cleanly at its next event boundary
    /// and every WebSocket gets a close frame (1001) at its next frame boundary (their apps
    /// reconnect, to another instance), instead of holding the drain until it is cut. Other
    /// answers go on while the drain lets them.
    public func endForShutdown() {
        let all = state.withLock { state in state.bySession.values.flatMap { $0.values } }
        for stream in all {
            _ = stream.loop.execute { stream.endForShutdown() }
        }
    }

    func add(_ stream: any SessionBoundStream, holder: StreamHolder) {
        state.withLock { state in
            state.bySession[holder.session, default: [:]][ObjectIdentifier(stream)] = stream
            let known = state.validUntil[holder.session]
            state.validUntil[holder.session] = known.map { max($0, holder.validUntil) } ?? holder.validUntil
        }
    }

    func remove(_ stream: any SessionBoundStream, session: UUID) {
        state.withLock { state in
            guard var streams = state.bySession[session], streams.removeValue(forKey: ObjectIdentifier(stream)) != nil else { return }
            if streams.isEmpty {
                state.bySession[session] = nil
                state.validUntil[session] = nil
            } else {
                state.bySession[session] = streams
            }
        }
    }
}

/// What a streamed answer is held by: the register, the holder, and the loop of its connection.
struct StreamHold {
    let streams: OpenStreams
    let holder: StreamHolder
    let loop: EventLoop
}

/// An upstream exchange as a response body (as ``ExchangeBody``) that its session's end can end
/// (``OpenStreams``). Registered while it is read; gone from the register once the response is.
final class SessionStreamBody: ResponseBodySource, SessionBoundStream, @unchecked Sendable {
    // Invariant: used only on `loop`, the loop of the exchange and the connection (the server
    // calls a source only there, and ``OpenStreams/end(sessions:)`` ends it there).
    let exchange: LoopExchange
    let loop: EventLoop
    private let hold: StreamHold
    let isEventStream: Bool
    /// The session ended: what is left to send of the last event, then how the body ends.
    private var ending: (rest: [UInt8], sent: Int, outcome: ResponseBodyRead)?
    /// The server waits to be told there is something to read.
    private var ready: (() -> Void)?
    /// The last three bytes passed on (an event stream's: whether it is between two events).
    private var tail: (UInt8, UInt8, UInt8) = (0x0A, 0x0A, 0x0A)
    /// The instance is shutting down: the event stream ends cleanly at its next event boundary.
    private var endsAtBoundary = false

    init(_ exchange: LoopExchange, hold: StreamHold, isEventStream: Bool) {
        self.exchange = exchange
        self.hold = hold
        loop = hold.loop
        self.isEventStream = isEventStream
        hold.streams.add(self, holder: hold.holder)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ResponseBodyRead {
        if let ending { return finish(ending, into: buffer) }
        switch exchange.read(into: buffer) {
        case .bytes(let count):
            if isEventStream {
                remember(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                if endsAtBoundary, betweenEvents { stop(sending: []) }
            }
            return .bytes(count)
        case .wait: return .wait
        case .end: return .end
        case .failed: return .failed
        }
    }

    func notify(when ready: @escaping () -> Void) {
        if ending != nil {
            ready()
            return
        }
        self.ready = ready
        exchange.notify { [self] in wake() }
    }

    func close() {
        hold.streams.remove(self, session: hold.holder.session)
        if ending == nil, !exchange.isComplete { exchange.cancel() }
        ready = nil
    }

    /// The session ended (on the loop): the exchange stops, and the server, if it waits, reads
    /// the end.
    func end() {
        guard ending == nil else { return }
        if isEventStream, betweenEvents { stop(sending: OpenStreams.endEvent) } else { stop(sending: nil) }
    }

    func endForShutdown() {
        endAtBoundary()
    }

    /// The instance shuts down (on the loop): an event stream ends cleanly now if it is between
    /// two events, else at the end of the current one; any other answer goes on while the drain
    /// lets it.
    func endAtBoundary() {
        guard ending == nil, isEventStream else { return }
        if betweenEvents { stop(sending: []) } else { endsAtBoundary = true }
    }

    /// Stops the exchange; the body ends cleanly after `last`, or is cut when `last` is nil. The
    /// server, if it waits, reads that.
    private func stop(sending last: [UInt8]?) {
        if !exchange.isComplete { exchange.cancel() }
        ending = last.map { ($0, 0, .end) } ?? ([], 0, .failed)
        wake()
    }

    private func wake() {
        guard let ready else { return }
        self.ready = nil
        ready()
    }

    private func finish(
        _ ending: (rest: [UInt8], sent: Int, outcome: ResponseBodyRead),
        into buffer: UnsafeMutableRawBufferPointer
    ) -> ResponseBodyRead {
        guard ending.sent < ending.rest.count else { return ending.outcome }
        let count = min(buffer.count, ending.rest.count - ending.sent)
        ending.rest.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + ending.sent, byteCount: count) }
        self.ending?.sent += count
        return .bytes(count)
    }

    /// A blank line ended the last event: `\n\n`, `\r\r` or `\n\r\n` (`\r\n\r\n`) last passed on.
    private var betweenEvents: Bool {
        let (a, b, c) = tail
        return (b == 0x0A && c == 0x0A) || (b == 0x0D && c == 0x0D) || (a == 0x0A && b == 0x0D && c == 0x0A)
    }

    private func remember(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes.suffix(3) { tail = (tail.1, tail.2, byte) }
    }
}

extension ProxyHeaders {
    /// The API's answer is a stream of server-sent events: `Content-Type: text/event-stream`
    /// (in any case, with parameters or not).
    static func isEventStream(_ head: RawHead) -> Bool {
        var found = false
        head.forEachField { name, value in
            guard !found, RawHeaderFields.equalsIgnoringCase(name, "content-type") else { return }
            let type = String(decoding: value, as: UTF8.self).split(separator: ";", maxSplits: 1).first ?? ""
            found = type.trimmingCharacters(in: .whitespaces).lowercased() == "text/event-stream"
        }
        return found
    }
}

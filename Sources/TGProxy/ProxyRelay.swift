import HTTPTypes
import TGHTTPClient
import TGHTTPServer

/// An API's answer passed back to the app from the exchange, on the loop of both: the fields by
/// the rules of ``ProxyHeaders``, the body in one piece when it came whole with the head, else
/// read from the exchange as it arrives. Answers of an API with `rewrite_links`
/// (``ProxyLinkRewrite``): a JSON body within the limit is read whole before the head goes out,
/// so that the rewritten body goes with its own length.
enum ProxyRelay {
    /// The API's answer as it is: a small body already complete goes out in one piece, anything
    /// else is read from the exchange on the loop as it arrives. The fields go from libcurl's
    /// bytes to libmicrohttpd's without `HTTPFields` in between
    /// (``ProxyHeaders/relay(_:location:links:into:)``); `links`: the API's `rewrite_links`, for
    /// its `Link` fields.
    static func relay(
        _ head: RawHead,
        _ exchange: LoopExchange,
        method: HTTPRequest.Method,
        location: ProxyLocation?,
        links: ProxyLinkRewrite? = nil,
        hold: StreamHold? = nil
    ) -> ServerResponse {
        // The body chosen first and the answer made with it: an answer made empty, given its
        // body afterwards and returned was copied (every field's reference counted twice) and
        // the original destroyed, on every call.
        let whole = exchange.isComplete && method != .head
        var response = ServerResponse(
            status: HTTPResponse.Status(code: head.status),
            body: whole ? .bytes(exchange.takeAll()) : .source(streamedBody(head, exchange, method: method, hold: hold))
        )
        ProxyHeaders.relay(head, location: location, links: links, into: &response)
        // A body read as it arrives is as long as announced (HEAD: the length of a GET's).
        if !whole, let length = head.contentLength { response.headerFields[.contentLength] = String(length) }
        return response
    }

    /// A body read as it arrives: held by its session (``OpenStreams``) when it has one and the
    /// answer has a body.
    static func streamedBody(_ head: RawHead, _ exchange: LoopExchange, method: HTTPRequest.Method, hold: StreamHold?) -> any ResponseBodySource {
        guard let hold, method != .head else { return ExchangeBody(exchange) }
        return SessionStreamBody(exchange, hold: hold, isEventStream: ProxyHeaders.isEventStream(head))
    }

    /// The answer of an API with `rewrite_links`, from the exchange whose head arrived, on the
    /// loop: answered at once when the body is not to be rewritten, else once it
    /// has been read (``LoopLinkRelay``).
    static func relayRewriting(
        _ head: RawHead,
        _ exchange: LoopExchange,
        method: HTTPRequest.Method,
        rewrite: ProxyLinkRewrite,
        responder: any ProxyResponder,
        hold: StreamHold? = nil
    ) {
        let plan: ProxyLinkRewrite.Plan =
            method == .head ? .pass(nil) : rewrite.plan(status: head.status, contentLength: head.contentLength) { head.forEachField($0) }
        guard plan == .read else {
            if case .pass(let outcome?) = plan { rewrite.count(outcome) }
            responder.respond(relay(head, exchange, method: method, location: rewrite.location, links: rewrite, hold: hold))
            return
        }
        LoopLinkRelay(head: head, exchange: exchange, rewrite: rewrite, responder: responder, hold: hold).start()
    }
}

/// A JSON answer of an API with `rewrite_links` read on the loop: the body is taken from the
/// exchange as it arrives (which keeps its transfer going) until it ends, and then answered
/// rewritten in one piece; past `rewrite_max_body_bytes` (a body of unknown length), what was
/// read goes out unchanged and the rest streams after it.
final class LoopLinkRelay: @unchecked Sendable {
    // Invariant: used only on the loop of the exchange and the connection (the exchange calls
    // back there, and the relay starts from its head callback).
    let head: RawHead
    let exchange: LoopExchange
    let rewrite: ProxyLinkRewrite
    let responder: any ProxyResponder
    let hold: StreamHold?
    private var body: [UInt8] = []

    init(head: RawHead, exchange: LoopExchange, rewrite: ProxyLinkRewrite, responder: any ProxyResponder, hold: StreamHold?) {
        self.head = head
        self.exchange = exchange
        self.rewrite = rewrite
        self.responder = responder
        self.hold = hold
    }

    func start() {
        if exchange.isComplete {
            // A small body came with the head.
            body = exchange.takeAll()
            answer()
            return
        }
        body.reserveCapacity(min(head.contentLength ?? Self.piece, rewrite.maxBodyBytes + 1))
        pump()
    }

    /// Bytes read from the exchange at once.
    static let piece = 64 * 1024

    private func pump() {
        while body.count <= rewrite.maxBodyBytes {
            let read = withUnsafeTemporaryAllocation(byteCount: Self.piece, alignment: 1) { buffer in
                let read = exchange.read(into: buffer)
                if case .bytes(let count) = read { body.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[..<count])) }
                return read
            }
            switch read {
            case .bytes:
                continue
            case .wait:
                // The exchange holds this relay until it calls back (or is cancelled).
                exchange.notify { self.pump() }
                return
            case .end:
                answer()
                return
            case .failed(let error):
                // Nothing went out yet: the app gets TokenGate's answer, as before a head.
                responder.fail(error == .timeout ? ProxyError.upstreamTimeout : ProxyError.upstreamUnavailable)
                return
            }
        }
        // Longer than the limit (its length was not announced): unchanged.
        rewrite.count(.tooLarge)
        var response = ServerResponse(status: HTTPResponse.Status(code: head.status))
        ProxyHeaders.relay(head, location: rewrite.location, links: rewrite, into: &response)
        if let length = head.contentLength { response.headerFields[.contentLength] = String(length) }
        response.body = .source(PrefixedExchangeBody(prefix: body, ProxyRelay.streamedBody(head, exchange, method: .get, hold: hold)))
        body = []
        responder.respond(response)
    }

    /// The whole body is here: rewritten, in one piece (the server sets its length).
    private func answer() {
        var response = ServerResponse(status: HTTPResponse.Status(code: head.status))
        ProxyHeaders.relay(head, location: rewrite.location, links: rewrite, into: &response)
        response.body = .bytes(rewrite.rewrite(body))
        body = []
        responder.respond(response)
    }
}

/// Bytes already read from an exchange, then the rest of it (its body), both on the loop.
final class PrefixedExchangeBody: ResponseBodySource, @unchecked Sendable {
    // Invariant: used only on the loop of the exchange and the connection (the server calls a
    // source only there).
    private var prefix: [UInt8]
    private var sent = 0
    private let rest: any ResponseBodySource

    init(prefix: [UInt8], _ rest: any ResponseBodySource) {
        self.prefix = prefix
        self.rest = rest
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ResponseBodyRead {
        guard sent < prefix.count else { return rest.read(into: buffer) }
        let count = min(buffer.count, prefix.count - sent)
        prefix.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + sent, byteCount: count) }
        sent += count
        if sent == prefix.count { prefix = [] }
        return .bytes(count)
    }

    func notify(when ready: @escaping () -> Void) {
        rest.notify(when: ready)
    }

    func close() {
        rest.close()
    }
}

/// An upstream exchange as a response body, both on the same loop.
final class ExchangeBody: ResponseBodySource, @unchecked Sendable {
    // Invariant: used only on the loop of the exchange and the connection (the server calls a
    // source only there).
    let exchange: LoopExchange

    init(_ exchange: LoopExchange) {
        self.exchange = exchange
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ResponseBodyRead {
        switch exchange.read(into: buffer) {
        case .bytes(let count): .bytes(count)
        case .wait: .wait
        case .end: .end
        case .failed: .failed
        }
    }

    func notify(when ready: @escaping () -> Void) {
        exchange.notify(when: ready)
    }

    func close() {
        if !exchange.isComplete { exchange.cancel() }
    }
}

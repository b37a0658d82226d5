import HTTPTypes
public import Logging
import Synchronization
import TGAuth
import TGEventLoop
public import TGHTTPServer
import TGStore

#if canImport(Glibc)
import Glibc
#endif

/// Turns a ``Router`` into the HTTP server's handler: request ids, one access-log line per request,
/// and the single place where errors become HTTP answers.
public final class Application: Sendable {
    public let router: Router
    public let logger: Logger
    /// Log one line per request (method, route, status, duration, request id; never a query string,
    /// header value or body).
    public let accessLog: Bool
    /// Peers whose forwarding fields say who the client is.
    public let trustedProxies: TrustedProxies
    /// Requests by route, method and status, and their latency (nil: not counted).
    public let metrics: TokenGateMetrics?
    /// Where access-log lines go when the logger prints JSON lines (``JSONLogHandler``) at `info`
    /// or below: the buffered log given, else one writing each line to the logger's sink at once.
    /// Nil: through `logger` (another handler), or no access log.
    public let accessLines: AccessLog?

    /// `accessLines`: a buffered access log (``AccessLog``); the server's owner starts and stops it.
    public init(
        router: Router,
        logger: Logger,
        accessLog: Bool = true,
        accessLines: AccessLog? = nil,
        trustedProxies: TrustedProxies = TrustedProxies([]),
        metrics: TokenGateMetrics? = nil
    ) {
        self.router = router
        self.logger = logger
        self.accessLog = accessLog
        self.trustedProxies = trustedProxies
        self.metrics = metrics
        if accessLog, logger.logLevel <= .info, let json = logger.handler as? JSONLogHandler {
            self.accessLines = accessLines ?? AccessLog(label: json.label, sink: json.sink, settings: AccessLog.Settings(bufferSize: 0))
        } else {
            self.accessLines = nil
        }
    }

    static let requestIDField = HTTPField.Name("X-Request-ID")!

    /// The handler to give ``HTTPServer``.
    public func makeHandler() -> HTTPServer.Handler {
        let app = self
        return { request in app.handle(request) }
    }

    /// The in-process entry, used by tests (TGAppTesting's `TestClient`): answers `request` through
    /// exactly the code a served request goes through (``makeHandler()``: route match, request id,
    /// the one catch site, metrics, access log); only the transport differs. A deferred reply gets
    /// a responder without a connection and its first answer is returned. What the server itself
    /// does stays out: body and head limits, deadlines, `Content-Length`, leaving out a `HEAD`
    /// answer's body; a streamed body is returned as it is, for the caller to drain. Make
    /// `request` with ``ServerRequest/init(head:body:remoteAddress:)``: without a loop, the routes
    /// that can answer from one (the proxy's cached call) take their async path.
    public func respond(to request: ServerRequest) async -> ServerResponse {
        switch handle(request) {
        case .response(let response):
            return response
        case .async(let produce):
            return await produce(request)
        case .deferred(let work):
            return await withCheckedContinuation { continuation in
                let once = FirstAnswer()
                work.start(
                    LoopResponder(inProcess: { response in
                        // The first answer wins, as on a connection.
                        if once.take() { continuation.resume(returning: response) }
                    })
                )
            }
        }
    }

    private func handle(_ request: ServerRequest) -> HTTPServer.Reply {
        // Monotonic nanoseconds: what the metrics take, without `Duration` arithmetic per request.
        let started = EventLoop.now()
        // The client address is settled once: the handler, the metrics and the log all use it.
        let requestID = Self.requestID(from: request.fields.first(Self.requestIDField))
        let clientAddress = clientAddress(request)
        switch router.match(request.method, path: request.path) {
        case .notFound:
            let info = RequestInfo(requestID: requestID, clientAddress: clientAddress)
            return .response(finish(Problem.notFound().response(), request, info, .unmatched, started))
        case .methodNotAllowed(let allowed):
            let info = RequestInfo(requestID: requestID, clientAddress: clientAddress)
            return .response(finish(Problem.methodNotAllowed(allowed).response(), request, info, .unmatched, started))
        case .found(let route, let parameters):
            // Made once with its parameters and handed on as it is (set afterwards, it was copied
            // into the call and destroyed twice on every call). A loop route's is its call.
            let info: RequestInfo
            if case .loop(let handler) = route.handler {
                info = LoopCall(
                    app: self,
                    handler: handler,
                    request: request,
                    requestID: requestID,
                    parameters: parameters,
                    clientAddress: clientAddress,
                    route: route.name,
                    started: started
                )
            } else {
                info = RequestInfo(requestID: requestID, parameters: parameters, clientAddress: clientAddress)
            }
            // The route's policy, before its handler: the rate limit here (from memory when it
            // can tell, else from the shared bucket below), the session below.
            // Buckets are per client key (an IPv6 client's /64), the log keeps the address.
            var limiter: RateLimiter?
            var key = "-"
            if let rateLimit = route.policy.rateLimit {
                key = rateLimit.key(for: info.clientAddress)
                switch rateLimit.decide(key) {
                case .admitted: break
                case .refused(let wait): return .response(finish(route.policy.refused(retryAfter: wait), request, info, route.name, started))
                case .ask: limiter = rateLimit
                }
            }
            switch route.handler {
            case .sync(let handler):
                if let limiter, let wait = limiter.local.admit(key) {
                    return .response(finish(route.policy.refused(retryAfter: wait), request, info, route.name, started))
                }
                return .response(finish(handler(request, info), request, info, route.name, started))
            case .loop:
                if let limiter, let wait = limiter.local.admit(key) {
                    return .response(finish(route.policy.refused(retryAfter: wait), request, info, route.name, started))
                }
                // Made as the call above (a loop route's info is its call).
                return .deferred(unsafeDowncast(info, to: LoopCall.self))
            case .async(let handler):
                let session = route.policy.session
                return .async { [info, limiter, key] request in
                    var info = info
                    let response: ServerResponse
                    if let limiter, let wait = await limiter.admit(key) {
                        return self.finish(route.policy.refused(retryAfter: wait), request, info, route.name, started)
                    }
                    do {
                        if let session { info = info.withSession(try await session(request)) }
                        response = try await handler(request, info)
                    } catch {
                        response = self.answer(error, requestID: info.requestID, route: route.pattern, form: route.policy.refusal)
                    }
                    return self.finish(response, request, info, route.name, started)
                }
            }
        }
    }

    /// The one catch site: errors that know their answer give it; a database that cannot answer
    /// now is a logged 503 in the route's error form (`form`: RFC 6749 §5.2's at the token and
    /// back-channel logout endpoints, problem+json elsewhere); anything else is a logged 500.
    func answer(_ error: any Error, requestID: String, route: String, form: RoutePolicy.Refusal) -> ServerResponse {
        if let error = error as? any HTTPResponseError { return error.response() }
        if let error = error as? StoreError, error.isTransient {
            logger.warning("database unavailable", metadata: ["request_id": .string(requestID), "route": .string(route)])
            switch form {
            case .problem:
                return Problem(
                    status: .serviceUnavailable,
                    code: "database_unavailable",
                    detail: "TokenGate's database is unavailable; try again shortly.",
                    headerFields: [.retryAfter: "5"]
                ).response()
            case .oauth:
                return OAuthError(.temporarilyUnavailable, "TokenGate's database is unavailable; try again shortly.", retryAfter: 5).response()
            }
        }
        logger.error(
            "unhandled error",
            metadata: ["request_id": .string(requestID), "route": .string(route), "error_type": "\(type(of: error))"]
        )
        return Problem.internalError(requestID: requestID).response()
    }

    /// `response` is consumed: the request id goes into it in place (a copy still held
    /// elsewhere would make setting it copy the answer first).
    fileprivate func finish(
        _ response: consuming ServerResponse,
        _ request: ServerRequest,
        _ info: RequestInfo,
        _ route: RouteName,
        _ started: Int64
    ) -> ServerResponse {
        let requestID = info.requestID
        if response.headerFields.first(Self.requestIDField) == nil {
            // The server sends it last: appending to the answer's `HTTPFields` would copy them
            // first (most answers share theirs with a constant), appending to its raw fields
            // would check and copy it. A relayed answer's raw fields never hold the upstream's
            // own id (`ProxyHeaders` drops it).
            response.requestID = requestID
        } else {
            response.headerFields[Self.requestIDField] = requestID
        }
        guard accessLog || metrics != nil else { return consume response }
        let elapsed = EventLoop.now() - started
        metrics?.request(
            route: route,
            method: request.method,
            status: response.status.code,
            nanoseconds: elapsed,
            shard: request.loop?.index ?? 0
        )
        if let accessLines {
            accessLines.record(
                requestID: requestID,
                method: request.method.rawValue,
                route: route.pattern,
                status: response.status.code,
                nanoseconds: elapsed,
                remote: info.clientAddress
            )
        } else if accessLog {
            let millis = Double(elapsed) / 1e6
            logger.info(
                "request",
                metadata: [
                    "request_id": .string(requestID), "method": .string(request.method.rawValue),
                    "route": .string(route.pattern), "status": .stringConvertible(response.status.code),
                    "duration_ms": .stringConvertible((millis * 1000).rounded() / 1000),
                    "remote": .string(info.clientAddress ?? "-"),
                ]
            )
        }
        // Moved out: a plain return copied the answer and destroyed the original (~290 instructions).
        return consume response
    }

    /// The client's address: the TCP peer, or what a trusted proxy in front says.
    func clientAddress(_ request: ServerRequest) -> String? {
        trustedProxies.isEmpty ? request.remoteAddress : trustedProxies.clientAddress(peer: request.remoteAddress, fields: request.fields)
    }

    /// A client-supplied id is kept when it is short and plain; otherwise a random one is made.
    static func requestID(from supplied: String?) -> String {
        if let supplied, (1...64).contains(supplied.utf8.count),
            supplied.utf8.allSatisfy({
                $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || (0x30...0x39).contains($0)
                    || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
            })
        {
            return supplied
        }
        // Unique, not secret (it is echoed and logged): a random per-process prefix of 48 bits and
        // a counter of 42, so no system call per request; 15 base64url characters, which a Swift
        // string holds without an allocation.
        let number = requestCounter.wrappingAdd(1, ordering: .relaxed).newValue
        let prefix = requestIDPrefix
        return String(unsafeUninitializedCapacity: 15) { buffer in
            // The prefix's eight characters as one word; the counter's seven one by one.
            UnsafeMutableRawPointer(buffer.baseAddress!).storeBytes(of: prefix, as: UInt64.self)
            base64URLDigits.withUnsafeBufferPointer { digits in
                for index in 0..<7 {
                    buffer[8 + index] = digits[Int((number >> (36 - 6 * UInt64(index))) & 0x3F)]
                }
            }
            return 15
        }
    }

    /// The first eight characters of every request id this process makes: 48 random bits in
    /// base64url, spelled once.
    private static let requestIDPrefix: UInt64 = {
        var random: UInt64 = 0
        withUnsafeMutableBytes(of: &random) { arc4random_buf($0.baseAddress!, 8) }
        var spelled: UInt64 = 0
        withUnsafeMutableBytes(of: &spelled) { bytes in
            for index in 0..<8 { bytes[index] = base64URLDigits[Int((random >> (42 - 6 * UInt64(index))) & 0x3F)] }
        }
        return spelled
    }()
    private static let requestCounter = Atomic<UInt64>(0)

    private static let base64URLDigits: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
}

/// A ``Router/Handler/loop(_:)`` route's call in flight: its request's info, and what its answer
/// needs to be finished (errors mapped, request id, metrics, access log) and sent, in one object
/// rather than a closure per step of every call.
final class LoopCall: RequestInfo, DeferredReply, @unchecked Sendable {
    // Invariant: `responder` is written once, in `start`, on the request's loop before the
    // handler runs; `respond` and `fail` (from the loop, or from a task the handler started) come
    // after it. Every other property is a `let`.
    let app: Application
    let handler: @Sendable (ServerRequest, RequestInfo, RouteResponder) -> Void
    let request: ServerRequest
    let route: RouteName
    let started: Int64
    /// The server's, given when the call starts: the route's responder is then the call alone
    /// (one reference, held in an existential's inline buffer: no box per call).
    private var responder: LoopResponder?

    init(
        app: Application,
        handler: @escaping @Sendable (ServerRequest, RequestInfo, RouteResponder) -> Void,
        request: ServerRequest,
        requestID: String,
        parameters: RouteParameters,
        clientAddress: String?,
        route: RouteName,
        started: Int64
    ) {
        self.app = app
        self.handler = handler
        self.request = request
        self.route = route
        self.started = started
        super.init(requestID: requestID, parameters: parameters, clientAddress: clientAddress)
    }

    /// On the request's loop, when the server made its responder.
    func start(_ responder: consuming LoopResponder) {
        self.responder = responder
        handler(request, self, RouteResponder(call: self))
    }

    /// The handler's answer, finished and sent. Taken as it is: wrapped in a `Result` and
    /// unwrapped again, it was copied out of the enum and the enum destroyed, on every call.
    func respond(_ response: consuming ServerResponse) {
        guard let responder else { preconditionFailure("a loop call answers after it started") }
        responder.respond(app.finish(response, request, self, route, started))
    }

    /// The handler's failure, mapped to its answer (``Application/answer(_:requestID:route:form:)``).
    func fail(_ error: any Error) {
        respond(app.answer(error, requestID: requestID, route: route.pattern, form: .problem))
    }
}

/// Lets the first of a deferred call's answers through (``Application/respond(to:)``).
private final class FirstAnswer: Sendable {
    private let taken = Atomic<Bool>(false)

    /// True once: for the first caller.
    func take() -> Bool { !taken.exchange(true, ordering: .acquiringAndReleasing) }
}

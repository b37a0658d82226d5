import CoreMetrics
import HTTPTypes
import TGEventLoop
import TGHTTPClient
import TGHTTPServer

/// One proxied call in flight: sent on its loop's client for the API with a credential from
/// memory or loaded first, its answer relayed when the head arrives, or sent once more with a
/// fresh token when the API refused the first.
final class ProxyCall: @unchecked Sendable {
    // Invariant: the mutable members are used only on `loop`, the request's: the call starts
    // there, its exchange calls back there, and a task that loads a credential or checks a proof
    // comes back there (`loop.execute`) before it sends.
    let proxy: Proxy
    let request: ServerRequest
    let upstream: ProxyUpstream
    let target: ProxyTarget
    let clientAddress: String?
    let requestID: String
    let responder: any ProxyResponder
    let loop: EventLoop
    let upload: ProxyUpload
    /// The app asks for a WebSocket (its handshake checked): the call opens one instead of an
    /// exchange (``openWebSocket(_:fromMemory:)``).
    let webSocket: Bool
    /// The exchange whose head is awaited (the call and it hold each other until then).
    private var exchange: LoopExchange?
    var sentToken = ""
    /// The session the sent token stands for (its streamed answer ends with it).
    var holder: StreamHolder?
    var fromMemory = true
    var retried = false

    init(
        proxy: Proxy,
        request: ServerRequest,
        upstream: ProxyUpstream,
        target: ProxyTarget,
        clientAddress: String?,
        requestID: String,
        responder: any ProxyResponder,
        loop: EventLoop,
        webSocket: Bool = false
    ) {
        self.proxy = proxy
        self.request = request
        self.upstream = upstream
        self.target = target
        self.clientAddress = clientAddress
        self.requestID = requestID
        self.responder = responder
        self.loop = loop
        self.webSocket = webSocket
        upload = ProxyUpload(request)
    }

    /// Loads the credential in a task (`rejected`: the token the API just refused), then sends
    /// from the loop.
    func load(rejected: String?) {
        Task {
            do {
                let credential = try await upstream.credentials.load(for: request, rejected: rejected)
                try await credential.check?()
                onLoop { $0.send(credential, fromMemory: false) }
            } catch {
                responder.fail(error)
            }
        }
    }

    /// Sends with `credential`; its check, if it has one, first, in a task.
    func send(_ credential: ProxyCredential, fromMemory: Bool) {
        if fromMemory, let check = credential.check {
            Task {
                do {
                    try await check()
                    let checked = ProxyCredential(token: credential.token, bearer: credential.bearer, holder: credential.holder)
                    onLoop { $0.send(checked, fromMemory: true) }
                } catch {
                    responder.fail(error)
                }
            }
            return
        }
        guard !credential.bearer.isEmpty else {
            responder.fail(ProxyError.unusableToken)
            return
        }
        if webSocket {
            openWebSocket(credential, fromMemory: fromMemory)
            return
        }
        let method = request.method
        let timeout = Duration.seconds(upstream.settings.timeoutSeconds)
        let exchange: LoopExchange
        do {
            exchange = try upstream.clients[loop.index].startOnLoop(
                LoopRequest(
                    method: method.rawValue,
                    scheme: upstream.scheme,
                    authority: upstream.authority,
                    path: upstreamPath(),
                    headers: requestLines(),
                    sharedHeaders: credential.bearer
                ),
                body: upload.body,
                headTimeout: timeout,
                idleTimeout: timeout,
                wholeBodyUpTo: Proxy.smallBody
            )
        } catch {
            responder.fail(upload.error(sending: error as? HTTPClientError ?? .shutDown))
            return
        }
        self.exchange = exchange
        sentToken = credential.token
        holder = credential.holder
        self.fromMemory = fromMemory
        // One capture, the call itself: no context to allocate.
        exchange.onHead = { self.headArrived($0) }
    }

    /// The call's header lines but the token's (``ProxyHeaders/requestLines(_:clientAddress:requestID:extra:extraLines:forwardedLines:)``).
    func requestLines() -> HeaderLines {
        ProxyHeaders.requestLines(
            request.fields,
            clientAddress: clientAddress,
            requestID: requestID,
            extra: upstream.extraFields,
            extraLines: upstream.extraLines,
            forwardedLines: proxy.forwardedLines
        )
    }

    /// `{base path}{path}?{query}`.
    func upstreamPath() -> String {
        // Most APIs have no base path: the target's path as it is, without an append.
        var path = upstream.basePath.isEmpty ? target.rawPath : upstream.basePath + target.rawPath
        if let query = request.rawQuery {
            path += "?"
            path += query
        }
        return path
    }

    private func headArrived(_ result: Result<RawHead, HTTPClientError>) {
        guard let exchange else { return }
        self.exchange = nil
        let head: RawHead
        switch result {
        case .success(let arrived): head = arrived
        case .failure(let error):
            responder.fail(upload.error(sending: error))
            return
        }
        let method = request.method
        if head.status == 401, let challenge = StepUpChallenge.find(in: head) {
            // A refresh cannot raise how the user signed in: the app is told what to ask for.
            exchange.cancel()
            responder.fail(ProxyError.stepUpRequired(challenge, upstream: upstream.settings.name, dpop: ProxyHeaders.presentsDPoP(request)))
            return
        }
        if head.status == 401, !retried, upload.replayable, Proxy.idempotent.contains(method), ProxyHeaders.saysInvalidToken(head) {
            // The API refused a token that looked valid (revoked, or rotated keys): one fresh
            // token and one more try. Only when the body can be sent again: none, or one read
            // whole; a streamed body is gone, so its 401 goes back as it is. Within the forced
            // refresh's cooldown the same token comes back, and the API's second 401 goes to the
            // app.
            exchange.cancel()
            retried = true
            load(rejected: sentToken)
            return
        }
        if let size = oversizedAnswerHead(head) {
            exchange.cancel()
            responder.fail(ProxyError.answerHeadTooLarge(size: size, room: request.answerHeadRoom))
            return
        }
        // The counter alone: binding `metrics` copied both (two counts and two releases a call).
        if fromMemory { proxy.metrics?.fromMemory.increment() } else { proxy.metrics?.loaded.increment() }
        // Only a body still arriving can be held (a complete one goes in one piece).
        let hold = exchange.isComplete ? nil : self.hold
        if let rewrite = upstream.linkRewrite {
            ProxyRelay.relayRewriting(head, exchange, method: method, rewrite: rewrite, responder: responder, hold: hold)
            return
        }
        responder.respond(ProxyRelay.relay(head, exchange, method: method, location: upstream.location, hold: hold))
    }

    /// The size of the head the app would get, when it is larger than the server can send with
    /// this request (libmicrohttpd would close the connection instead); nil when it fits. Worked
    /// out only when the API's head as received might not fit (it holds every field passed on).
    private func oversizedAnswerHead(_ head: RawHead) -> Int? {
        let room = request.answerHeadRoom
        // The request id line, and a rewritten `Location` or `Link` a little longer than the API's.
        let margin = 16 + requestID.utf8.count + 256
        guard head.byteCount + margin > room else { return nil }
        var relayed = ServerResponse(status: HTTPResponse.Status(code: head.status))
        ProxyHeaders.relay(head, location: upstream.location, links: upstream.linkRewrite, into: &relayed)
        relayed.requestID = requestID
        let size = relayed.headSize
        return size > room ? size : nil
    }

    /// What the streamed answer is held by (``OpenStreams``), when the token stands for a session.
    var hold: StreamHold? { holder.map { StreamHold(streams: proxy.streams, holder: $0, loop: loop) } }

    /// Runs `body` on the call's loop; a loop that stopped answers 503 instead.
    private func onLoop(_ body: @escaping @Sendable (ProxyCall) -> Void) {
        if !loop.execute({ body(self) }) { responder.fail(ProxyError.upstreamUnavailable) }
    }
}
